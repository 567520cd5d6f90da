"""Where a hypothesis stands: its evidence counted, what that makes refuted or established, and the answer node.

`space` decides which records exist and which evidence between an observation and a hypothesis is the
current one; this module only reads that evidence and judges: counts per relation, split by whether the
observation is confirmed (seen twice, or confirmed by a comparison), the refutation rule, the observations
no active hypothesis explains, and the node a search returns. Pure functions over a `SearchState`: nothing
here writes a record, does I/O or calls a model.

Not done here: weighing evidence beyond counting: one confirmed opposing observation refutes a hypothesis.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from arts.search.investigation.space import ACTIVE, latest_pairs
from arts.search.state import Node, Observation, SearchState


class Tally(BaseModel):
    """Observation counts per relation."""

    model_config = ConfigDict(extra="forbid")
    support: int = 0
    """Observations that support the hypothesis."""
    oppose: int = 0
    """Observations that oppose it."""
    neutral: int = 0
    """Observations assessed as neither."""
    unassessed: int = 0
    """Observations related to it but not assessed yet."""


class Standing(BaseModel):
    """Where a hypothesis stands: its evidence split by whether the observation is confirmed."""

    model_config = ConfigDict(extra="forbid")
    confirmed: Tally = Field(default_factory=Tally)
    """Counts over confirmed observations (seen twice, or confirmed by a comparison)."""
    provisional: Tally = Field(default_factory=Tally)
    """Counts over provisional observations (seen once); these never refute."""


def _standings(state: SearchState) -> dict[int, Standing]:
    out: dict[int, Standing] = {}
    for (oid, hid), e in latest_pairs(state).items():
        s = out.setdefault(hid, Standing())
        tally = s.provisional if state.observations[oid].provisional else s.confirmed
        setattr(tally, e.relation, getattr(tally, e.relation) + 1)
    return out


def standing(state: SearchState, hypothesis_id: int) -> Standing:
    """Support / oppose / neutral / unassessed counts for one hypothesis, confirmed and provisional."""
    return _standings(state).get(hypothesis_id, Standing())


def refuted(state: SearchState, hypothesis_id: int) -> bool:
    """True when a confirmed observation opposes it (a provisional observation never refutes)."""
    return standing(state, hypothesis_id).confirmed.oppose > 0


def established(state: SearchState, hypothesis_id: int) -> bool:
    """Confirmed support and no confirmed opposition (unrefuted but unsupported is not established)."""
    s = standing(state, hypothesis_id).confirmed
    return s.support > 0 and s.oppose == 0


def unexplained(state: SearchState) -> list[Observation]:
    """Observations that no working, retained or revived hypothesis has a support relation with."""
    explained = {
        oid
        for (oid, hid), e in latest_pairs(state).items()
        if e.relation == "support"
        and state.hypotheses[hid].status in ACTIVE
        and not state.hypotheses[hid].archived
    }
    return [o for _, o in sorted(state.observations.items()) if o.id not in explained]


def best_supported(state: SearchState) -> Node | None:
    """The answer node: the best valid node, preferring nodes whose hypotheses are not refuted.

    Order: no tested hypothesis refuted, then score (higher first; unscored last, as in a diagnosis task),
    then an established hypothesis, then confirmed support, then the oldest node.
    """
    standings = _standings(state)
    by_node: dict[int, list[int]] = {}
    for h in state.hypotheses.values():
        for nid in h.nodes:
            by_node.setdefault(nid, []).append(h.id)

    def key(n: Node) -> tuple:
        s = [standings.get(hid, Standing()).confirmed for hid in by_node.get(n.id, [])]
        return (
            not any(t.oppose for t in s),
            n.score is not None,
            n.score or 0.0,
            any(t.support and not t.oppose for t in s),
            sum(t.support for t in s),
            -n.id,
        )

    return max(state.valid_nodes(), key=key, default=None)
