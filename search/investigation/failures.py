"""Failure attribution over one round: which work is attributed, and each decision stored with its inputs.

A round's failed or regressed nodes are attributed; when the best-so-far curve has stalled (slope,
volatility, marginal decay), the plateau is too, first: its best experiment's report, with the trajectory
features and what the plateau tried, is attributed, and the decision applies to every hypothesis the
plateau's experiments tested but those of its experiments that set a new best (`progress`). In the
reflection mode one free-text reflection replaces the diagnosis. At most `per_round` attributions run (each is three model calls); while a round's experiments run at once, those
whose place among them is settled start before the others have evaluated (`Ahead`). Not done here: the
causes, critic, judge and routing table themselves (`attribution`), or applying a decision
(`hypotheses.Exploit`).
"""

from __future__ import annotations

from typing import NamedTuple

from arts.policy.analysis import Analyst
from arts.search.investigation import signals
from arts.search.investigation.attribution import (
    AttributionConfig,
    Decision,
    Together,
    Trajectory,
    attribute,
    stalled,
    trajectory,
)
from arts.search.investigation.reports import failed_or_regressed
from arts.search.ledger import Ledger
from arts.search.render import INSIGHT_CHARS
from arts.search.state import Insight, Node, SearchState


def best_so_far(state: SearchState) -> list[float]:
    out, best = [], None
    for n in sorted(state.nodes.values(), key=lambda n: n.id):
        if n.score is not None:
            best = n.score if best is None else max(best, n.score)
        if best is not None and n.parent is not None:
            out.append(best)
    return out


class Todo(NamedTuple):
    """What a round's attribution will look at, known before any model call."""

    nodes: list[Node]
    plateau: list[Node]
    traj: Trajectory
    stall: Node | None = None
    """The plateau's best experiment, attributed for the stall (its decision applies to the plateau)."""


def todo(state: SearchState, nodes: list[Node], cfg: AttributionConfig) -> Todo:
    """This round's failed or regressed nodes; when the curve has stalled, also the best experiment of the
    plateau (with the plateau), first and besides `per_round`: a stall is attributed and routed whether or
    not a node failed."""
    failed = [n for n in nodes if failed_or_regressed(state, n)][: cfg.per_round]
    traj = trajectory(best_so_far(state), cfg)
    if not stalled(traj, cfg):
        return Todo(failed, [], traj)
    plateau = [n for n in sorted(state.nodes.values(), key=lambda n: n.id) if n.parent is not None]
    plateau = plateau[-cfg.window :]
    scored = [n for n in plateau if n.status == "valid" and n.score is not None]
    stall = max(scored, key=lambda n: n.score) if scored else plateau[-1]
    return Todo([stall] + [n for n in failed if n.id != stall.id], plateau, traj, stall)


class Ahead:
    """A round's attributions started while its other experiments still evaluate.

    `todo` attributes the first `per_round` failed or regressed nodes of the round, in node order. Once
    a node and every node before it have committed, whether it is one of them is settled, and its report
    reads only the node and its parent: its model calls can start at once, in the thread of the
    experiment that settled it, batched with the executors still asking (the round's `Overlap`), while
    the model would otherwise wait for the last evaluations. The decisions wait here for
    `attribute_round`, which stores them where and in the order it always does; a call that raised is
    asked again there. A round without a failed node (a stall's plateau, whose trajectory needs the whole
    round) waits for its end, as does the reflection mode."""

    def __init__(
        self, ledger: Ledger, analyst: Analyst, cfg: AttributionConfig, seed: int, before: list[Node],
        deterministic: bool = False,
    ):  # fmt: skip
        self.ledger, self.analyst, self.cfg, self.seed = ledger, analyst, cfg, seed
        self.deterministic = deterministic
        self.order = [n.id for n in before]
        self.started: set[int] = set()
        self.decisions: dict[int, Decision | None] = {}

    def expect(self, nodes: list[Node]) -> None:
        """The round's next nodes, in node order."""
        self.order += [n.id for n in nodes]

    def settled(self) -> list[int]:
        """Nodes known to be attributed this round and not started yet."""
        state, failed, out = self.ledger.state, 0, []
        for nid in self.order:
            if state.nodes[nid].status == "pending":  # not committed yet
                break
            if failed_or_regressed(state, state.nodes[nid]):
                failed += 1
                if failed > self.cfg.per_round:
                    break
                if nid not in self.started:
                    out.append(nid)
        return out

    def commit(self, together: Together) -> None:
        """A node has committed: attribute what that settles, here and now (the caller holds the harness
        and lets it go while the model answers)."""
        ready = self.settled()
        self.started.update(ready)
        state = self.ledger.state
        for nid in ready:
            n = state.nodes[nid]
            folder = self.ledger.store.node_dir(nid)
            sig = signals.measure(state, n, folder, self.deterministic)
            try:
                decision = attribute(
                    self.analyst,
                    signals.failure_report(state, n, folder, sig),
                    self.cfg,
                    self.seed,
                    together,
                    sig.evidence(),
                )
            except Exception:  # asked again at the round's end, where its error is raised as before
                continue
            self.decisions[nid] = decision


def attribute_round(
    ledger: Ledger,
    analyst: Analyst,
    nodes: list[Node] | Todo,
    cfg: AttributionConfig,
    round: int,
    seed: int,
    together: Together | None = None,
    ahead: Ahead | None = None,
    deterministic: bool = False,
) -> dict[int, Decision]:
    """node id -> the routed decision, for this round's failed or regressed nodes (or the best node when
    the curve has stalled); `nodes` may be their `todo` already. The attributions, and the calls of each
    that do not wait on one another, go through `together`; those `ahead` already made are taken from it.
    `deterministic`: the evaluator is known to be exact (a signal the causes and the critic weigh)."""
    state = ledger.state
    work = nodes if isinstance(nodes, Todo) else todo(state, nodes, cfg)
    plateau, traj = work.plateau, work.traj
    spared = progress(state, plateau)

    def one(n: Node) -> tuple[Node, Decision | None]:
        folder = ledger.store.node_dir(n.id)
        sig = signals.measure(state, n, folder, deterministic)
        rep = signals.failure_report(state, n, folder, sig)
        stall = work.stall is not None and n.id == work.stall.id
        if stall:
            rep += "\n" + stall_text(traj, plateau)
        if cfg.mode == "reflection":
            reflect(ledger, analyst, rep, n, round, seed)
            return n, None
        early = ahead is not None and not stall and n.id in ahead.decisions
        # a stall's failure is the plateau's: on an exact evaluator its programs ran and were measured as
        # they are, so it is the method's (never a repair or a protocol fix of the best node), and where its
        # best node moved an inert knob it is pivoted from (a probe-kepler run refined `increase MAX_ITER`,
        # which changes no score, "with a smaller step")
        evidence = sig.evidence()
        if stall and not (deterministic and evidence[1] in ("accept", "pivot")):
            evidence = ("method" if deterministic else None), ""
        decision = (
            ahead.decisions[n.id]
            if early
            else attribute(analyst, rep, cfg, seed=seed, together=together, evidence=evidence)
        )
        ledger.event(
            "routing",
            round=round,
            node=n.id,
            ahead=early,
            ok=decision is not None,
            decision=decision.model_dump() if decision else None,
            trajectory=traj.model_dump(),
            plateau=[m.id for m in plateau] if stall else [],
            spared=sorted(spared) if stall else [],
        )
        return n, decision

    out: dict[int, Decision] = {}
    jobs = [lambda n=n: one(n) for n in work.nodes]
    for n, decision in together(jobs) if together else [job() for job in jobs]:
        if decision is not None:  # a stall's decision applies to the plateau but its progress
            stall = work.stall is not None and n.id == work.stall.id
            out.update(
                {m.id: decision for m in plateau if m.id not in out and m.id not in spared}
                if stall
                else {n.id: decision}
            )
    return out


def progress(state: SearchState, plateau: list[Node]) -> set[int]:
    """The plateau's experiments that a stall's decision leaves alone: each that set a new best and whose
    hypothesis no later experiment of the plateau tried again, with the others of that hypothesis. A stall
    is a direction tried and no longer paying; an incumbent's direction that was not tried again from it
    has not stalled, whatever the slope says of the moves around it. A curve whose steps pay less and less
    (doubling a quadrature's panels: +0.6, +0.6, +0.19) reads as flat while its last step sets a new best,
    and on probe-quadrature two runs of five pivoted from `increase STEPS`, the one move that paid, that
    way (docs/benchmark.md)."""
    best, rose = None, set()
    for n in sorted(state.nodes.values(), key=lambda n: n.id):
        if n.score is not None and (best is None or n.score > best):
            if best is not None and n.parent is not None:
                rose.add(n.id)
            best = n.score
    ids = [m.id for m in plateau]
    spared: set[int] = set()
    for at, nid in enumerate(ids):
        if nid not in rose:
            continue
        same = {i for h in state.hypotheses.values() if nid in h.nodes for i in h.nodes} & set(ids)
        if not same & set(ids[at + 1 :]):
            spared |= same | {nid}
    return spared


def stall_text(traj: Trajectory, plateau: list[Node]) -> str:
    """The trajectory features and the plateau's experiments, for the analyst."""
    tried = "; ".join(f"node {n.id}: {n.hypothesis[:50]}" for n in plateau)
    return (
        f"The best-so-far curve has stalled over the last {len(plateau)} experiments (slope "
        f"{traj.slope:.3f}, volatility {traj.volatility:.3f}, marginal decay {traj.marginal_decay:.2f} of "
        f"its span). They tried: {tried}"
    )


def reflect(ledger: Ledger, analyst: Analyst, rep: str, node: Node, round: int, seed: int) -> None:
    """The reflection baseline: one free-text reflection, kept in the memory the next prompts show."""
    text = analyst.reflect(rep, seed=seed)
    ledger.event("reflection", round=round, node=node.id, ok=text is not None, text=text)
    if text is not None:
        ledger.add(
            Insight(
                text=f"reflection on node {node.id}: {text}"[:INSIGHT_CHARS],
                kind="memory",
                node=node.id,
                round=round,
            )
        )
