"""Is the scientist learning what pays? The probability the adapter gives a class of moves, against the base.

A class of moves is the start of a hypothesis ("increase STEPS": a verb and a target). Its probability
under a proposal prompt is the probability that the proposal's first candidate, from the given parent,
begins its hypothesis with it, in the format the scientist samples: the summed masked log-prob of the
tokens after `{"candidates": [{"parent": p, "hypothesis": "` up to the end of the class, under the
proposal's own grammar at the sampling temperature (a single-action schema gives the single-action
form, `{"parent": p, "hypothesis": "`). The rest of the candidate (free text, axis, probability) does
not count. Taken under the adapter in force and under the base model on the same prompt, the difference
is how much more (or less) likely training has made the class. Scored on a prompt the adapter has not
trained on, it is held out: `search.learning` takes each update's newest prompt before the update trains
on it.

Not measured here: whether the class pays (that is the task's; a probe task declares its paying class),
or its probability at later positions of a list (the first is the one no earlier candidate conditions).
"""

from __future__ import annotations

import json
import math
from typing import Any

from arts.training.credit import base_model
from arts.training.logprobs import ActionTarget, adapter_scope, score_targets

HYPOTHESIS = '"hypothesis": "'


def head(json_schema: dict[str, Any] | None, parent: int) -> str:
    """The text the scientist writes before its first hypothesis, under `json_schema`."""
    start = json.dumps({"parent": parent}, separators=(", ", ": "))[:-1] + ", " + HYPOTHESIS
    listed = "candidates" in ((json_schema or {}).get("properties") or {})
    return '{"candidates": [' + start if listed else start


def sampled_head(tokenizer: Any, tokens: list[int]) -> list[int] | None:
    """The tokens of a sampled proposal up to its first hypothesis's opening quote, as sampled: the
    grammar forces keys token by token, not as the tokenizer would split them, and the model's
    probabilities are those of the sampled split. None when no token ends exactly there."""
    for i in range(1, len(tokens) + 1):
        text = tokenizer.decode(tokens[:i])
        if text.endswith(HYPOTHESIS):
            return tokens[:i]
        if HYPOTHESIS in text:
            return None
    return None


def class_logprobs(
    backend: Any,
    prompt: list[dict[str, Any]],
    json_schema: dict[str, Any] | None,
    move: str,
    parent: int,
    adapter: str,
    temperature: float = 1.0,
    head_tokens: list[int] | None = None,
) -> tuple[float, float] | None:
    """(log-prob under `adapter`, log-prob under the base) that the first action from `parent` starts its
    hypothesis with `move`; None without a schema, or when the grammar rejects that beginning.
    `head_tokens`: the beginning as a proposal sampled it (`sampled_head`), else the tokenizer's split."""
    if not json_schema or not move.strip():
        return None
    tok = backend.tokenizer
    if head_tokens is not None:
        tokens, start = head_tokens + tok.encode(move, add_special_tokens=False), len(head_tokens)
    else:
        before = head(json_schema, parent)
        tokens = tok.encode(before + move, add_special_tokens=False)
        # from the first token that reaches past the head (a token may straddle the quote)
        start = max(i for i in range(len(tokens) + 1) if len(tok.decode(tokens[:i])) <= len(before))
    masks, rejected = backend.grammars.replay_bitmasks(json_schema, tokens)
    if rejected is not None:
        return None
    target = ActionTarget(tokens, masks.clone(), (start, len(tokens)))
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    prompt_ids = backend.encode_prompt(prompt)
    with adapter_scope(backend.model, adapter):
        tuned = score_targets(backend.model, prompt_ids, [target], pad, temperature)[0]
    with base_model(backend.model):
        base = score_targets(backend.model, prompt_ids, [target], pad, temperature)[0]
    return math.fsum(tuned[start:]), math.fsum(base[start:])
