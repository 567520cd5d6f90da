"""The arts round, as the design states it: plan, propose, draw, execute, attribute, compare, exploit, stop.

Each line of `arts_round` is one step; the steps live in `proposals` (propose, execute) and in
`search.investigation` (the spaces, attribution, comparison). Verbalized sampling: the scientist states a
probability for each of K candidates and an external sampler draws N of the admissible ones by them
(weights shared per region, cited open evidence favoured), from the tail past `scientist.tail_depth`.
"""

from __future__ import annotations

from arts.policy.sampler import draw
from arts.search.console import drawn_line, routes_line
from arts.search.context import Run
from arts.search.investigation import followups, hypotheses, observations, probes, space
from arts.search.investigation.attribution import Decision
from arts.search.investigation.failures import Ahead, attribute_round, todo
from arts.search.investigation.plan import plan_once
from arts.search.methods.base import method
from arts.search.methods.proposals import (
    Proposed,
    analysis_at_once,
    probe_budget,
    propose,
    run_group,
    run_probe,
)
from arts.search.state import Node


@method("arts", makes_groups=True, registers_hypotheses=True)
def arts_round(run: Run) -> None:
    cfg, ledger, analyst = run.cfg, run.ledger, run.agents.analyst
    run.phase("plan")
    plan_once(ledger, analyst, run.task.statement, run.seeds.plan())
    before = hypotheses.novelty(ledger)
    followed = follow_ups(run)
    run.phase("propose")
    proposed, ok = propose_admissible(run)
    if not any(ok) and not followed:
        return
    picks = pick(run, proposed, ok) if any(ok) else []
    ahead = attribution_ahead(run, followed)
    nodes = followed + run_group(run, proposed, picks, register=True, ahead=ahead)
    decisions, flawed = analyse(run, nodes, ahead)
    tested = hypotheses.tested(run.state, [n.id for n in nodes] + list(decisions))  # a stall's too
    exploit = hypotheses.Exploit(
        ledger, run.round, cfg.space.cooldown, cfg.components.observations, cfg.components.memory,
        follow_ups=cfg.attribution.follow_ups > 0,
    )  # fmt: skip
    exploit(tested, flawed, decisions)
    if cfg.space.stop_when_stale and nodes and hypotheses.novelty(ledger) == before:
        run.meter.halt("the round added no new hypothesis, observation or direction")


def attribution_ahead(run: Run, followed: list[Node]) -> Ahead | None:
    """Attribution that may start while the round's experiments evaluate (`failures.Ahead`): where they
    run at once and the analyst shares the executor's model, whose batches its calls can join."""
    cfg, analyst = run.cfg, run.agents.analyst
    if analyst is None or not cfg.components.attribution or cfg.attribution.mode == "reflection":
        return None
    if run.agents.scientist_backend is not run.agents.executor_backend:
        return None
    return Ahead(run.ledger, analyst, cfg.attribution, run.seeds.round(run.round), followed)


def analyse(run: Run, nodes: list[Node], ahead: Ahead | None = None) -> tuple[dict[int, Decision], set[int]]:
    """Attribution and comparison of the round's nodes: (decisions, hypotheses called flawed). Neither
    reads the other's answer, so their calls (and the judge beside the causes) are asked at once
    (`analysis_at_once`); which nodes each covers is settled first (a stall's plateau for both), and the
    attributions `ahead` made while the experiments ran are not asked again."""
    cfg, ledger, analyst, seed = run.cfg, run.ledger, run.agents.analyst, run.seeds.round(run.round)
    if analyst is None:
        return {}, set()
    work = todo(run.state, nodes, cfg.attribution) if cfg.components.attribution else None
    plateau = work.plateau if work is not None else []
    tested = hypotheses.tested(run.state, [n.id for n in nodes + plateau])
    on, compare = cfg.components.observations, cfg.components.comparison and bool(tested)
    steps = (["attribute"] if work is not None else []) + (["compare"] if compare else [])
    run.phase(" + ".join(steps) or "analyse")
    with analysis_at_once(run) as together:
        jobs = []
        if work is not None:
            attribution = cfg.attribution
            jobs.append(
                lambda: attribute_round(ledger, analyst, work, attribution, run.round, seed, together, ahead)
            )
        if compare:
            jobs.append(lambda: observations.compare(ledger, analyst, tested, run.round, seed, on))
        results = together(jobs)
    decisions = results.pop(0) if work is not None else {}
    flawed = results.pop(0) if compare else set()
    if decisions:
        run.log(routes_line(run.round, decisions))
    if compare and on and cfg.attribution.follow_ups:
        schedule_probes(run)
    return decisions, flawed


def follow_ups(run: Run) -> list[Node]:
    """The experiments earlier decisions scheduled (`investigation.followups`), before any proposal."""
    nodes = []
    for _ in range(run.cfg.attribution.follow_ups):
        if run.stop_reason(within_round=True) or (item := followups.take(run.ledger)) is None:
            break
        item = followups.as_run(item, run.state, run.ledger)
        run.phase(f"follow up: {item.step} of node {item.node}")
        if item.step == "probe":
            probed = run_probe(run, item.text)
            run.ledger.event(
                "follow_up", **item.model_dump(), ran=run.round, result=probed[0].id if probed else None
            )
            nodes += probed
            continue
        node = remeasure(run, item) if item.step == "remeasure" else follow(run, item)
        run.ledger.event("follow_up", **item.model_dump(), ran=run.round, result=node.id if node else None)
        if node is not None:
            run.log(f"round {run.round}: {item.step} of node {item.node} ({item.decision}) -> node {node.id}")
            nodes.append(node)
    return [n for n in nodes if n.follows is not None or n.axis == "probe"]  # a remeasurement is none


def schedule_probes(run: Run) -> None:
    """A comparison's predictions that name a constant of the best program become probes of it."""
    best = run.state.best()
    if not probe_budget(run):
        return
    comparisons = run.ledger.events("comparison")
    result = comparisons[-1].payload.get("result") if comparisons else None
    if best is None or not result or comparisons[-1].payload.get("round") != run.round:
        return
    waiting = {f.text for f in followups.pending(run.state) if f.step == "probe"}
    for prediction in result.get("predictions", []):
        name = probes.named_constant(prediction, best)
        if name is None or name in waiting or probes.probed(run.state, name, best):
            continue
        waiting.add(name)
        item = followups.FollowUp(
            step="probe", decision="prediction", node=best.id, parent=best.id, text=name,
            instructions=prediction[:200], round=run.round,
        )  # fmt: skip
        followups.schedule(run.ledger, item)


def follow(run: Run, item: followups.FollowUp) -> Node | None:
    """A repair or a refinement: the hypothesis again from `item.parent`, with the fix as instructions."""
    state = run.state
    parent, h = state.nodes.get(item.parent), state.hypotheses.get(item.hypothesis)
    if parent is None or h is None or h.archived:
        return None
    if (moved := space.work(h, run.round)) is not None:  # a refinement's child enters the working set
        h = run.ledger.update(moved)
    node = run.lab.expand(parent, item.text, item.axis, instructions=item.instructions, follows=item.node)
    found = run.lab.findings.pop(node.id, None)
    observations.after_node(
        run.ledger, node, h, run.metric, run.round, run.cfg.components.observations, found
    )
    return node


def remeasure(run: Run, item: followups.FollowUp) -> Node | None:
    """A doubted measurement checked by repeating it: disagreeing, the node keeps the worse score."""
    node = run.state.nodes.get(item.node)
    if node is None or node.status != "valid" or node.score is None or node.raw_score is None:
        return None
    res = run.lab.remeasure(node)
    first = node.raw_score
    stable = res.valid and res.score is not None and followups.agree(res.score, first)
    if not res.valid:
        node.status = "invalid"
        node.reason = f"measurement not reproduced: evaluated again, it failed ({res.reason[:120]})"
    elif not stable and run.task.normalise(res.score) < node.score:
        node.raw_score, node.score = res.score, run.task.normalise(res.score)
    if not stable:
        node.reason = (
            node.reason or f"measurement unstable: {first:.6g}, then {res.score:.6g}; the worse kept"
        )
        run.ledger.update(node)
    run.ledger.event("remeasure", round=run.round, node=node.id, first=first, second=res.score, stable=stable)
    return node


def propose_admissible(run: Run) -> tuple[Proposed, list[bool]]:
    """A proposal and which of its candidates may be drawn; when none may (after a pivot, or every
    candidate the prompt's example), asked again (bounded, without an example) until one may."""
    proposed = propose(run, investigate=True)
    ok = admissible(run, proposed)
    for attempt in range(1, run.cfg.attribution.pivot_retries + 1):
        if any(ok) or not proposed.candidates:
            break
        run.ledger.event(
            "indistinct",
            round=run.round,
            attempt=attempt,
            candidates=[c.model_dump() for c in proposed.candidates],
        )
        proposed = propose(run, attempt=attempt, investigate=True)
        ok = admissible(run, proposed)
    return proposed, ok


def admissible(run: Run, proposed: Proposed) -> list[bool]:
    """Which candidates may be drawn: distinct from the abandoned directions and not a copy of another
    candidate or of the prompt's example (`hypotheses.copies`)."""
    threshold = run.cfg.attribution.distinct_threshold
    ok = hypotheses.admissible(run.state, proposed.candidates, run.round, threshold)
    copied = hypotheses.copies(proposed.candidates, proposed.example)
    return [keep and not copy for keep, copy in zip(ok, copied)]


def pick(run: Run, proposed: Proposed, ok: list[bool]) -> list[tuple[int, float, bool]]:
    """The N actions of the round: (candidate index, probability, from the tail)."""
    cfg, cands = run.cfg, proposed.candidates
    if cfg.components.verbalized:  # only admissible candidates can be drawn
        idx = [i for i, keep in enumerate(ok) if keep]
        weights = hypotheses.selection_weights(
            run.state, [cands[i] for i in idx], cfg.space.cite_boost, cfg.components.observations
        )
        threshold = cfg.scientist.tail_threshold if proposed.tail else None
        draws = draw(weights, cfg.group, run.rng, tail_threshold=threshold)
        picks = [(idx[d.index], d.probability, d.tail) for d in draws]
    else:  # ablation: the top admissible candidate for every action
        top = max((i for i in range(len(cands)) if ok[i]), key=lambda i: cands[i].probability)
        picks = [(top, cands[top].probability, False)] * cfg.group
    run.ledger.event(
        "draw", round=run.round, drawn=[list(p) for p in picks], candidates=[c.model_dump() for c in cands]
    )
    run.log(drawn_line(run.round, [(cands[i], p) for i, p, _ in picks]))
    run.said("; ".join(cands[i].hypothesis for i, _, _ in picks))
    return picks
