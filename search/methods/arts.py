"""The arts round, as the design states it: plan, follow up, propose, draw, execute, attribute and compare,
exploit, reward and update, stop.

Each line of `arts_round` is one step; the steps live in `proposals` (propose, execute), in
`search.investigation` (follow-ups and probes in `pursue`; the spaces, attribution, comparison) and in
`search.learning` (test-time training: reward, update, the adapter in force). Verbalized sampling: the scientist states a
probability for each of K candidates and an external sampler draws N of the admissible ones by them
(weights shared per region, cited open evidence favoured), from the tail past `scientist.tail_depth`.
"""

from __future__ import annotations

from arts.policy.edits.moves import directed_target
from arts.policy.sampler import draw
from arts.search.console import drawn_line, routes_line
from arts.search.context import Run
from arts.search.investigation import followups, hypotheses, observations, probes, pursue, signals
from arts.search.investigation.attribution import Decision
from arts.search.investigation.failures import Ahead, attribute_round, todo
from arts.search.investigation.plan import plan_once
from arts.search.methods.base import method
from arts.search.methods.proposals import Proposed, propose, run_group, scored_schema
from arts.search.state import Node
from arts.training.tilt import move_log_ratios, tilted


@method("arts", makes_groups=True, registers_hypotheses=True)
def arts_round(run: Run) -> None:
    cfg, ledger, analyst = run.cfg, run.ledger, run.agents.analyst
    run.phase("plan")
    plan_once(ledger, analyst, run.task.statement, run.seeds.plan())
    before = hypotheses.novelty(ledger)
    followed = pursue.follow_ups(run)  # the repairs, refinements and probes earlier rounds scheduled
    run.phase("propose")
    proposed, ok = propose_admissible(run)
    if not any(ok) and not followed:
        return
    picks = pick(run, proposed, ok) if any(ok) else []  # draw N by the stated probabilities
    ahead = attribution_ahead(run, followed)
    rollouts, nodes = run_group(run, proposed, picks, register=True, ahead=ahead)  # execute
    nodes = followed + nodes
    settle(run, nodes, ahead)  # attribute, compare, then keep, refine or set aside each hypothesis
    if (learning := run.learning) is not None:  # test-time training
        run.phase("update")
        learning.sampled(rollouts)  # the drawn actions' log-probs under the adapter that sampled them
        learning.reward(run.round)  # each finished group against the scores before it
        learning.update(run.round)  # every M rounds, GRPO on the groups since; later rounds sample from it
    if cfg.space.stop_when_stale and nodes and hypotheses.novelty(ledger) == before:
        run.meter.halt("the round added no new hypothesis, observation or direction")


def settle(run: Run, nodes: list[Node], ahead: Ahead | None = None) -> dict[int, Decision]:
    """What the round's experiments mean: failures attributed and outcomes compared with the predictions
    (`analyse`), then each tested hypothesis kept, refined or set aside, and the decisions' follow-ups
    scheduled for the next round (`hypotheses.Exploit`). The routed decisions, by node id."""
    cfg = run.cfg
    decisions, flawed = analyse(run, nodes, ahead)
    tested = hypotheses.tested(run.state, [n.id for n in nodes] + list(decisions))  # a stall's too
    exploit = hypotheses.Exploit(
        run.ledger, run.round, cfg.space.cooldown, cfg.components.observations, cfg.components.memory,
        follow_ups=cfg.attribution.follow_ups > 0,
    )  # fmt: skip
    exploit(tested, flawed, decisions)
    return decisions


def exact(run: Run) -> bool:
    """Whether the evaluator is known to be deterministic: declared by the task, or every remeasurement so
    far reproduced its score (`followups.reproducible`)."""
    metric = run.task.config.metric
    return followups.reproducible(run.ledger, bool(metric and metric.deterministic))


def ran_a_step(run: Run, hypothesis: int) -> bool:
    """Whether the hypothesis's last experiment changed only numbers of its parent's program and ran valid:
    a comparison's `flawed` verdict on it would spend an evaluation carrying the same step out again (on
    probe runs, 24 of 27 retests in 25 runs were knob steps that had run)."""
    h = run.state.hypotheses.get(hypothesis)
    last = run.state.nodes.get(h.nodes[-1]) if h is not None and h.nodes else None
    if last is None or last.status != "valid" or last.parent is None:
        return False
    return signals.measure(run.state, last, run.ledger.store.node_dir(last.id), True).edit == "numbers"


def attribution_ahead(run: Run, followed: list[Node]) -> Ahead | None:
    """Attribution that may start while the round's experiments evaluate (`failures.Ahead`): where they
    run at once and the analyst shares the executor's model, whose batches its calls can join."""
    cfg, analyst = run.cfg, run.agents.analyst
    if analyst is None or not cfg.components.attribution or cfg.attribution.mode == "reflection":
        return None
    if run.agents.scientist_backend is not run.agents.executor_backend:
        return None
    return Ahead(run.ledger, analyst, cfg.attribution, run.seeds.round(run.round), followed, exact(run))


def analyse(run: Run, nodes: list[Node], ahead: Ahead | None = None) -> tuple[dict[int, Decision], set[int]]:
    """Attribution and comparison of the round's nodes: (decisions, hypotheses called flawed). Neither
    reads the other's answer, so their calls (and the judge beside the causes) are asked at once
    (`search.batching`); which nodes each covers is settled first (a stall's plateau for both), and the
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
    with run.agents.batching.together(run.agents.scientist_backend) as together:
        jobs = []
        if work is not None:
            attribution = cfg.attribution
            jobs.append(
                lambda: attribute_round(
                    ledger, analyst, work, attribution, run.round, seed, together, ahead, exact(run)
                )
            )
        if compare:
            jobs.append(lambda: observations.compare(ledger, analyst, tested, run.round, seed, on))
        results = together(jobs)
    if batches := run.agents.batching.batches:
        run.ledger.event("overlap", round=run.round, step="analysis", batches=batches)
    decisions = results.pop(0) if work is not None else {}
    flawed = results.pop(0) if compare else set()
    if flawed and exact(run):  # a step that ran, measured exactly, is neither a bug nor a broken protocol
        flawed = {h for h in flawed if not ran_a_step(run, h)}
    if decisions:
        run.log(routes_line(run.round, decisions))
    if compare and on and cfg.attribution.follow_ups:
        pursue.schedule_probes(run)
    return decisions, flawed


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
    """Which candidates may be drawn: distinct from the abandoned directions, not a copy of another
    candidate of its list or of the prompt's example (`hypotheses.copies`), and not a probe of a constant
    already probed on the best program, which would measure nothing new (`probes.probed`: a round of such
    draws spends no evaluation, and three in a row end the run). Lists are independent samples: one list
    repeating another is what the policy said twice, not a copy."""
    threshold = run.cfg.attribution.distinct_threshold
    ok = hypotheses.admissible(run.state, proposed.candidates, run.round, threshold)
    copied = [c for p in proposed.lists for c in hypotheses.copies(p.candidates, proposed.example)]
    best = run.state.best()
    repeated = [
        best is not None and (found := directed_target(c.hypothesis)) is not None and found[0] == "probe"
        and probes.probed(run.state, found[1], best)
        for c in proposed.candidates
    ]  # fmt: skip
    return [keep and not copy and not again for keep, copy, again in zip(ok, copied, repeated)]


def pick(run: Run, proposed: Proposed, ok: list[bool]) -> list[tuple[int, float, bool]]:
    """The N actions of the round: (candidate index, probability, from the tail). With N lists
    (`scientist.one_list` off), one drawn from each list that has an admissible candidate."""
    cfg, cands = run.cfg, proposed.candidates
    if cfg.components.verbalized:  # only admissible candidates can be drawn
        threshold = cfg.scientist.tail_threshold if proposed.tail else None
        lists = len(proposed.lists)  # one action from each list; from a single list, N without replacement
        ratios = move_ratios(run, proposed)  # what a trained adapter implies, or None
        picks = []
        for list_idx in range(lists):
            idx = [i for i, keep in enumerate(ok) if keep and (lists == 1 or proposed.list_of(i) == list_idx)]
            weights = hypotheses.selection_weights(
                run.state, [cands[i] for i in idx], cfg.space.cite_boost, cfg.components.observations
            )
            stated = weights
            if ratios is not None:
                weights = tilted(
                    weights, [ratios[i] for i in idx], cfg.scientist.tilt, cfg.scientist.tilt_cap
                )
            n = cfg.group if lists == 1 else 1
            draws = draw(weights, n, run.rng, tail_threshold=threshold, stated=stated) if idx else []
            picks += [(idx[d.index], d.probability, d.tail) for d in draws]
    else:  # ablation: the top admissible candidate for every action
        top = max((i for i in range(len(cands)) if ok[i]), key=lambda i: cands[i].probability)
        picks = [(top, cands[top].probability, False)] * cfg.group
    tilt = {"move_log_ratios": [round(r, 4) for r in ratios]} if cfg.components.verbalized and ratios else {}
    run.ledger.event(
        "draw", round=run.round, drawn=[list(p) for p in picks], candidates=[c.model_dump() for c in cands],
        **tilt,
    )  # fmt: skip
    run.log(drawn_line(run.round, [(cands[i], p) for i, p, _ in picks]))
    run.said("; ".join(cands[i].hypothesis for i, _, _ in picks))
    return picks


def move_ratios(run: Run, proposed: Proposed) -> list[float] | None:
    """Each candidate's log-ratio, the adapter in force over the base, of writing its move
    (`training.tilt`); None when the tilt is off, no trained adapter is in force (none, or TTT's before
    its first update), or the scientist's backend holds no weights here (a served one)."""
    cfg, adapter, backend = run.cfg, run.agents.adapter, run.agents.scientist_backend
    fresh = run.learning is not None and run.learning.trainer.k == 0 and not cfg.scientist.adapter
    model = getattr(backend, "model", None)
    if not cfg.scientist.tilt or adapter is None or fresh or not hasattr(model, "disable_adapter"):
        return None
    first = proposed.lists[0]
    lists = [(p.completion.token_ids if p.completion else [], p.spans) for p in proposed.lists]
    per_list = move_log_ratios(
        backend, adapter, first.messages, scored_schema(first) or {}, lists, cfg.scientist.temperature
    )
    return [r for p, got in zip(proposed.lists, per_list) for r in (got or [0.0] * len(p.candidates))]
