"""Benchmark the transformers backend against bare `model.generate` on the same model and prompt.

Three comparisons, one run each (a benchmark of a shared laptop, not a statistics exercise):
  1. one greedy completion: the backend's own loop vs `model.generate` (tokens/s and their ratio);
  2. N samples of one long prompt: shared prefill (the backend) vs `num_return_sequences=N` vs N
     separate backend calls, each prompt whole or from the kept cache of the first (`--only samples`:
     sections 1 and 2);
  3. grammar-constrained vs unconstrained sampling, with the time spent filling and applying the
     grammar masks measured per generated token;
  4. one scientist proposal (K=3 candidates, the search's own schema) with and without jump-forward
     decoding of the text the grammar forces (keys, separators, enum values);
  5. N different prompts, each with its own schema (as N executors of a round ask at once): one batch
     (`generate_each`) vs one call after another, greedy, with the tokens checked equal;
  6. N executor prompts of one parent (circle-packing's seed program, N hypotheses): one batch whose
     prompts run their shared first tokens once, one batch without that, and one call after another;
  7. N proposals of directed moves written axis first (`--only spelling`: this section alone), with the
     grammar alone and with each phrase kept to the tokenizer's spelling (`policy.backends.spelling`):
     tokens, seconds, and the distinct token spellings of the moves the proposals wrote.

Usage: .venv/bin/python scripts/bench_backends.py [--model DIR] [--prompt-tokens 585] [--n 4]
       [--max-tokens 60] [--threads 1] [--only samples|rows|executors|spelling] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from typing import Any, Literal

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from pydantic import BaseModel, Field, create_model  # noqa: E402

from arts.policy.backends import decoding, prefixes  # noqa: E402
from arts.policy.backends.spelling import written  # noqa: E402
from arts.policy.backends.transformers import TransformersBackend  # noqa: E402
from arts.policy.base import Request, Sampling  # noqa: E402
from arts.policy.edits.prompt import action_prompt  # noqa: E402
from arts.policy.edits.targets import list_targets  # noqa: E402
from arts.policy.proposal_schema import directed_pattern, move_phrases, proposal_schema  # noqa: E402
from arts.tasks.base import resolve_task  # noqa: E402

PARAGRAPH = (
    "Node 3 packs 26 circles in the unit square with a sum of radii of 1.20 after replacing the greedy "
    "placement by a jittered hexagonal lattice; node 7 reached 1.11 with simulated annealing over the "
    "centres, and the seed program scores 0.96. The evaluator rejects overlapping circles. "
)


class Proposal(BaseModel):
    parent: Literal[0, 3, 7]
    hypothesis: str = Field(max_length=120)
    axis: str = Field(max_length=30)
    probability: float = Field(ge=0.0, le=1.0)


def long_prompt(backend: TransformersBackend, target: int) -> str:
    """A realistic search-state prompt of about `target` tokens after chat templating."""
    text = "Propose the next experiment. State:\n"
    while len(backend.encode_prompt(text + PARAGRAPH)) <= target:
        text += PARAGRAPH
    for word in PARAGRAPH.split():
        if len(backend.encode_prompt(f"{text}{word} ")) > target:
            break
        text += f"{word} "
    return text


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def bare_generate(backend: TransformersBackend, prompt: str, n: int, max_tokens: int, sample: bool) -> int:
    """`model.generate` on the same weights and prompt; returns the number of generated tokens."""
    ids = torch.tensor([backend.encode_prompt(prompt)], device=backend.device)
    kwargs = {"do_sample": True, "temperature": 1.0, "top_p": 1.0} if sample else {"do_sample": False}
    with torch.inference_mode():
        out = backend.model.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_tokens, num_return_sequences=n,
            pad_token_id=backend.tokenizer.eos_token_id, top_k=None, **kwargs,
        )  # fmt: skip
    new = out[:, ids.shape[1] :]
    return int(sum(_length(row.tolist(), backend.stop_ids) for row in new))


def _length(row: list[int], stop_ids: set[int]) -> int:
    for i, token in enumerate(row):
        if token in stop_ids:
            return i + 1
    return len(row)


def tokens_of(groups: list[list[Any]]) -> int:
    return sum(c.completion_tokens for group in groups for c in group)


def n_samples(backend: TransformersBackend, prompt: str, n: int, max_tokens: int) -> dict[str, Any]:
    """Section 2: N samples of one prompt: one call (the prompt's tokens run once), `num_return_sequences`,
    and N separate calls, each prompt whole (no kept prompt caches) or from the first call's kept cache."""
    sampled = Sampling(temperature=1.0, max_tokens=max_tokens, seed=0)
    backend.prefixes.clear()  # every row runs the prompt from scratch, but for the kept-cache one
    shared, shared_s = timed(lambda: backend.generate(prompt, n=n, sampling=sampled))
    nrs, nrs_s = timed(lambda: bare_generate(backend, prompt, n, max_tokens, sample=True))
    seeds = [sampled.model_copy(update={"seed": i}) for i in range(n)]
    out: dict[str, Any] = {
        "shared prefill": [tokens_of(shared), shared_s],
        "num_return_sequences": [nrs, nrs_s],
    }
    saved = prefixes.SHARED_MIN
    for label, reuse in (("separate calls, whole", False), ("separate calls, kept", True)):
        backend.prefixes.clear()
        prefixes.SHARED_MIN = saved if reuse else 10**9
        try:
            separate, seconds = timed(lambda: [backend.generate(prompt, sampling=s)[0][0] for s in seeds])
        finally:
            prefixes.SHARED_MIN = saved
        out[label] = [sum(c.completion_tokens for c in separate), seconds]
    return out


def different_prompts(backend: TransformersBackend, prompt: str, n: int) -> dict[str, Any]:
    """Section 5: N prompts of different lengths and schemas, batched vs one after another."""
    words = prompt.split()
    requests = [
        Request(
            " ".join(words[: len(words) * (i + 1) // n]),
            sampling=Sampling(temperature=0.0, max_tokens=120),
            schema=proposal_schema(list(range(1, i + 3)), 1),
        )
        for i in range(n)
    ]
    for r in requests:  # compile every grammar once
        backend.generate(r.prompt, sampling=Sampling(max_tokens=1), schema=r.schema)
    backend.prefixes.clear()  # both rows start without kept caches (the prompts begin alike)
    alone, alone_s = timed(lambda: [backend.generate(r.prompt, 1, r.sampling, r.schema)[0] for r in requests])
    backend.prefixes.clear()
    together, together_s = timed(lambda: backend.generate_each(requests))
    same = [a[0].token_ids == b[0].token_ids for a, b in zip(alone, together, strict=True)]
    return {"one after another": [tokens_of(alone), alone_s], "one batch": [tokens_of(together), together_s],
            "same tokens": f"{sum(same)}/{len(same)}"}  # fmt: skip


def executor_prompts(backend: TransformersBackend, n: int) -> dict[str, Any]:
    """Section 6: N executors of one parent, as a round asks them; the shared first tokens run once
    (`prefixes.SHARED_MIN`), or every prompt whole, or one call after another."""
    files = {"solution.py": (resolve_task("circle-packing-26").root / "solution.py").read_text()}
    lines = files["solution.py"].count("\n") + 1
    names = [k for k in list_targets(files["solution.py"]).constants][:3] or ["X"]
    edit = create_model(
        "Edit", op=(Literal["set_constant"], ...), name=(Literal[tuple(names)], ...), value=(float, ...)
    )
    hypotheses = [f"{verb} {name}" for verb in ("increase", "decrease") for name in names]
    ops = ["set_constant", "set_return", "replace_function"]
    requests = [
        Request(
            action_prompt(
                hypotheses[i % len(hypotheses)],
                files,
                "solution.py",
                (1, min(lines, 40)),
                ops,
                task_summary="Pack 26 circles in the unit square; maximise the sum of radii.",
            ),
            sampling=Sampling(temperature=0.0, max_tokens=40),
            schema=edit,
        )  # fmt: skip
        for i in range(n)
    ]
    backend.generate(requests[0].prompt, sampling=Sampling(max_tokens=1), schema=edit)  # the grammar once
    tokens = [len(backend.encode_prompt(r.prompt)) for r in requests]
    first = backend.encode_prompt(requests[0].prompt)
    shared_by_all = min(prefixes.common(first, backend.encode_prompt(r.prompt)) for r in requests[1:])

    def one_after_another() -> list:
        return [backend.generate(r.prompt, 1, r.sampling, r.schema)[0] for r in requests]

    def one_batch() -> list:
        return backend.generate_each(requests)

    res: dict[str, Any] = {"prompt tokens": f"{tokens} (shared by all: {shared_by_all})"}
    outs = []
    for reuse in (False, True):
        saved = prefixes.SHARED_MIN
        prefixes.SHARED_MIN = saved if reuse else 10**9
        try:
            for label, fn in (("one after another", one_after_another), ("one batch", one_batch)):
                backend.prefixes.clear()
                out, seconds = timed(fn)
                how = "shared tokens once" if reuse else "each prompt whole"
                res[f"{label}, {how}"] = [tokens_of(out), seconds]
                outs.append(out)
        finally:
            prefixes.SHARED_MIN = saved
    same = [len({tuple(o[i][0].token_ids) for o in outs}) == 1 for i in range(len(requests))]
    res["same tokens"] = f"{sum(same)}/{len(same)}"
    return res


def spelled_proposals(backend: TransformersBackend, prompt: str, n: int, seeds: int = 3) -> dict[str, Any]:
    """N proposals of two directed candidates (bound axis first) per seed, spelling off then on."""
    moves = {"STEPS": ["increase", "decrease"], "CHUNK": ["increase", "decrease"], "TOL": ["decrease"]}
    schema = proposal_schema(
        [0, 4], 2, patterns=[directed_pattern(moves)] * 2, shares=[moves] * 2, axis_first=True
    )
    backend.generate(prompt, sampling=Sampling(max_tokens=1), schema=schema)  # compile the grammar once
    out: dict[str, Any] = {}
    for label, on in (("grammar alone", False), ("one spelling", True)):
        backend.grammars.spelling = on
        tokens = seconds = parsed = 0
        seen: dict[str, set[tuple[int, ...]]] = {}
        for seed in range(seeds):
            sampling = Sampling(temperature=0.8, max_tokens=200, seed=seed)
            got, s = timed(lambda: backend.generate(prompt, n=n, sampling=sampling, schema=schema))  # noqa: B023
            tokens, seconds = tokens + tokens_of(got), seconds + s
            for c in got[0]:
                parsed += c.ok
                pieces = [backend.tokenizer.decode([t]) for t in c.token_ids]
                for move in move_phrases(moves):
                    found = {tuple(c.token_ids[i:j]) for i, j in written(pieces, move)}
                    seen.setdefault(move, set()).update(found)
        out[label] = [tokens, seconds]
        out[f"{label}: parsed"] = parsed
        out[f"{label}: spellings per move written"] = round(
            sum(len(v) for v in seen.values()) / max(sum(1 for v in seen.values() if v), 1), 2
        )
    backend.grammars.spelling = True
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    backend = TransformersBackend(args.model)
    prompt = long_prompt(backend, args.prompt_tokens)
    n, max_tokens = args.n, args.max_tokens
    res: dict[str, Any] = {
        "prompt_tokens": len(backend.encode_prompt(prompt)),
        "threads": torch.get_num_threads(),
    }
    backend.generate("warm up", sampling=Sampling(max_tokens=2))
    backend.prefixes.clear()
    res["prefill_s"] = timed(lambda: backend.generate(prompt, sampling=Sampling(max_tokens=1)))[1]
    if args.only == "rows":
        res["different_prompts"] = different_prompts(backend, prompt, n)
        return res
    if args.only == "executors":
        res["executor_prompts"] = executor_prompts(backend, n)
        return res
    if args.only == "spelling":
        res["spelling"] = spelled_proposals(backend, prompt, n)
        return res

    greedy = Sampling(temperature=0.0, max_tokens=max_tokens)
    backend.prefixes.clear()  # on equal terms with model.generate: no kept cache of this prompt
    own, own_s = timed(lambda: backend.generate(prompt, sampling=greedy))
    bare, bare_s = timed(lambda: bare_generate(backend, prompt, 1, max_tokens, sample=False))
    res["greedy"] = {"backend": [tokens_of(own), own_s], "model.generate": [bare, bare_s]}
    res["n_samples"] = n_samples(backend, prompt, n, max_tokens)
    if args.only == "samples":
        return res

    mask_s = [0.0]
    original = decoding.fill_and_apply

    def counted(*a: Any) -> None:
        t0 = time.perf_counter()
        original(*a)
        mask_s[0] += time.perf_counter() - t0

    decoding.fill_and_apply = counted
    try:
        schema_sampling = Sampling(temperature=0.8, max_tokens=200, seed=1)
        backend.generate(prompt, sampling=Sampling(max_tokens=1), schema=Proposal)  # compile the grammar once
        mask_s[0] = 0.0
        free, free_s = timed(lambda: backend.generate(prompt, n=n, sampling=schema_sampling))
        bound, bound_s = timed(
            lambda: backend.generate(prompt, n=n, sampling=schema_sampling, schema=Proposal)
        )
    finally:
        decoding.fill_and_apply = original
    res["constrained"] = {
        "unconstrained": [tokens_of(free), free_s],
        "constrained": [tokens_of(bound), bound_s],
        "parsed": sum(c.ok for c in bound[0]),
        "mask_ms_per_token": 1000 * mask_s[0] / max(tokens_of(bound), 1),
    }
    proposal = proposal_schema([1, 2, 3], 3)
    once = Sampling(temperature=0.8, max_tokens=240, seed=2)
    backend.generate(prompt, sampling=Sampling(max_tokens=1), schema=proposal)  # compile the grammar once
    res["jump_forward"] = {}
    for label, on in (("token by token", False), ("jump-forward", True)):
        backend.jump_forward = on
        out, seconds = timed(lambda: backend.generate(prompt, sampling=once, schema=proposal))
        res["jump_forward"][label] = [tokens_of(out), seconds]
    backend.jump_forward = True
    res["different_prompts"] = different_prompts(backend, prompt, n)
    res["executor_prompts"] = executor_prompts(backend, n)
    res["spelling"] = spelled_proposals(backend, prompt, n)
    return res


def report(res: dict[str, Any]) -> None:
    print(
        f"prompt: {res['prompt_tokens']} tokens (prefill {res['prefill_s']:.2f} s), torch threads: {res['threads']}"
    )
    for section in (
        "greedy",
        "n_samples",
        "constrained",
        "jump_forward",
        "different_prompts",
        "executor_prompts",
        "spelling",
    ):
        if section not in res:
            continue
        print(f"\n[{section}]")
        for label, value in res[section].items():
            if isinstance(value, list):
                tokens, seconds = value
                decode = tokens / max(seconds - res["prefill_s"], 1e-9)
                print(
                    f"  {label:22s} {tokens:5d} tokens {seconds:7.2f} s {tokens / seconds:7.1f} tok/s"
                    f"  ({decode:.1f} tok/s after one prefill)"
                )
            else:
                print(f"  {label:22s} {value:.3f}" if isinstance(value, float) else f"  {label:22s} {value}")
    if "executor_prompts" in res:
        figures = res["executor_prompts"]
        alone_s, whole_s, alone_shared_s, shared_s = (figures[k][1] for k in list(figures)[1:5])
        print(
            f"\nexecutor prompts, seconds one after another, whole / one batch, shared once: {alone_s / shared_s:.2f}"
        )
        print(f"executor prompts, seconds one batch, whole / shared once: {whole_s / shared_s:.2f}")
        print(
            f"executor prompts, seconds one after another, whole / shared once: {alone_s / alone_shared_s:.2f}"
        )
    if "spelling" in res:
        (loose_t, loose_s), (kept_t, kept_s) = (res["spelling"][k] for k in ("grammar alone", "one spelling"))
        print(
            f"\nproposals, tokens grammar alone / one spelling: {loose_t / kept_t:.2f}, seconds: {loose_s / kept_s:.2f}"
        )
    if "different_prompts" in res:
        (_, alone_s), (_, batch_s), _ = res["different_prompts"].values()
        print(f"\ndifferent prompts, seconds one after another / one batch: {alone_s / batch_s:.2f}")
    if "greedy" not in res:
        return
    (own_t, own_s), (bare_t, bare_s) = res["greedy"].values()
    print(f"\nbackend / model.generate tokens/s ratio (greedy): {(own_t / own_s) / (bare_t / bare_s):.2f}")
    samples = {k: v[1] for k, v in res["n_samples"].items()}
    for other in ("num_return_sequences", "separate calls, whole", "separate calls, kept"):
        print(
            f"N samples, seconds {other} / shared prefill: {samples[other] / samples['shared prefill']:.2f}"
        )
    if "jump_forward" not in res:
        return
    (_, slow_s), (_, fast_s) = res["jump_forward"].values()
    print(f"proposal seconds, token by token / jump-forward: {slow_s / fast_s:.2f}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=None, help="model directory, .gguf or cached HF id (default: embedded)")
    p.add_argument("--prompt-tokens", type=int, default=585, help="length of the templated prompt")
    p.add_argument("--n", type=int, default=4, help="samples per prompt")
    p.add_argument("--max-tokens", type=int, default=60, help="tokens per completion")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument(
        "--only",
        choices=["samples", "rows", "executors", "spelling"],
        default=None,
        help="run only sections 1-2 (samples: one prompt), 5 (rows), 6 (executors) or 7 (spelling)",
    )
    p.add_argument("--json", default=None, help="also write the figures to this file")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    res = run(args)
    report(res)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
