"""Is the scientist learning what pays? The probability the adapter gives a class of moves, against the base.

A class of moves is the start of a hypothesis ("increase STEPS": a verb and a target). Its probability
under a proposal prompt is the probability that a single action, from the given parent, begins its
hypothesis with it: the summed masked log-prob of the tokens of `{"parent": p, "hypothesis": "<class>`
under the single-action grammar at the sampling temperature (the rest of the action, free text, does
not count). Taken under the adapter in force and under the base model on the same prompt, the
difference is how much more (or less) likely training has made the class. Scored on a prompt the
adapter has not trained on, it is held out: `search.learning` takes each update's newest prompt
before the update trains on it.

Not measured here: whether the class pays (that is the task's; a probe task declares its paying class).
"""

from __future__ import annotations

import math
from typing import Any

from arts.policy.proposal_schema import canonical_action
from arts.training.credit import base_model
from arts.training.logprobs import action_schema, adapter_scope, build_targets, score_targets


def class_logprobs(
    backend: Any,
    prompt: list[dict[str, Any]],
    json_schema: dict[str, Any] | None,
    move: str,
    parent: int,
    adapter: str,
    temperature: float = 1.0,
) -> tuple[float, float] | None:
    """(log-prob under `adapter`, log-prob under the base) that an action from `parent` starts its
    hypothesis with `move`; None when the grammar rejects the action or the move is too short to be one."""
    text = canonical_action({"parent": parent, "hypothesis": move, "axis": "value"})  # axis: not scored
    prefix = text[: text.index('"hypothesis": "') + len('"hypothesis": "') + len(move)]
    (target,) = build_targets(backend, action_schema(json_schema, text), [text])
    if target is None:
        return None
    tok = backend.tokenizer
    n = next(
        (i for i in range(1, len(target.tokens) + 1) if len(tok.decode(target.tokens[:i])) >= len(prefix)),
        len(target.tokens),
    )
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    prompt_ids = backend.encode_prompt(prompt)
    with adapter_scope(backend.model, adapter):
        tuned = score_targets(backend.model, prompt_ids, [target], pad, temperature)[0]
    with base_model(backend.model):
        base = score_targets(backend.model, prompt_ids, [target], pad, temperature)[0]
    return math.fsum(tuned[:n]), math.fsum(base[:n])
