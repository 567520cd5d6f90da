"""Is the scientist learning what pays? How much more the adapter favours a class of moves than the base.

A class of moves is the start of a hypothesis ("increase STEPS": a verb and a target). The harness lays
out which moves a verbalized list offers (each position its menu); the scientist chooses two things: which
move of its menu a position writes, and the probability it states for it, which the draw follows. So, on
a sampled list that offers the class at position i, the measure is its draw probability: the probability
of writing the class at i (everything before it as sampled) times its draw weight there (its expected
stated probability, to one decimal, over the sum of the list's). Both are taken under the proposal
grammar at the sampling temperature, under the adapter in force and under the base model, and reported
apart as well (`offer`, `weight`). Scored on a prompt the adapter has not trained on, it is held out:
`search.learning` takes each update's newest round before the update trains on it. For actions stored
without their sampled tokens (a served scientist's), the measure is the log-prob of writing the class as
the first candidate.

Not measured here: whether the class pays (that is the task's; a probe task declares its paying class).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from arts.training.credit import base_model
from arts.training.list_scores import (
    HYPOTHESIS,
    StatedPlan,
    boundary,
    list_distributions,
    picked,
    value_start,
)
from arts.training.logprobs import ActionTarget, adapter_scope, score_targets


def head(json_schema: dict[str, Any] | None, parent: int) -> str:
    """The text the scientist writes before its first hypothesis, under `json_schema`."""
    start = json.dumps({"parent": parent}, separators=(", ", ": "))[:-1] + ", " + HYPOTHESIS
    listed = "candidates" in ((json_schema or {}).get("properties") or {})
    return '{"candidates": [' + start if listed else start


def class_logprobs(
    backend: Any,
    prompt: list[dict[str, Any]],
    json_schema: dict[str, Any] | None,
    move: str,
    parent: int,
    adapter: str,
    temperature: float = 1.0,
) -> tuple[float, float] | None:
    """(log-prob under `adapter`, log-prob under the base) that the first action from `parent` starts its
    hypothesis with `move`; None without a schema, or when the grammar rejects that beginning.
    For actions stored without their sampled tokens (a served scientist's): the tokenizer's split."""
    if not json_schema or not move.strip():
        return None
    tok = backend.tokenizer
    before = head(json_schema, parent)
    tokens = tok.encode(before + move, add_special_tokens=False)
    # from the first token that reaches past the head (a token may straddle the quote)
    start = max(i for i in range(len(tokens) + 1) if len(tok.decode(tokens[:i])) <= len(before))
    got = backend.grammars.replay_bitmasks(json_schema, tokens)
    if got.rejected is not None:
        return None
    target = ActionTarget(tokens, got.masks.clone(), (start, len(tokens)), scales=got.scales)
    tuned, base = tuned_and_base(backend, adapter, backend.encode_prompt(prompt), [target], temperature)
    return math.fsum(tuned[0][start:]), math.fsum(base[0][start:])


def tuned_and_base(
    backend: Any, adapter: str, prompt_ids: list[int], targets: list[ActionTarget], temperature: float
) -> tuple[list[list[float]], list[list[float]]]:
    """The targets' per-token log-probs after `prompt_ids` under `adapter`, then under the base model."""
    tok = backend.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    with adapter_scope(backend.model, adapter):
        tuned = score_targets(backend.model, prompt_ids, targets, pad, temperature)
    with base_model(backend.model):
        base = score_targets(backend.model, prompt_ids, targets, pad, temperature)
    return tuned, base


def offer_positions(tokenizer: Any, tokens: list[int], candidate: int, move: str) -> list[int] | None:
    """The positions of the sampled tokens that spell `move` at the start of candidate `candidate`'s
    hypothesis (to the first token boundary at or past its end); None when the hypothesis does not start
    on a token boundary or does not start with `move`."""
    start = value_start(tokenizer, tokens, candidate, HYPOTHESIS)
    if start is None:
        return None
    at = len(tokenizer.decode(tokens[:start]))
    if not tokenizer.decode(tokens)[at:].startswith(move):
        return None
    end = boundary(tokenizer, tokens, at + len(move))
    return None if end is None else list(range(start, end))


def stated_probabilities(
    backend: Any,
    prompt: list[dict[str, Any]],
    json_schema: dict[str, Any],
    tokens: list[int],
    adapter: str,
    temperature: float = 1.0,
) -> list[tuple[float, float] | None]:
    """Per candidate of a sampled list, (under `adapter`, under the base) the expected probability the
    scientist states for it, everything before that value as sampled: what the draw weighs it by.

    The value is read to one decimal: P("1") + sum over d of (d/10 + 0.05) P("0.d"), each path's
    probability under the proposal grammar at `temperature` (later digits taken at their midpoint). The
    distributions at the value's first token, after its "0" and after its "0." are read from one scoring
    of the list (`list_distributions`), with one more row per value not written "0.d". None for a
    candidate whose value does not start on a token boundary."""
    plan = StatedPlan.of(backend, json_schema, tokens)
    got = list_distributions(backend, adapter, prompt, json_schema, plan.rows, temperature)
    if got is None:
        return [None] * len(plan.starts)
    return plan.values(*got)


AXIS = '"axis": "'


def slot_probabilities(
    backend: Any,
    prompt: list[dict[str, Any]],
    json_schema: dict[str, Any],
    tokens: list[int],
    move: str,
    adapter: str,
    temperature: float = 1.0,
) -> list[tuple[float, float]]:
    """Per candidate slot of a sampled list written axis first (`ScientistConfig.axis_first`) whose grammar
    allows `move` ("decrease TOL"), (under `adapter`, under the base) the probability that the slot writes
    it, everything before the slot's axis as sampled: its target as the axis, the slot's own sampled tokens
    up to the hypothesis, then the move in the tokenizer's spelling, the one constrained decoding writes
    (`policy.backends.spelling`; before it, the embedded model wrote one move in 12 spellings in 49
    writings, and a sum over guessed spellings missed them all). Unlike `draw_measure`, it needs
    no list that wrote the class: it measures how likely the class was where the harness offered it."""
    tok = backend.tokenizer
    text, target = tok.decode(tokens), move.split()[-1]
    prompt_ids, out = backend.encode_prompt(prompt), []
    for candidate in range(text.count(AXIS)):
        start = value_start(tok, tokens, candidate, AXIS)
        if start is None:
            continue
        close = text.find('"', len(tok.decode(tokens[:start])))
        opened = text.find(HYPOTHESIS, close) + len(HYPOTHESIS)
        if close < 0 or opened < len(HYPOTHESIS):
            continue
        after, hyp = boundary(tok, tokens, close, exact=True), boundary(tok, tokens, opened, exact=True)
        between = (  # as sampled; where a token straddles the quotes, the tokenizer's split
            tokens[after:hyp] if after is not None and hyp is not None
            else tok.encode(text[close:opened], add_special_tokens=False)
        )  # fmt: skip
        written = (
            tok.encode(target, add_special_tokens=False)
            + between
            + tok.encode(move, add_special_tokens=False)
        )
        got = backend.grammars.replay_bitmasks(json_schema, tokens[:start] + written)
        if got.rejected is not None:
            continue  # this slot does not offer the move
        targets = [ActionTarget(written, got.masks[start:].clone(), scales=got.scales[start:])]
        both = tuned_and_base(backend, adapter, prompt_ids + tokens[:start], targets, temperature)
        out.append(tuple(math.fsum(math.exp(math.fsum(row)) for row in rows) for rows in both))
    return out


def slot_measure(
    backend: Any,
    rollouts: list[Any],
    move: str,
    adapter: str,
    temperature: float = 1.0,
    lists: int | None = None,
) -> dict | None:
    """The class's probability over the slots that allow it (`slot_probabilities`) of the round's lists
    (the first `lists` with such a slot; None: all), adapter against base, as a `watch` payload; None
    when no slot allows it."""
    got, used = [], 0
    for r in {tuple(r.tokens): r for r in rollouts if r.tokens}.values():
        found = slot_probabilities(
            backend, r.prompt, r.json_schema or {}, r.tokens, move, adapter, temperature
        )
        got, used = got + found, used + bool(found)
        if lists is not None and used >= lists:
            break
    if not got:
        return None
    tuned, base = math.fsum(p[0] for p in got), math.fsum(p[1] for p in got)
    return {"scored": True, "measure": "slot probability", "slots": len(got), "lists": used,
            "tuned": tuned / len(got), "base": base / len(got), "ratio": tuned / base}  # fmt: skip


def measure(
    backend: Any,
    rollouts: list[Any],
    move: str,
    adapter: str,
    temperature: float = 1.0,
    tilt: tuple[float, float] = (0.0, 3.0),
    member: Callable[[str], bool] | None = None,
) -> dict | None:
    """How much more the adapter favours `move` than the base, on one round's rollouts (objects with
    `prompt`, `json_schema`, `action`, `candidates` and `tokens`, as `search.state.Rollout`), as the
    payload of a `watch` event; None when it cannot be scored.

    With sampled lists, in the first list that offers it: its draw probability, the probability of
    writing it where the list wrote it (`offer_positions`) times its draw weight there (its expected
    stated probability over the sum of its list's, `stated_probabilities`); `ratio` is the adapter's over
    the base's. With `tilt` (the draw's exponent and cap, `ScientistConfig.tilt`), the adapter's draw weights
    are tilted as the draw tilts them (`training.tilt`); the base's are not. `member(hypothesis)`
    says what is of the class (a probe's: `tasks.probe.in_class`, without its decoys); by default a
    hypothesis that starts with `move`. With sampled lists none of which wrote it, a move of a verb and its
    target is measured by the probability of writing it in the slots of the first list that allows it
    (`slot_measure`). Without tokens: the log-prob
    of writing it first (`class_logprobs`)."""
    member = member or (lambda h: h.startswith(move))
    offered = [
        (r, i) for r in rollouts if r.tokens
        for i, c in enumerate(r.candidates) if member(str(c.get("hypothesis", "")))
    ]  # fmt: skip
    if offered:
        r, i = offered[0]
        return draw_measure(backend, r, i, move, adapter, temperature, tilt)
    if any(r.tokens for r in rollouts):  # sampled lists, none of which wrote the move: where it was offered
        whole = len(move.split()) == 2  # a verb and its target; a verb alone spans targets and decoys
        return slot_measure(backend, rollouts, move, adapter, temperature, lists=1) if whole else None
    if not rollouts:
        return None
    last = rollouts[-1]
    parent = json.loads(last.action).get("parent", 0)
    got = class_logprobs(backend, last.prompt, last.json_schema, move, parent, adapter, temperature)
    if got is None:
        return None
    return {"scored": True, "measure": "first-candidate probability", "logprob": got[0], "base": got[1],
            "ratio": math.exp(got[0] - got[1])}  # fmt: skip


def draw_measure(
    backend: Any, rollout: Any, i: int, move: str, adapter: str, temperature: float, tilt: tuple[float, float]
) -> dict | None:
    """`measure`'s payload for candidate `i` of a rollout's sampled list, which writes the class: its
    offer (`offer_positions`), every candidate's stated value (`StatedPlan`) and, with `tilt`, each
    candidate's move log-ratio (`training.tilt`), all from one scoring of the list per model."""
    from arts.policy.spans import candidate_token_spans
    from arts.training.logprobs import move_positions
    from arts.training.tilt import tilted

    tok, tokens, schema = backend.tokenizer, rollout.tokens, rollout.json_schema or {}
    offer_at = offer_positions(tok, tokens, i, move)
    if offer_at is None:
        return None
    beta, cap = tilt
    spans = (
        candidate_token_spans(tok.decode(tokens, skip_special_tokens=True), tokens, tok.decode)
        if beta
        else []
    )
    moves = [move_positions(tok, tokens, span) for span in spans]
    plan = StatedPlan.of(backend, schema, tokens, [*offer_at, *(p for m in moves for p in m)])
    if any(s is None for s in plan.starts) or i >= len(plan.starts):
        return None
    got = list_distributions(backend, adapter, rollout.prompt, schema, plan.rows, temperature)
    if got is None:
        return None
    stated = plan.values(*got)
    offer = [math.exp(picked(rows[0], tokens, offer_at)) for rows in got]
    n = len(stated)
    factors = [1.0] * n
    if beta and len(moves) == n:
        ratios = [picked(got[0][0], tokens, m) - picked(got[1][0], tokens, m) for m in moves]
        factors = tilted([1.0] * n, ratios, beta, cap)
    tuned = [s[0] * f for s, f in zip(stated, factors)]
    weight, weight_base = tuned[i] / math.fsum(tuned), stated[i][1] / math.fsum(s[1] for s in stated)
    draw, draw_base = offer[0] * weight, offer[1] * weight_base
    return {"scored": True, "measure": "draw probability", "draw": draw, "draw_base": draw_base,
            "offer": offer[0], "offer_base": offer[1], "stated": stated[i][0], "stated_base": stated[i][1],
            "weight": weight, "weight_base": weight_base, "tilt": factors[i],
            "ratio": draw / draw_base}  # fmt: skip
