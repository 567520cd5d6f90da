"""Companions: the candidates a round's lists wrote, were not drawn, and name an action that ran.

A round samples N verbalized lists of K candidates and runs one drawn action from each. The other
candidates are samples of the same policy too (each under the prompt and the candidates before it), and
where one names the same experiment as a drawn action (the same parent and the same directed move,
`increase TOL`; or the same hypothesis, for a free one) its outcome is known without another evaluation:
the drawn action's reward. `ttt.companions` adds them to the round's group, each trained on its own
sampled tokens like a drawn action. On the five probe-jacobi runs of the live tilt bench, the lists held
75 such candidates beside 67 drawn actions: more than twice the samples per update for no evaluation.

Not done here: which actions were drawn, or their rewards (`search.rollout_rewards`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from arts.policy.edits.moves import directed_target
from arts.policy.proposal_schema import canonical_action
from arts.policy.spans import candidate_token_spans
from arts.search.state import Rollout


@dataclass
class Companion:
    """A written, undrawn candidate whose experiment ran: its action text, reward, list and span there."""

    action: str
    reward: float
    tokens: list[int]
    span: tuple[int, int]


def experiment(candidate: dict[str, Any]) -> tuple[Any, Any]:
    """What a candidate runs: its parent and its directed move (verb, target), else its hypothesis."""
    hypothesis = str(candidate.get("hypothesis", ""))
    return candidate.get("parent"), directed_target(hypothesis) or hypothesis.strip()


def companions(members: list[Rollout], decode: Callable[[list[int]], str]) -> list[Companion]:
    """The companions of one group's drawn rollouts (each with its list's tokens and span): every candidate
    of their lists that no member drew and whose experiment a member ran, rewarded as that member (the mean
    where two members ran it and were paid differently). A list whose tokens do not split into its
    candidates gives none."""
    paid: dict[tuple[Any, Any], list[float]] = {}
    for r in members:
        if 0 <= r.drawn < len(r.candidates) and r.reward is not None:
            paid.setdefault(experiment(r.candidates[r.drawn]), []).append(r.reward)
    drawn: dict[tuple[int, ...], set[int]] = {}
    lists: dict[tuple[int, ...], Rollout] = {}
    for r in members:
        drawn.setdefault(tuple(r.tokens), set()).add(r.drawn)
        lists.setdefault(tuple(r.tokens), r)
    out = []
    for key, r in lists.items():
        spans = candidate_token_spans(decode(r.tokens), r.tokens, decode)
        if len(spans) != len(r.candidates):
            continue
        for i, (c, span) in enumerate(zip(r.candidates, spans)):
            rewards = paid.get(experiment(c))
            if i in drawn[key] or not rewards:
                continue
            out.append(Companion(canonical_action(c), math.fsum(rewards) / len(rewards), r.tokens, span))
    return out
