"""Observations of an arts round: what each experiment and each joint comparison showed, with evidence
relations to the hypotheses they bear on.

For a program the harness writes the observation from measured numbers (`changing MARGIN raised
sum_of_radii`), never from model text; for a diagnosis the investigator's findings are the observations.
A repeated observation is confirmed, not duplicated (`space.observe`). The joint comparison of a round's
tested hypotheses adds model-written observations with a verdict per hypothesis and names flawed tests.
Not done here: deciding what to do with a hypothesis (`hypotheses.Exploit`).
"""

from __future__ import annotations

import re

from arts.policy.analysis import Analyst
from arts.search.investigation import space
from arts.search.ledger import Ledger
from arts.search.state import INTERRUPTED, Hypothesis, Node, SearchState

NOT_A_RESULT = ("evaluation budget spent", INTERRUPTED)
"""Reasons of invalid nodes that say nothing about their hypothesis."""


def _change(node: Node) -> str:
    """What the node changed, without numbers (so the same change seen twice is the same observation)."""
    applied = [t["action"] for t in node.transcript if t.get("applied") and t.get("action")]
    last = applied[-1] if applied else None
    if last and last.get("op") == "set_constant":
        return f"changing {last['name']}"
    if last and last.get("op") == "replace_function":
        return f"rewriting {last['name']}"
    return f"a change of {space.normalise_label(node.axis) or 'the program'}"


def execution_observation(state: SearchState, node: Node, metric: str) -> tuple[str, str, str] | None:
    """(text, region, relation) the measured outcome of `node` says about its hypothesis."""
    parent = state.nodes.get(node.parent) if node.parent is not None else None
    what = _change(node)
    if node.status == "invalid" and node.reason.startswith(NOT_A_RESULT):
        return None  # the run ran out or was killed: nothing was learned about the hypothesis
    if node.status == "invalid":
        kind = (node.reason.split(":")[0] or "no result")[:60]
        return f"{what} broke the program ({kind})", "errors", "oppose"
    if parent is None or parent.score is None or node.score is None:
        return None
    if node.score > parent.score:
        return f"{what} raised {metric}", metric, "support"
    if node.score < parent.score:
        return f"{what} lowered {metric}", metric, "oppose"
    return f"{what} left {metric} unchanged", metric, "neutral"


def worded(text: str) -> bool:
    """At least two words of letters: a 135M model's comparison sometimes returns bare punctuation and
    digits (", 1.1498}}, {"), which is not an observation."""
    return len(re.findall(r"[A-Za-z]{2,}", text)) >= 2


def record(ledger: Ledger, text: str, source: str, region: str, node: int | None, round: int) -> int:
    o, new = space.observe(ledger.state, text, source, region, node, round)
    if new:
        return ledger.add(o).id
    return (ledger.update(o) if o != ledger.state.observations[o.id] else o).id


def after_node(
    ledger: Ledger,
    node: Node,
    h: Hypothesis,
    metric: str,
    round: int,
    observations: bool,
    findings: list | None = None,
) -> None:
    """Link the node to its hypothesis and store what it showed, with evidence relations."""
    ledger.update(space.record_node(ledger.state.hypotheses[h.id], node.id))
    if not observations:
        return
    facts = [(f.text, f.region, f.relation) for f in findings or []]
    if not facts and (obs := execution_observation(ledger.state, node, metric)) is not None:
        facts = [obs]
    for text, region, relation in facts:
        oid = record(ledger, text, "execution", region, node.id, round)
        ledger.put(space.relate(ledger.state, oid, h.id, relation, round, note=f"node {node.id}"))


def result_line(state: SearchState, h: Hypothesis, limit: int = 3) -> str:
    parts = []
    for nid in h.nodes[-limit:]:
        n = state.nodes[nid]
        parts.append(
            f"node {nid}: {n.raw_score:.5g}" if n.raw_score is not None else f"node {nid}: {n.status}"
        )
    return "; ".join(parts)


def compare(
    ledger: Ledger,
    analyst: Analyst,
    tested: list[Hypothesis],
    round: int,
    seed: int,
    observations: bool,
    recent: int = 5,
) -> set[int]:
    """One joint comparison over the round's tested hypotheses; returns the ids it calls flawed."""
    state = ledger.state
    hyps = [(h.id, h.text, result_line(state, h)) for h in tested]
    shown = sorted(state.observations.values(), key=lambda o: o.id)[-recent:]
    got = analyst.compare(hyps, [(o.id, o.text) for o in shown], seed=seed)
    c = analyst.last
    ledger.event(
        "comparison",
        round=round,
        ok=got is not None,
        result=got.model_dump() if got else None,
        error=c.error if c else None,
    )
    if got is None:
        return set()
    if observations:
        for v in (v for v in got.verdicts if worded(v.observation)):
            oid = record(ledger, v.observation, "comparison", "comparison", None, round)
            ledger.put(space.relate(state, oid, v.hypothesis, v.verdict, round, note="comparison"))
    return set(got.flawed)
