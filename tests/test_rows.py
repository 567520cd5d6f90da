"""Different prompts decoded as one batch (`generate_each`): each request gets what it would get alone,
under its own schema, sampling, seed and adapter, on the tiny random model and on the embedded one."""

from __future__ import annotations

from typing import Literal

import pytest
import torch
from pydantic import BaseModel, Field, create_model

from arts.policy.base import Completion, Request, Sampling, generate_each
from tests.doubles import lora

GREEDY = Sampling(temperature=0, max_tokens=24)


class Edit(BaseModel):
    op: Literal["set_constant"]
    name: Literal["LR", "BATCH", "MARGIN"]
    value: float


def _enum_schema(values: list[str]) -> type[BaseModel]:
    return create_model("Pick", choice=(Literal[tuple(values)], ...), why=(str, Field(max_length=30)))


REQUESTS = [
    Request("Set a constant.", sampling=GREEDY, schema=Edit, purpose="executor"),
    Request(
        "A much longer prompt about a packing program whose radius and margin could both change; pick one.",
        sampling=GREEDY.model_copy(update={"max_tokens": 40}),
        schema=_enum_schema(["increase MARGIN", "decrease RADIUS", "rewrite pack"]),
        purpose="propose",
    ),
    Request("Say anything.", sampling=GREEDY.model_copy(update={"max_tokens": 7}), purpose="free"),
    Request("Free text that stops early.", sampling=GREEDY.model_copy(update={"max_tokens": 3})),
]


def _alone(backend, r: Request) -> list[Completion]:
    return backend.generate(r.prompt, r.n, r.sampling, r.schema, r.adapter, r.purpose)[0]


def _same(together: list[Completion], alone: list[Completion]) -> None:
    assert [c.token_ids for c in together] == [c.token_ids for c in alone]
    assert [c.text for c in together] == [c.text for c in alone]
    assert [c.finish_reason for c in together] == [c.finish_reason for c in alone]
    assert [c.error for c in together] == [c.error for c in alone]
    for a, b in zip(together, alone, strict=True):
        assert max((abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)), default=0) < 1e-4


def test_greedy_rows_decode_as_each_prompt_alone(tiny_backend):
    """Prompts of different lengths, schemas and max_tokens, in one batch: every row's tokens, text,
    finish reason and log-probs are those of its own `generate` call."""
    seen = []
    tiny_backend.usage_sink = seen.append
    together = tiny_backend.generate_each(REQUESTS)
    assert [u.purpose for u in seen] == [r.purpose for r in REQUESTS]  # one usage record per request
    assert [u.completion_tokens for u in seen] == [len(c[0].token_ids) for c in together]
    for r, rows in zip(REQUESTS, together, strict=True):
        _same(rows, _alone(tiny_backend, r))
    assert together[2][0].finish_reason == "length" and len(together[2][0].token_ids) == 7
    assert together[0][0].parsed is None or isinstance(together[0][0].parsed, Edit)


def test_prompts_that_begin_alike_run_their_shared_tokens_once(tiny_backend):
    """Executors of one parent: the same program, different hypotheses. The later prompts start from
    the first one's cache, so the prefills run about one prompt's tokens, not three; each row still
    gets what it gets alone."""
    from arts.policy.backends.decoding import hf_model

    program = "Program:\n" + "\n".join(f"C{i} = {i * 0.5}" for i in range(40))
    requests = [
        Request(f"{program}\nHypothesis: {h}", sampling=GREEDY, schema=Edit)
        for h in ("increase LR", "decrease BATCH", "set MARGIN to a tenth")
    ]
    lengths = [len(tiny_backend.encode_prompt(r.prompt)) for r in requests]
    seen: list[int] = []
    model = hf_model(tiny_backend.model)
    hook = model.register_forward_pre_hook(
        lambda m, args, kw: seen.append(kw["input_ids"].shape[1]), with_kwargs=True
    )
    try:
        together = tiny_backend.generate_each(requests)
    finally:
        hook.remove()
    prefilled = sum(seen[: len(requests)])  # the prefills come first, one prompt each
    assert prefilled < lengths[0] + 40 < sum(lengths) / 2
    for r, rows in zip(requests, together, strict=True):
        _same(rows, _alone(tiny_backend, r))


def test_a_seeded_request_samples_what_it_samples_alone(tiny_backend):
    sampled = [
        Request(
            r.prompt,
            sampling=r.sampling.model_copy(update={"temperature": 1.0, "seed": 7 + i}),
            schema=r.schema,
        )
        for i, r in enumerate(REQUESTS)
    ]
    together = tiny_backend.generate_each(sampled)
    for r, rows in zip(sampled, together, strict=True):
        _same(rows, _alone(tiny_backend, r))


def test_requests_under_different_adapters_each_run_under_their_own(tiny_backend):
    tiny_backend.add_adapter("step_1", lora())
    with torch.no_grad():  # LoRA's B starts at zero, which changes nothing: make the adapter act
        for name, p in tiny_backend.model.named_parameters():
            if "lora_B.step_1" in name:
                p.add_(0.5)
    mixed = [
        Request("Say anything.", sampling=GREEDY, adapter="step_1"),
        Request("Say anything.", sampling=GREEDY),
        Request("Set a constant.", sampling=GREEDY, schema=Edit, adapter="step_1"),
    ]
    together = tiny_backend.generate_each(mixed)
    for r, rows in zip(mixed, together, strict=True):
        _same(rows, _alone(tiny_backend, r))
    assert together[0][0].token_ids != together[1][0].token_ids  # the adapter did act


def test_n_samples_of_a_request_are_rows_of_the_batch(tiny_backend):
    r = Request("Set a constant.", n=3, sampling=GREEDY, schema=Edit)
    (rows, single) = tiny_backend.generate_each([r, Request("x", sampling=GREEDY)])
    assert len(rows) == 3 and len(single) == 1
    assert all(c.token_ids == rows[0].token_ids for c in rows)  # greedy: the same three times
    with pytest.raises(ValueError, match="n must be at least 1"):
        tiny_backend.generate_each([Request("x", n=0)])


def test_a_backend_without_batching_runs_the_requests_one_by_one():
    class Plain:
        name, model_id = "plain", "m"

        def __init__(self):
            self.calls = []

        def generate(self, prompts, n=1, sampling=None, schema=None, adapter=None, purpose=""):
            self.calls.append((prompts, n, adapter, purpose))
            return [[Completion(text=f"{prompts}:{i}") for i in range(n)]]

    plain = Plain()
    out = generate_each(plain, [Request("a", n=2, purpose="p"), Request("b", adapter="x")])
    assert [[c.text for c in cs] for cs in out] == [["a:0", "a:1"], ["b:0"]]
    assert plain.calls == [("a", 2, None, "p"), ("b", 1, "x", "")]


def test_the_embedded_model_decodes_executor_prompts_together_as_alone(embedded_backend):
    """The real 135M model, three grammar-constrained prompts of different lengths at once (an edit's
    JSON is about 25 tokens, forced keys included, and max_tokens counts them all)."""
    edit = GREEDY.model_copy(update={"max_tokens": 40})
    prompts = [
        Request(
            "Program:\nLR = 0.003\nBATCH = 64\nHypothesis: decrease LR. Answer with one edit.",
            sampling=edit,
            schema=Edit,
        ),
        Request("Hypothesis: increase MARGIN. One edit.", sampling=edit, schema=Edit),
        Request(
            "Which move should the next experiment make on a circle packing program? Pick one.",
            sampling=GREEDY.model_copy(update={"max_tokens": 32}),
            schema=_enum_schema(["increase MARGIN", "decrease RADIUS", "rewrite pack"]),
        ),
    ]
    together = embedded_backend.generate_each(prompts)
    for r, rows in zip(prompts, together, strict=True):
        _same(rows, _alone(embedded_backend, r))
    assert sum(c[0].ok for c in together) >= 2
