"""Proposals and their execution, shared by the arts round and the model baselines.

`state_prompt` renders the state within its budget (nodes, memory, the hypothesis map, unexplained
observations, the best program's constants); `propose` asks the scientist for K candidates under the
grammar of the allowed parents, targets and citable observations; `run_group` turns drawn candidates into
rollouts and nodes. Not done here: which candidates are drawn (the arts round), or the hypothesis rules.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from arts.policy.candidates import Candidate
from arts.policy.edits.moves import directed_target
from arts.policy.proposal_schema import canonical_action
from arts.policy.scientist import GENERIC_EXAMPLE, REFINABLE_CHARS, Proposal
from arts.search import assembly, compass
from arts.search.context import Run
from arts.search.investigation import hypotheses, observations, probes
from arts.search.investigation.failures import Ahead
from arts.search.investigation.plan import plan_axes, plan_lines
from arts.search.investigation.pursue import probe_budget, run_probe
from arts.search.investigation.reports import report
from arts.search.investigation.spacemap import render_space
from arts.search.methods import targets as targeting
from arts.search.overlap import default_workers
from arts.search.render import render_state, shown_memory
from arts.search.state import Node, Rollout

_OBS_ID = re.compile(r"\bo(\d+)\b")
REFINABLE_SHARE = 4
"""Hypotheses shown for refinement take at most 1/REFINABLE_SHARE of the spaces' prompt budget
(`space.prompt_tokens`)."""


@dataclass
class Proposed:
    candidates: list[Candidate]
    """Every list's candidates, one after another."""
    proposal: Proposal | None
    """The first list (its prompt and schema are every list's)."""
    tail: bool = False
    example: str | None = None
    """The example hypothesis the prompt showed (a free-hypothesis proposal), if any."""
    lists: list[Proposal] = field(default_factory=list)
    """The verbalized lists sampled from the prompt (one, or one per action of the round)."""

    def source(self, index: int) -> tuple[Proposal, int]:
        """The list candidate `index` came from and its index there."""
        for p in self.lists:
            if index < len(p.candidates):
                return p, index
            index -= len(p.candidates)
        raise IndexError(index)

    def list_of(self, index: int) -> int:
        """Which list candidate `index` came from."""
        sizes = [len(p.candidates) for p in self.lists]
        return next(i for i in range(len(sizes)) if index < sum(sizes[: i + 1]))


def space_prompt(run: Run) -> tuple[str, list[int]]:
    """The rendered spaces and the observation ids they show (the ids a proposal may cite)."""
    if not run.cfg.components.observations:
        return "", []
    state = run.state
    text = render_space(state, run.cfg.space.prompt_tokens, run.agents.count_tokens, round=run.round)
    ids = [int(m) for m in _OBS_ID.findall(text) if int(m) in state.observations]
    if hint := hypotheses.combine_hint(state):
        text = f"{text}\n{hint}" if text else hint
    return text, list(dict.fromkeys(ids))


def state_prompt(run: Run) -> tuple[str, list[int], list[int]]:
    """The rendered state, the node ids it shows (allowed parents) and the observation ids (citable)."""
    summary = f"{run.task.name}: {run.task.statement.strip()}"
    if plan := plan_lines(run.state.meta):
        summary = f"{plan}\n{summary}"
    render = (
        run.cfg.render
        if run.cfg.components.memory
        else run.cfg.render.model_copy(update={"memory_entries": 0})
    )
    text, ids = render_state(run.state, summary, render, run.agents.count_tokens)
    spaces, obs = space_prompt(run)
    if spaces:
        text += f"\n\n{spaces}"
    best = run.state.best()
    if best is not None and (k := targeting.knobs(best)):
        text += f"\n\n## Constants in node {best.id}\n{k}"
    return text, ids, obs


def inspect_nodes(run: Run, state: str) -> str:
    """The scientist names recent nodes to inspect (their reports join the proposal prompt) and memory
    entries to drop (they stay in the store, inactive)."""
    nodes = run.state.nodes
    recent = [i for i in sorted(nodes, reverse=True) if nodes[i].parent is not None][
        : run.cfg.render.inspect_recent
    ]
    if not recent:  # nothing but the seed yet: its code is already in the audit
        return ""
    t0 = time.time()
    memory = shown_memory(run.state, run.cfg.render) if run.cfg.components.memory else []
    chosen, forget, _ = run.agents.scientist.choose_inspect(state, recent, memory, run.seeds.round(run.round))
    for mid in forget:
        entry = run.state.insights[mid].model_copy(update={"active": False})
        run.ledger.update(entry)
        run.ledger.event("memory_drop", round=run.round, insight=mid, text=entry.text)
    notes = [report(run.state, nodes[nid], run.lab.node_dir(nid)) for nid in chosen]
    run.ledger.event("inspect_round", round=run.round, nodes=chosen, seconds=time.time() - t0)
    return "\n\n".join(notes)


def propose(
    run: Run, parents: list[int] | None = None, attempt: int = 0, investigate: bool = False
) -> Proposed:
    """K candidates from the scientist. `investigate` (the arts round): inspect nodes first and ask for
    tail candidates past `scientist.tail_depth`."""
    cfg = run.cfg
    if not cfg.scientist.directed:
        moves = {}
    elif run.task.config.kind == "answer":  # a diagnosis: suspects named in each part's material
        moves = assembly.suspects(run.task, list(run.state.nodes.values()))
    else:
        moves = targeting.targets(run.state, run.lab.known_programs())
    if moves is None:  # measured on friedman: 70 rounds of refused DEGREE moves, an hour, no evaluation
        run.meter.halt(
            "every value on the menus of the best program's constants has been evaluated: nothing is left"
            " to try (`--profile capable` or `--set scientist.directed=false` frees the hypotheses)"
        )
        return Proposed([], None)
    if moves and (gone := hypotheses.abandoned(run.state)):  # a pivot: propose from elsewhere
        moves = hypotheses.open_moves(moves, gone) or moves
    if moves and investigate and probe_budget(run):  # observation search: constants not yet probed
        seen = run.state.meta.get(probes.KEY, {})
        best = run.state.best()
        probeable = set(probes.constants(best)) - set(seen) if best else set()  # not a keyword's
        moves = {n: (*v, "probe") if n in probeable else v for n, v in moves.items()}
    offered = moves  # before the poll: what `ttt.grpo.learn_forced` scores a forced direction against
    if moves and cfg.scientist.poll and (back := compass.held(run.state, run.task.normalise)):
        moves = {n: tuple(v for v in vs if f"{v} {n}" not in back) or vs for n, vs in moves.items()}
        run.ledger.event("poll", round=run.round, held=sorted(back))
    state, shown, obs = state_prompt(run)
    optimize = run.task.config.kind == "optimize"
    k = cfg.scientist.parents
    allowed = parents or targeting.parent_ids(run.state, shown, k, optimize)
    extra = inspect_nodes(run, state) if investigate and cfg.scientist.inspect and attempt == 0 else ""
    depth = max((run.state.nodes[i].depth for i in allowed), default=0)
    tail = investigate and depth >= cfg.scientist.tail_depth
    prompt = f"{state}\n\n## Inspected\n{extra[: cfg.render.inspected_chars]}" if extra else state
    lists = cfg.group if investigate and not cfg.scientist.one_list and cfg.components.verbalized else 1
    props = run.agents.scientist.propose_lists(
        prompt,
        allowed,
        tail=tail,
        n=lists,
        seed=run.seeds.proposal(run.round, attempt),
        example=(example := "" if moves or attempt else targeting.example(run.state, run.rng)),
        observation_ids=obs or None,
        targets=moves or None,
        refinable=refinable(run),
        plan_axes=plan_axes(run.state.meta),
        open_targets=offered if cfg.ttt.grpo.learn_forced else None,
    )
    for prop in props:
        if not prop.candidates:
            error = prop.completion.error if prop.completion else ""
            run.ledger.event("proposal_failed", round=run.round, error=error)
            run.log(f"round {run.round}: unusable proposal ({error or 'no answer'})")
    cands = [c for prop in props for c in prop.candidates]
    return Proposed(cands, props[0], tail, GENERIC_EXAMPLE if example is None else example or None, props)


def refinable(run: Run) -> dict[int, str]:
    """The hypotheses a free proposal shows for refinement (`scientist.refines` of them, newest first),
    while they fit in their share of the spaces' prompt budget (`REFINABLE_SHARE`)."""
    budget, shown = run.cfg.space.prompt_tokens // REFINABLE_SHARE, {}
    for hid, text in hypotheses.refinable(run.state, run.cfg.scientist.refines).items():
        budget -= run.agents.count_tokens(f"- h{hid}: {text[:REFINABLE_CHARS]}") + 1
        if budget < 0:
            break
        shown[hid] = text
    return shown


def run_group(
    run: Run,
    proposed: Proposed,
    picks: list[tuple[int, float, bool]],
    register: bool,
    ahead: Ahead | None = None,
) -> tuple[list[Rollout], list[Node]]:
    """Execute the drawn candidates: (the rollouts, one per drawn action, and the nodes they made). Each
    action becomes a rollout and a node, and (with `register`) a working hypothesis with the evidence its
    node produced; a probe's action becomes its variants' nodes (`investigation.pursue.run_probe`). With
    more than one worker (`SearchConfig.workers`) the experiments run at once (`search.batching`), as
    many as evaluations are left, and `ahead` starts the round's attribution as soon as its nodes are
    settled; a probe runs first, on its own."""
    rollouts: list[Rollout] = []
    nodes: list[Node] = []
    cands = proposed.candidates
    workers = run_workers(run)
    first: dict[str, Rollout] = {}  # an action drawn again (from another list) is run once
    waiting: list[tuple[Node, Node, Rollout, object]] = []  # begun, run at once below
    for i, (idx, prob, _tail) in enumerate(picks, 1):
        if run.stop_reason(within_round=True) or (waiting and len(waiting) >= evals_left(run)):
            break
        run.phase(f"execute {i}/{len(picks)}")
        c, (prop, j) = cands[idx], proposed.source(idx)
        probe = directed_target(c.hypothesis)
        probe = probe[1] if probe and probe[0] == "probe" else None
        rollout = run.ledger.add(
            Rollout(
                round=run.round,
                group=run.round,
                prompt=prop.messages,
                candidates=[x.model_dump() for x in prop.candidates],
                drawn=j,
                probability=min(max(prob, 0.0), 1.0),
                action=canonical_action(c),
                json_schema=scored_schema(prop),
                tokens=list(prop.completion.token_ids) if prop.spans else [],
                span=list(prop.spans[j]) if prop.spans else [],
            )
        )
        rollouts.append(rollout)
        if rollout.action in first:  # its outcome is the first draw's (`link_repeats`)
            continue
        first[rollout.action] = rollout
        if probe is not None:  # an observation sought: measured, not registered as a hypothesis
            probed = run_probe(run, probe)
            if probed:
                rollout.node = probed[0].id
                run.ledger.update(rollout)
            nodes += probed
            continue
        lineage = c.refines if c.refines in run.state.hypotheses else None  # as the scientist named it
        h = hypotheses.register(run.ledger, c, run.round, lineage) if register else None
        note = hypotheses.lineage_note(run.state, lineage)
        parent = run.state.nodes[c.parent]
        if workers > 1:
            waiting.append((run.lab.begin(parent, c.hypothesis, c.axis, rollout, note), parent, rollout, h))
            continue
        node = run.lab.expand(parent, c.hypothesis, c.axis, rollout, instructions=note)
        nodes.append(after(run, node, h))
    if waiting:
        nodes += run_at_once(run, waiting, workers, nodes, ahead)
    link_repeats(run, rollouts, first)
    return rollouts, nodes


def scored_schema(prop: Proposal) -> dict | None:
    """The grammar an action of `prop` is trained, tilted and watched under: the one that sampled it, or,
    where `propose` asked for it (`ttt.grpo.learn_forced`), the list's grammar with every move open at
    every candidate, so that a target or direction the harness forced is scored as the scientist's choice
    (under the grammar that sampled it, its tokens have probability 1 and carry no gradient)."""
    return prop.open_schema or prop.json_schema


def link_repeats(run: Run, rollouts: list[Rollout], first: dict[str, Rollout]) -> None:
    """An action drawn from several lists ran once: each repeat gets the first draw's node, so GRPO sees
    every draw (a likelier action counts as often as it was drawn) with the outcome the action had."""
    for r in rollouts:
        if r.node is None and (f := first.get(r.action)) is not r and f is not None and f.node is not None:
            r.node = f.node
            run.ledger.update(r)


def run_at_once(
    run: Run, waiting: list[tuple[Node, Node, Rollout, object]], workers: int, settled: list[Node], ahead
) -> list[Node]:
    """The begun experiments finished at once: executor calls batched, evaluations on `workers` workers;
    `ahead` attributes each node as it commits (its calls join the batch)."""
    run.phase(f"execute {len(waiting)} at once")
    same = [(directed_target(w[0].hypothesis) or w[0].hypothesis, w[1].id) for w in waiting]  # move, parent
    shares = [(same[:i].count(key), same.count(key)) for i, key in enumerate(same)]
    if ahead is not None:
        ahead.expect(settled + [w[0] for w in waiting])
    batching = run.agents.batching
    with batching.together(run.agents.executor_backend, workers) as together:

        def job(w, s) -> Node:
            node = run.lab.finish(w[0], w[1], w[2], share=s)
            if ahead is not None:
                ahead.commit(together)
            return node

        done = together([lambda w=w, s=s: job(w, s) for w, s in zip(waiting, shares)])
    if batching.batches:
        run.ledger.event("overlap", round=run.round, workers=workers, batches=batching.batches)
    return [after(run, node, w[3]) for node, w in zip(done, waiting, strict=True)]


def after(run: Run, node: Node, h) -> Node:
    """What an experiment's node means for its working hypothesis (none: nothing)."""
    if h is not None:
        found = run.lab.findings.pop(node.id, None)
        observations.after_node(
            run.ledger, node, h, run.metric, run.round, run.cfg.components.observations, found
        )
    return node


def run_workers(run: Run) -> int:
    """How many experiments of a round run at once: `workers` when set; else the cores available where
    the executor's backend decodes several prompts together (`generate_each`), one where it cannot or
    where the task is answered by an investigator (its tools run in this process)."""
    if run.task.config.kind != "optimize":
        return 1
    if run.cfg.workers is not None:
        return run.cfg.workers
    if run.cfg.evaluate_on == "ray":  # the cluster's cores
        from arts.search.remote import ray_module

        return max(int(ray_module().cluster_resources().get("CPU", 1)), 1)
    backend = run.agents.executor_backend
    return default_workers() if backend is not None and hasattr(backend, "generate_each") else 1


def evals_left(run: Run) -> int:
    return max(run.meter.budget.evals - run.meter.evals, 0)
