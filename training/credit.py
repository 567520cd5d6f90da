"""The credit check: has test-time training learned which actions pay off, apart from the tree it grew?

A better best score under training could come from a different tree rather than a better policy. This check
asks the policy itself, on data it was never trained on. Every rollout of a TTT run was sampled under the
adapter in force at its round, which was trained only on earlier rounds; its reward came later. For each
such action, the shift is its log-probability under that adapter minus under the base model (the adapter
switched off), both summed over the action's own tokens under the same prompt, grammar mask and sampling
temperature (the trainer's: the stored log-prob was taken at it). If the
adapter learned something that carries over, it raised the better action of a group more than the worse
one. Over every pair of actions of one group with different rewards:

    concordance = P(shift of the better action > shift of the worse one)   (ties count one half)

0.5 is no learning (or an adapter that moved every action alike); above 0.5, the adapter trained on earlier
rounds already preferred what the later evaluations rewarded. Chosen over executing fresh samples of the
base and the final adapter on the last states: it costs one forward pass per group and no evaluation, and it
is held out by construction. Rollouts under checkpoint 0 are left out unless it was a warm start (checkpoint
0 then differs from the base); groups whose rewards are all equal hold no pair.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from arts.training.logprobs import (
    action_schema,
    build_targets,
    grammar_text,
    score_targets,
    span_targets,
)

TIE = 1e-3
"""Shifts closer than this (nats) are a tie: float rounding, not a preference."""


@dataclass
class CreditAction:
    """One rewarded action of a group, as the check needs it."""

    group: int
    reward: float
    adapted: float
    """Its summed log-prob under the adapter that sampled it (the stored old log-prob)."""
    base: float
    """The same under the base model."""

    @property
    def shift(self) -> float:
        return self.adapted - self.base


class CreditCheck(BaseModel):
    """The check's result (see the module docstring)."""

    groups: int
    """Groups that held at least one pair."""
    pairs: int
    """Pairs of actions of one group with different rewards."""
    concordance: float | None
    """Share of pairs whose better action the adapter raised more; None without pairs."""
    shift_better: float | None
    """Mean shift (nats) of the actions rewarded above their group's mean (in groups that hold a pair)."""
    shift_worse: float | None
    """Mean shift of the actions rewarded at or below it."""
    actions: int
    """Rewarded actions under a trained adapter that the check scored."""

    def line(self) -> str:
        if self.concordance is None:
            return f"credit check: no pair of differently rewarded actions under a trained adapter ({self.actions} actions)"
        return (
            f"credit check: concordance {self.concordance:.3f} over {self.pairs} pairs in {self.groups} groups "
            f"(0.5 = no learning); shift better {self.shift_better:+.3f}, worse {self.shift_worse:+.3f} nats"
        )


def credit(actions: list[CreditAction]) -> CreditCheck:
    """The concordance of shifts with rewards over the pairs within each group."""
    by_group: dict[int, list[CreditAction]] = {}
    for a in actions:
        by_group.setdefault(a.group, []).append(a)
    wins, pairs, groups = 0.0, 0, 0
    better, worse = [], []
    for members in by_group.values():
        mean = math.fsum(a.reward for a in members) / len(members)
        found = 0
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                if a.reward == b.reward:
                    continue
                hi, lo = (a, b) if a.reward > b.reward else (b, a)
                diff = hi.shift - lo.shift
                wins += 0.5 if abs(diff) < TIE else float(diff > 0)
                found += 1
        pairs, groups = pairs + found, groups + (found > 0)
        for a in members if found else []:
            (better if a.reward > mean else worse).append(a.shift)

    def mean_of(xs: list[float]) -> float | None:
        return math.fsum(xs) / len(xs) if xs else None

    return CreditCheck(
        groups=groups,
        pairs=pairs,
        concordance=wins / pairs if pairs else None,
        shift_better=mean_of(better),
        shift_worse=mean_of(worse),
        actions=len(actions),
    )


@contextlib.contextmanager
def base_model(model: Any) -> Iterator[None]:
    """The base model: a peft model with every adapter switched off; a plain model as it is."""
    if hasattr(model, "disable_adapter"):
        with model.disable_adapter():
            yield
    else:
        yield


def base_span_logprobs(
    backend: Any, prompt: list[dict[str, Any]], json_schema: dict[str, Any], tokens: list[int],
    spans: list[tuple[int, int]], temperature: float = 1.0,
) -> list[float] | None:  # fmt: skip
    """Summed log-prob of each span of one sampled proposal under the base model, the proposal's grammar
    and `temperature` (the trainer's, so that it compares with the stored old log-probs); None when the
    grammar rejects the tokens."""
    return base_lists_logprobs(backend, prompt, json_schema, [(tokens, spans)], temperature)[0]


def base_lists_logprobs(
    backend: Any, prompt: list[dict[str, Any]], json_schema: dict[str, Any],
    lists: list[tuple[list[int], list[tuple[int, int]]]], temperature: float = 1.0,
) -> list[list[float] | None]:  # fmt: skip
    """`base_span_logprobs` of several proposals sampled from one prompt, in one scoring (the prompt run
    once for all of them)."""
    made = [span_targets(backend, json_schema, tokens, [(0, len(tokens))]) for tokens, _ in lists]
    ok = [m[0] for m in made if m]
    values = iter(_score(backend, prompt, ok, temperature) if ok else [])
    out: list[list[float] | None] = []
    for m, (_, spans) in zip(made, lists):
        row = next(values) if m else None
        out.append(None if row is None else [math.fsum(row[s:e]) for s, e in spans])
    return out


def base_text_logprobs(
    backend: Any, prompt: list[dict[str, Any]], json_schema: dict[str, Any] | None, actions: list[str],
    temperature: float = 1.0,
) -> list[float | None]:  # fmt: skip
    """Summed log-prob of each single-action text under the base model at `temperature` (a served
    scientist's rollouts, which carry no tokens); None for a text the grammar rejects."""
    texts = [grammar_text(a) for a in actions]
    targets = build_targets(backend, action_schema(json_schema, texts[0]), texts)
    ok = [t for t in targets if t is not None]
    values = iter(_score(backend, prompt, ok, temperature) if ok else [])
    return [math.fsum(next(values)) if t is not None else None for t in targets]


def _score(
    backend: Any, prompt: list[dict[str, Any]], targets: list, temperature: float
) -> list[list[float]]:
    tok = backend.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    with base_model(backend.model):
        return score_targets(backend.model, backend.encode_prompt(prompt), targets, pad, temperature)
