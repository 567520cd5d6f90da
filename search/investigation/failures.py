"""Failure attribution over one round: which work is attributed, and each decision stored with its inputs.

A round's failed or regressed nodes are attributed; when none is and the best-so-far curve has stalled
(slope, volatility, marginal decay), the best node is, with the trajectory added to its report. At most
`per_round` attributions run (each is three model calls). Not done here: the causes, critic, judge and
routing table themselves (`attribution`), or applying a decision (`hypotheses.Exploit`).
"""

from __future__ import annotations

from arts.policy.analysis import Analyst
from arts.search.investigation.attribution import AttributionConfig, Decision, attribute, stalled, trajectory
from arts.search.investigation.reports import failed_or_regressed, report
from arts.search.ledger import Ledger
from arts.search.state import Node, SearchState


def best_so_far(state: SearchState) -> list[float]:
    out, best = [], None
    for n in sorted(state.nodes.values(), key=lambda n: n.id):
        if n.score is not None:
            best = n.score if best is None else max(best, n.score)
        if best is not None and n.parent is not None:
            out.append(best)
    return out


def attribute_round(
    ledger: Ledger,
    analyst: Analyst,
    nodes: list[Node],
    cfg: AttributionConfig,
    round: int,
    seed: int,
) -> dict[int, Decision]:
    """node id -> the routed decision, for this round's failed or regressed nodes (or the best node when
    the curve has stalled)."""
    state = ledger.state
    todo = [n for n in nodes if failed_or_regressed(state, n)]
    traj = trajectory(best_so_far(state), cfg)
    if not todo and stalled(traj, cfg) and (best := state.best()) and best.parent:
        todo = [best]
    out: dict[int, Decision] = {}
    for n in todo[: cfg.per_round]:
        rep = report(state, n, ledger.store.node_dir(n.id))
        if n in nodes and not failed_or_regressed(state, n):
            rep += f"\nThe best-so-far curve has stalled: {traj.model_dump()}"
        decision = attribute(analyst, rep, cfg, seed=seed)
        ledger.event(
            "routing",
            round=round,
            node=n.id,
            ok=decision is not None,
            decision=decision.model_dump() if decision else None,
            trajectory=traj.model_dump(),
        )
        if decision is not None:
            out[n.id] = decision
    return out
