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
from arts.search.investigation import hypotheses, observations
from arts.search.investigation.failures import attribute_round
from arts.search.investigation.plan import plan_once
from arts.search.methods.base import method
from arts.search.methods.proposals import Proposed, propose, run_group


@method("arts", makes_groups=True, registers_hypotheses=True)
def arts_round(run: Run) -> None:
    cfg, ledger, analyst = run.cfg, run.ledger, run.agents.analyst
    run.phase("plan")
    plan_once(ledger, analyst, run.task.statement, run.seeds.plan())
    before = hypotheses.novelty(ledger)
    run.phase("propose")
    proposed, ok = propose_admissible(run)
    if not any(ok):
        return
    picks = pick(run, proposed, ok)
    nodes = run_group(run, proposed, picks, register=True)
    tested = hypotheses.tested(run.state, [n.id for n in nodes])
    decisions, flawed = {}, set()
    if cfg.components.attribution and analyst:
        run.phase("attribute")
        decisions = attribute_round(
            ledger, analyst, nodes, cfg.attribution, run.round, run.seeds.round(run.round)
        )
        if decisions:
            run.log(routes_line(run.round, decisions))
    if cfg.components.comparison and analyst and tested:
        run.phase("compare")
        on = cfg.components.observations
        flawed = observations.compare(ledger, analyst, tested, run.round, run.seeds.round(run.round), on)
    exploit = hypotheses.Exploit(
        ledger, run.round, cfg.space.cooldown, cfg.components.observations, cfg.components.memory
    )
    exploit(tested, flawed, decisions)
    if cfg.space.stop_when_stale and nodes and hypotheses.novelty(ledger) == before:
        run.meter.halt("the round added no new hypothesis, observation or direction")


def propose_admissible(run: Run) -> tuple[Proposed, list[bool]]:
    """A proposal and which of its candidates may be drawn; after a pivot, asked again (bounded) until
    some candidate is distinct from the abandoned directions."""
    threshold = run.cfg.attribution.distinct_threshold
    proposed = propose(run, investigate=True)
    ok = hypotheses.admissible(run.state, proposed.candidates, run.round, threshold)
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
        ok = hypotheses.admissible(run.state, proposed.candidates, run.round, threshold)
    return proposed, ok


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
