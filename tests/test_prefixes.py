"""Prompt tokens run once across calls (`policy.backends.prefixes`): a prompt that begins like a kept one
runs only the rest and gets what it gets without the store; calls under an adapter neither use nor feed
it; the store stays within its byte budget."""

from __future__ import annotations

import torch

from arts.policy.backends import prefixes
from arts.policy.backends.decoding import hf_model
from arts.policy.base import Request, Sampling, Usage
from tests.doubles import lora

GREEDY = Sampling(temperature=0, max_tokens=12)
STATE = "State of the search:\n" + "\n".join(f"node {i}: score {i * 0.1:.1f}, moved C{i}" for i in range(30))
INSPECT = f"{STATE}\n\nWhich nodes should be inspected?"
PROPOSE = f"{STATE}\n\n## Inspected\nnode 3 raised the score.\n\nPropose the next experiments."


def _prefilled(backend, fn) -> tuple[list[int], object]:
    """The tokens each forward of `fn()` ran (the first is the prefill), and what `fn` returned."""
    seen: list[int] = []
    hook = hf_model(backend.model).register_forward_pre_hook(
        lambda m, args, kw: seen.append(kw["input_ids"].shape[1]), with_kwargs=True
    )
    try:
        return seen, fn()
    finally:
        hook.remove()


def _same(a, b) -> None:
    assert a.token_ids == b.token_ids and a.text == b.text
    assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < 1e-4


def test_a_prompt_that_begins_like_a_kept_one_runs_only_the_rest(tiny_backend):
    """The proposal after the inspection: the state is prefilled once; the answer is the one a backend
    without the store gives, and the usage record counts the reused tokens as cached."""
    usages: list[Usage] = []
    tiny_backend.usage_sink = usages.append
    tiny_backend.generate(INSPECT, sampling=GREEDY)
    ids = tiny_backend.encode_prompt(PROPOSE)
    shared = prefixes.common(tiny_backend.encode_prompt(INSPECT), ids)
    assert shared > len(ids) // 2
    seen, out = _prefilled(tiny_backend, lambda: tiny_backend.generate(PROPOSE, sampling=GREEDY))
    assert seen[0] == len(ids) - shared
    assert usages[-1].cached_tokens == shared

    tiny_backend.prefixes.clear()
    seen, fresh = _prefilled(tiny_backend, lambda: tiny_backend.generate(PROPOSE, sampling=GREEDY))
    assert seen[0] == len(ids)  # nothing kept: the whole prompt runs
    _same(out[0][0], fresh[0][0])


def test_a_batch_starts_from_kept_calls_too(tiny_backend):
    tiny_backend.generate(INSPECT, sampling=GREEDY)
    requests = [Request(PROPOSE, sampling=GREEDY), Request(PROPOSE + " Be brief.", sampling=GREEDY)]
    seen, together = _prefilled(tiny_backend, lambda: tiny_backend.generate_each(requests))
    ids = [tiny_backend.encode_prompt(r.prompt) for r in requests]
    kept = prefixes.common(tiny_backend.encode_prompt(INSPECT), ids[0])
    assert seen[0] == len(ids[0]) - kept  # from the kept inspection
    assert seen[1] == len(ids[1]) - prefixes.common(*ids)  # from the first prompt of the batch
    tiny_backend.prefixes.clear()
    for r, rows in zip(requests, together, strict=True):
        tiny_backend.prefixes.clear()
        _same(rows[0], tiny_backend.generate(r.prompt, sampling=GREEDY)[0][0])


def test_calls_under_an_adapter_neither_use_nor_feed_the_store(tiny_backend):
    """An adapter's weights move with every update; a kept cache of it would go stale."""
    tiny_backend.add_adapter("learner", lora())
    tiny_backend.generate(INSPECT, sampling=GREEDY, adapter="learner")
    assert tiny_backend.prefixes.sources == []
    tiny_backend.generate(INSPECT, sampling=GREEDY)
    seen, _ = _prefilled(
        tiny_backend, lambda: tiny_backend.generate(PROPOSE, sampling=GREEDY, adapter="learner")
    )
    assert seen[0] == len(tiny_backend.encode_prompt(PROPOSE))
    assert len(tiny_backend.prefixes.sources) == 1  # the base call's only


def test_the_store_keeps_the_newest_within_its_budget(tiny_backend):
    model = hf_model(tiny_backend.model)
    per_token = prefixes._nbytes(_prefill_ids(model, [1])[1])
    store = prefixes.Prefixes(budget=per_token * (50 + 60))
    for n in (40, 50, 60, 60):  # the same prompt again is kept once
        ids = list(range(1, n + 1))
        store.keep(model, ids, _prefill_ids(model, ids)[1])
    assert [len(ids) for ids, _ in store.sources] == [50, 60]  # the oldest went first
    begun = prefixes.start(model, [*range(1, 56), 999], store.sources)
    assert begun is not None and begun.get_seq_length() == 55  # the 60-token prompt shares 55
    assert prefixes.start(model, [*range(1, 10), 999], store.sources) is None  # below SHARED_MIN


def _prefill_ids(model, ids: list[int]):
    from arts.policy.backends.rows import _prefill

    with torch.inference_mode():
        return _prefill(model, ids)
