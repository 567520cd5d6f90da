"""Follow-ups: what a routed failure attribution makes the next round do, before it proposes anything.

A decision only counts if it changes what happens next. `hypotheses.Exploit` turns each decision into a
follow-up, stored in the run's meta (`follow_ups`, so a killed run resumes with them), and the next arts
round runs them first:
- repair: the same hypothesis from the same parent again, with the cause and its fix as the executor's
  instructions: a new node that `follows` the failed one, edited from the failed program (`start`);
- remeasure (fix_protocol on a scored node): the node's program evaluated once more. The task contract
  offers no other protocol knob (no seed, no budget), so a doubtful measurement is checked by repeating
  it: when the two disagree, the node keeps the worse score and says so (its place as best or as a parent
  changes with it); when they agree, the measurement stands. A fix_protocol on a node without a score
  is run again like a repair, with the protocol fix as instructions. Once the run's remeasurements have
  all reproduced their scores (`reproducible`: the evaluator is deterministic), a doubted measurement is
  no longer repeated: the remeasurement becomes a repair, the hypothesis implemented again from the
  node's parent (`as_run`). Measured on a quadrature task: 2 of 12 evaluations of a run went to
  remeasurements that repeated a score exactly, the second of them after the first had;
- refine: the refined child hypothesis (with its lineage) from the better of the attributed node and its
  parent, with the fix as instructions (a valid but worse program is edited under its parent: `start`); the child becomes a working hypothesis with that node's evidence.
A comparison's predictions that name a constant of the best program schedule a probe of it
(`probes`): a prediction that tells hypotheses apart becomes a measurement. A comparison's `flawed` verdict (a bug or a broken protocol, not a refutation) schedules a retest the same
way: a remeasurement of a scored node, else a repair. Follow-ups are the harness's experiments, not the scientist's samples: they make no rollout, so
test-time training groups stay the scientist's own draws. Each costs one evaluation of the budget; at
most `attribution.follow_ups` run per round, oldest first.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from arts.search.ledger import Ledger
from arts.search.state import Node, SearchState

KEY = "follow_ups"
"""The run meta key of the pending follow-ups (a list of `FollowUp` dicts, oldest first)."""
AGREE = 1e-9
"""Two measurements agree when they differ by at most this, relative to the larger magnitude (or 1)."""


class FollowUp(BaseModel):
    """One experiment a decision scheduled."""

    model_config = ConfigDict(extra="forbid")
    step: Literal["repair", "remeasure", "refine", "probe"]
    decision: str
    """The routed action that scheduled it, or `retest` (a comparison called the experiment flawed)."""
    hypothesis: int | None = None
    """The hypothesis it tests (the refined child, for a refinement); None for a probe."""
    node: int
    """The attributed node it follows up."""
    parent: int
    """The node the experiment starts from (the node itself, for a remeasurement)."""
    start: int | None = None
    """The failed node whose program (the idea, with its bug or its flaw) the executor edits; None: `parent`'s."""
    text: str
    """The hypothesis as the executor reads it; for a probe, the constant probed."""
    axis: str = ""
    instructions: str = ""
    round: int
    """The round whose decision scheduled it."""


def pending(state: SearchState) -> list[FollowUp]:
    return [FollowUp.model_validate(x) for x in state.meta.get(KEY, [])]


MAX_PENDING = 4
"""Follow-ups kept waiting at most: a stall routed for several hypotheses at once must not queue more
work than the next rounds will reach (the oldest are dropped, and the drop is logged)."""


def schedule(ledger: Ledger, item: FollowUp) -> None:
    items = [*pending(ledger.state), item]
    for old in items[:-MAX_PENDING]:
        ledger.event("follow_up_dropped", **old.model_dump())
    ledger.set_meta(KEY, [x.model_dump() for x in items[-MAX_PENDING:]])
    ledger.event("follow_up_scheduled", **item.model_dump())


def take(ledger: Ledger) -> FollowUp | None:
    """Remove and return the oldest pending follow-up (removed before it runs: a run killed during it
    closes its node as interrupted on resume and does not run it again)."""
    items = pending(ledger.state)
    if not items:
        return None
    ledger.set_meta(KEY, [x.model_dump() for x in items[1:]])
    return items[0]


def start_of(state: SearchState, node: Node) -> int:
    """Where a refinement starts: the attributed node when it is valid and no worse than its parent,
    else its parent (a refinement revises the idea, not a broken program)."""
    parent = state.nodes.get(node.parent) if node.parent is not None else None
    if parent is None:
        return node.id
    if (
        node.status == "valid"
        and node.score is not None
        and (parent.score is None or node.score >= parent.score)
    ):
        return node.id
    return parent.id


def agree(a: float, b: float) -> bool:
    return abs(a - b) <= AGREE * max(1.0, abs(a), abs(b))


def reproducible(ledger: Ledger, declared: bool = False) -> bool:
    """Whether this run's evaluator is deterministic: `declared` so by its task (`metric.deterministic`),
    or shown so: it has remeasured a node, and every remeasurement reproduced the first score."""
    seen = [] if declared else ledger.events("remeasure")
    return declared or (bool(seen) and all(e.payload["stable"] for e in seen))


def as_run(item: FollowUp, state: SearchState, ledger: Ledger, deterministic: bool = False) -> FollowUp:
    """The follow-up as it runs now: a remeasurement on a run whose evaluator is deterministic (declared,
    or it reproduced every remeasured score: `reproducible`) becomes a repair from the node's parent (the
    same score again would tell nothing); any other follow-up as scheduled."""
    node = state.nodes.get(item.node)
    if item.step != "remeasure" or node is None or node.parent is None:
        return item
    if not reproducible(ledger, deterministic):
        return item
    why = (
        "Its measurement is reproducible (the task declares its evaluator deterministic)"
        if deterministic
        else "Its measurement is reproducible (this evaluator gave every remeasured score again exactly)"
    )
    return item.model_copy(
        update={
            "step": "repair",
            "parent": node.parent,
            "start": node.id if item.decision == "retest" else None,  # a flawed program: edit it
            "instructions": f"{why}: try the hypothesis another way.",
        }
    )
