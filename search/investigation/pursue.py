"""Experiments the investigation asks for, run before a round's proposals or beside them.

- `follow_ups`: the repairs, refinements and remeasurements earlier decisions scheduled
  (`followups`), and the probes a comparison's predictions named (`schedule_probes`);
- `follow`: a repair or refinement, the hypothesis again from a parent with the fix as instructions; a
  local refinement of an edit that moved a numeric constant beyond its value menu (or introduced one) is
  first a line search back along it (`smaller_steps`, `investigation.steps`), which needs no model. The
  line search is the local route's evidence: a value that beats the parent confirms it (and is the
  recovery); every value tried and none paying refutes "a step too far", and the route becomes a pivot
  (`refuted`: the hypothesis archived, its direction given up, a routing event that says why);
- `remeasure`: a doubted measurement repeated (disagreeing, the worse score is kept);
- `run_probe`: the score's response to one constant of the best program (`probes`), the harness's own
  observation, within `space.probe_share` of the budget (`probe_budget`).
Each experiment goes through the lab; what it showed is written through the ledger.
"""

from __future__ import annotations

from arts.policy.analysis_answers import Cause
from arts.search.context import Run
from arts.search.investigation import followups, hypotheses, observations, probes, space, steps
from arts.search.investigation.attribution import Decision
from arts.search.state import Node

PROBE_EVALS = 2
"""Evaluations one probe may spend: its constant's low and high variant (`probes.variants`)."""


def follow_ups(run: Run) -> list[Node]:
    """The experiments earlier decisions scheduled (`investigation.followups`), before any proposal."""
    nodes = []
    for _ in range(run.cfg.attribution.follow_ups):
        if run.stop_reason(within_round=True) or (item := followups.take(run.ledger)) is None:
            break
        metric = run.task.config.metric
        item = followups.as_run(item, run.state, run.ledger, bool(metric and metric.deterministic))
        run.phase(f"follow up: {item.step} of node {item.node}")
        if item.step == "probe":
            probed = run_probe(run, item.text)
            run.ledger.event(
                "follow_up", **item.model_dump(), ran=run.round, result=probed[0].id if probed else None
            )
            nodes += probed
            continue
        if item.step == "remeasure":
            done = [n] if (n := remeasure(run, item)) is not None else []
        else:
            done = follow(run, item)
        result = done[-1].id if done else None  # the last tried: a line search stops at one that pays
        run.ledger.event("follow_up", **item.model_dump(), ran=run.round, result=result)
        if done:
            run.log(f"round {run.round}: {item.step} of node {item.node} ({item.decision}) -> node {result}")
            nodes += done
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


def follow(run: Run, item: followups.FollowUp) -> list[Node]:
    """A repair or a refinement: the hypothesis again from `item.parent`, with the fix as instructions (a
    local refinement: its smaller steps first, `smaller_steps`; the executor when there are none)."""
    state = run.state
    parent, h = state.nodes.get(item.parent), state.hypotheses.get(item.hypothesis)
    if parent is None or h is None or h.archived:
        return []
    if (moved := space.work(h, run.round)) is not None:  # a refinement's child enters the working set
        h = run.ledger.update(moved)
    done = smaller_steps(run, item) if item.decision == "refine_local" else []
    if not done:
        start = state.nodes.get(item.start) if item.start is not None else None
        done = [
            run.lab.expand(
                parent, item.text, item.axis, instructions=item.instructions, follows=item.node, start=start
            )
        ]
    for node in done:
        found = run.lab.findings.pop(node.id, None)
        observations.after_node(
            run.ledger, node, h, run.metric, run.round, run.cfg.components.observations, found
        )
    return done


def smaller_steps(run: Run, item: followups.FollowUp) -> list[Node]:
    """A local refinement's line search back along the constant the failed edit moved (`steps`): each
    value a node that follows the failed one, from its parent, until one beats that parent (each edit shown
    to later executors among the tried edits). None when the failed node was no worse than its parent (the
    refinement starts from it) or moved no number beyond its value menu."""
    state = run.state
    failed, parent = state.nodes.get(item.node), state.nodes.get(item.parent)
    if failed is None or parent is None or failed.parent != parent.id:
        return []
    nodes, planned = [], steps.smaller_steps(failed, parent)

    def beats(n: Node) -> bool:
        return n.status == "valid" and None not in (n.score, parent.score) and n.score > parent.score

    for name, value in planned:
        files = probes.program(failed, name, value)
        known = run.lab.known_node(files) if files is not None else None
        if known is not None and beats(known):
            return nodes  # that value ran before and paid: no verdict against the step
        if files is None or known is not None:
            continue
        if run.stop_reason(within_round=True):
            return nodes  # cut short: no verdict on the step
        action = {"name": name, "op": "set_constant", "value": value}

        def edit(node: Node, workdir, files=files, action=action) -> Node:
            res = run.lab.evaluate(files, workdir)
            node.files = files
            node.transcript = [
                {"action": action, "op": "smaller_step", "applied": True, "valid": res.valid,
                 "score": res.score if res.valid else None}
            ]  # fmt: skip
            return run.lab.score(node, res)

        node = run.lab.expand(
            parent, item.text, item.axis, edit=edit, instructions=item.instructions, follows=item.node
        )
        nodes.append(node)
        if beats(node):
            return nodes
    if nodes:
        refuted(run, item, planned[0][0], nodes)
    return nodes


def refuted(run: Run, item: followups.FollowUp, name: str, tried: list[Node]) -> None:
    """The line search along `name` ran every value and none beat the parent: the failed step was not too
    far, the idea does not pay along its own knob, so the attribution's local route becomes a pivot. A
    second routing event for the failed node records it (with the values and their scores), and the
    refined hypothesis is archived as a pivot archives (`hypotheses.Exploit.route`), with the one it
    refined: its direction is given up, so the next proposals leave the axis."""
    state, cfg = run.state, run.cfg
    h = state.hypotheses.get(item.hypothesis) if item.hypothesis is not None else None
    if h is None:
        return
    seen = [[probes.constants(n).get(name), n.score if n.status == "valid" else None] for n in tried]
    shown = ", ".join(f"{v:g}" for v, _ in seen if v is not None)
    cause = Cause(
        cause=f"the idea does not pay along {name}: no value of a line search beat the parent"[:120],
        evidence=f"{name} at {shown}: none beat node {item.parent}"[:120],
        category="method", severity="fatal", fix="leave this axis for another"
    )  # fmt: skip
    decision = Decision(action="pivot", routed="pivot", clamped=False, cause=cause, index=0, score=1.0)
    run.ledger.event(
        "routing", round=run.round, node=item.node, ahead=False, ok=True, decision=decision.model_dump(),
        verified={"by": "line search", "constant": name, "tried": seen, "paid": False, "was": item.decision},
    )  # fmt: skip
    exploit = hypotheses.Exploit(
        run.ledger, run.round, cfg.space.cooldown, cfg.components.observations, cfg.components.memory
    )
    exploit.route(h, decision, item.node)
    if h.parent is not None and (origin := state.hypotheses.get(h.parent)) is not None:
        exploit.commit(space.archive(origin, run.round), "archived", origin)
    run.log(f"round {run.round}: no value of {name} beat node {item.parent}: node {item.node} → pivot")


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


def probe_budget(run: Run) -> bool:
    """Whether one more probe (up to `PROBE_EVALS` evaluations) fits in `space.probe_share` of the budget."""
    spent = sum(n.axis == "probe" and n.status in ("valid", "invalid") for n in run.state.nodes.values())
    return spent + PROBE_EVALS <= run.cfg.space.probe_share * run.cfg.budget.evals


def run_probe(run: Run, name: str) -> list[Node]:
    """Measure how the score responds to constant `name` of the best program (`investigation.probes`):
    the variants the run has not measured yet become nodes; the observation is the harness's."""
    best = run.state.best()
    if best is None:
        return []
    measured, nodes = {}, []
    for side, value in probes.variants(best, name):
        files = probes.program(best, name, value)
        if files is None:
            continue
        seen = run.lab.known_node(files)
        raw = seen.raw_score if seen is not None and seen.status in ("valid", "seed") else None
        if seen is None:
            if run.stop_reason(within_round=True):
                break
            action = {"name": name, "op": "set_constant", "value": value}

            def edit(node: Node, workdir, files=files, action=action) -> Node:
                node.files, node.transcript = files, [{"action": action, "applied": True}]
                return run.lab.score(node, run.lab.evaluate(files, workdir))

            node = run.lab.expand(best, f"probe {name}: {value}", "probe", edit=edit)
            nodes.append(node)
            raw = node.raw_score if node.status == "valid" else None
        measured[side] = (value, raw)
    probes.record(run.ledger, best, name, measured, run.metric, run.round)
    run.log(f"round {run.round}: probe of {name} on node {best.id}: {len(nodes)} evaluation(s)")
    return nodes
