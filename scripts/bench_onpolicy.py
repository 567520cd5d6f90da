"""What each on-policy training target costs: the drawn candidates' spans inside one verbalized proposal
(what `arts search --ttt` trains) against N independent single-action samples of the same state sharing
one prefill.

Both run the scientist's real prompt and grammar with the embedded model (or --model), N = 4 actions:
  - spans: one proposal of K = 4 candidates is sampled; its tokens are scored once (one forward over the
    prompt and the proposal; each drawn candidate's old log-probs are its span), and one GRPO update
    trains on the four spans, each under the prompt and the candidates before it;
  - singles: the same state asks for one candidate; four samples share the prompt's prefill; each is
    scored (one batch sharing the prompt) and one GRPO update trains on the four single actions.
Per variant and repetition: seconds of sampling, scoring and the update, completion tokens, and how many
of the four actions are distinct (a repeated action is a wasted evaluation). The variants alternate, so
a load on the machine falls on both; medians over --reps repetitions and their ratios are printed.

Usage: .venv/bin/python scripts/bench_onpolicy.py [--model DIR] [--reps 3] [--threads 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from arts.policy.backends.transformers import TransformersBackend  # noqa: E402
from arts.policy.base import Sampling  # noqa: E402
from arts.policy.proposal_schema import proposal_schema  # noqa: E402
from arts.policy.scientist import Scientist, ScientistConfig  # noqa: E402
from arts.policy.spans import candidate_token_spans  # noqa: E402
from arts.training.grpo import Group, GRPOConfig, grpo_update  # noqa: E402
from arts.training.logprobs import adapter_scope, score_targets, span_targets  # noqa: E402
from arts.training.ttt import ADAPTER, ActionGroup, Trainer  # noqa: E402

STATE = """## Task
Minimise the validation bits per character of a small character-level language model trained for a
fixed number of steps. The program sets EMBED, HIDDEN, LAYERS, LR and BATCH.

## Nodes you may start from
- node 1 (seed): 2.3694
- node 3 from 1: increase LAYERS to 2 -> 2.2645
- node 6 from 3: increase LR to 0.006 -> 2.1918
- node 8 from 6: decrease BATCH to 32 -> 2.3570 (worse)

## Insights
- raising LR helped twice; BATCH below 64 hurt."""
PARENTS = [1, 3, 6, 8]
N = 4
REWARDS = [1.0, 0.0, 0.0, -1.0]


def spans_variant(trainer: Trainer, seed: int) -> dict:
    sci = Scientist(trainer.backend, ScientistConfig(candidates=N, temperature=1.0, max_tokens=480))
    sci.adapter = ADAPTER
    t0 = time.perf_counter()
    prop = sci.propose(STATE, PARENTS, tail=False, seed=seed)
    sampled = time.perf_counter() - t0
    tokens, spans = prop.completion.token_ids, prop.spans
    if len(spans) < 2:
        return {"ok": False, "sample_s": sampled, "tokens": len(tokens)}
    t0 = time.perf_counter()
    full = trainer.proposal_logprobs(prop.messages, prop.json_schema, tokens)
    scored = time.perf_counter() - t0
    old = [full[s:e] for s, e in spans]
    rewards = REWARDS[: len(spans)]
    group = ActionGroup(prop.messages, prop.json_schema, ["a"] * len(spans), rewards, old, tokens, spans)
    t0 = time.perf_counter()
    trainer.update([group])
    updated = time.perf_counter() - t0
    distinct = len({(c.parent, c.hypothesis) for c in prop.candidates})
    return {"ok": True, "sample_s": sampled, "score_s": scored, "update_s": updated, "tokens": len(tokens),
            "actions": len(spans), "distinct": distinct}  # fmt: skip


def singles_variant(trainer: Trainer, seed: int) -> dict:
    backend = trainer.backend
    sci = Scientist(backend, ScientistConfig(candidates=1, temperature=1.0, max_tokens=160))
    sci.adapter = ADAPTER
    schema = proposal_schema(PARENTS, 1)
    messages = sci.propose(STATE, PARENTS, tail=False, seed=seed).messages  # the one-candidate prompt
    t0 = time.perf_counter()
    (outs,) = backend.generate(
        [messages], n=N, sampling=Sampling(temperature=1.0, max_tokens=160, seed=seed), schema=schema,
        adapter=ADAPTER, purpose="propose",
    )  # fmt: skip
    sampled = time.perf_counter() - t0
    json_schema = schema.model_json_schema()
    targets = []
    decode = lambda ids: backend.tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731
    for c in outs:
        spans = candidate_token_spans(c.text, c.token_ids, decode)
        t = span_targets(backend, json_schema, c.token_ids, spans[:1]) if spans else None
        if t:
            targets.append(t[0])
    if len(targets) < 2:
        return {"ok": False, "sample_s": sampled, "tokens": sum(len(c.token_ids) for c in outs)}
    prompt_ids = backend.encode_prompt(messages)
    pad = backend.tokenizer.pad_token_id if backend.tokenizer.pad_token_id is not None else 0
    t0 = time.perf_counter()
    with adapter_scope(backend.model, ADAPTER):
        full = score_targets(backend.model, prompt_ids, targets, pad)
    scored = time.perf_counter() - t0
    old = [f[t.trained[0] : t.trained[1]] for f, t in zip(full, targets)]
    group = Group(prompt_ids, targets, REWARDS[: len(targets)], old)
    t0 = time.perf_counter()
    with adapter_scope(backend.model, ADAPTER):
        grpo_update(backend.model, backend.tokenizer, [group], trainer.config, trainer.optimizer)
    updated = time.perf_counter() - t0
    distinct = len({c.text for c in outs})
    return {"ok": True, "sample_s": sampled, "score_s": scored, "update_s": updated,
            "tokens": sum(len(c.token_ids) for c in outs), "actions": len(targets), "distinct": distinct}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="model folder or GGUF (default: the embedded model)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    backend = TransformersBackend(args.model, seed=0)
    trainer = Trainer(backend, GRPOConfig(), Path(tempfile.mkdtemp(prefix="arts-onpolicy-")))
    trainer.start()
    rows: dict[str, list[dict]] = {"spans": [], "singles": []}
    spans_variant(trainer, seed=100)  # warm-up: kernels, grammar compilation
    for rep in range(args.reps):
        for name, fn in (("spans", spans_variant), ("singles", singles_variant)):
            rows[name].append(fn(trainer, seed=rep))
            print(
                name,
                rep,
                json.dumps(
                    {k: round(v, 2) if isinstance(v, float) else v for k, v in rows[name][-1].items()}
                ),
            )
    print(f"\nmedians over {args.reps} repetitions, N = {N} actions ({args.threads} thread(s)):")
    med = {}
    for name, rs in rows.items():
        ok = [r for r in rs if r["ok"]]
        med[name] = (
            {
                k: statistics.median(r[k] for r in ok)
                for k in ("sample_s", "score_s", "update_s", "tokens", "distinct")
            }
            if ok
            else {}
        )
        print(
            f"  {name:8s} "
            + "  ".join(f"{k} {v:.2f}" for k, v in med[name].items())
            + f"  ({len(ok)}/{len(rs)} usable)"
        )
    if med["spans"] and med["singles"]:
        for k in ("sample_s", "score_s", "update_s"):
            print(f"  singles / spans, {k}: {med['singles'][k] / med['spans'][k]:.2f}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "medians": med}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
