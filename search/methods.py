"""Search methods: how one round chooses its actions. All share the loop, the executor and the sandbox.

- `arts`: inspect → K verbalized candidates → the sampler draws N → execute each → attribute failures →
  compare the tested hypotheses → keep, refine or set aside (the investigation steps are `search.dual`).
- `greedy` (AIDE-like): a few drafts from the root, then debug a failed leaf or improve the best node.
- `random`: a uniformly random valid node, with the scientist's first candidate for it.
- `mutate`: random edits over the executor's own action space, no model (the floor any model must beat).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from arts.policy.edits import EditError, apply_edit, constant_menus
from arts.policy.mutation import random_edit
from arts.policy.sampler import draw
from arts.policy.scientist import Moves, Scientist, canonical_action, directed_target
from arts.policy.targets import list_targets, return_functions
from arts.search import dual
from arts.search.inspect import report
from arts.search.loop import Search
from arts.search.render import render_state, shown_memory
from arts.search.state import Node, Rollout
from arts.tasks.registry import Registry

METHODS: Registry[Callable[[Search], None]] = Registry("search method")


def knobs(node: Node, limit: int = 8) -> str:
    """The named constants of a node's program: what a small model can cite in a concrete hypothesis."""
    pairs = [(k, v) for text in node.files.values() for k, v in list_targets(text).constants.items()][:limit]
    return "\n".join(f"- {k} = {v[:40]}" for k, v in pairs)


def example(s: Search) -> str | None:
    """A concrete hypothesis about a real target of the best node, drawn at random each round: a numeric
    constant, or else a function that ends in a one-line return (the 135M model copies the example's form,
    so it must name something that exists)."""
    best = s.state.best()
    files = best.files if best else {}
    pairs = [(k, v) for text in files.values() for k, v in list_targets(text).constants.items()]
    numeric = [(k, v) for k, v in pairs if v.replace(".", "", 1).replace("-", "", 1).isdigit()]
    if numeric:
        name, value = s.rng.choice(numeric)
        return f"change {name} from {value} to a better value"
    returns = [f for text in files.values() for f in return_functions(text)]
    if returns:
        name, params = s.rng.choice(returns)
        return f"make {name} return a better expression of {', '.join(params)}"
    return None


def targets(s: Search) -> Moves | None:
    """What a directed hypothesis may name (`ScientistConfig.directed`), from the best node: each numeric
    constant with the directions in which its value menu still holds a program not yet evaluated, and
    each function whose return the executor can set. Most promising first: targets whose latest test
    raised the best score, then untested ones, then the rest, least recently tested first. None when the
    program has constants but every value of every menu has run (nothing is left to try)."""
    best = s.state.best()
    if best is None:
        return {}
    files = {p: t for p, t in best.files.items() if p.endswith(".py")}
    known = s.known_programs()

    def fresh(edited: dict[str, str]) -> bool:
        return not known({**best.files, **edited})

    names = list(constant_menus(files))
    up = constant_menus(files, fresh, dict.fromkeys(names, 1))
    down = constant_menus(files, fresh, dict.fromkeys(names, -1))
    moves: Moves = {}
    for name in names:
        verbs = (("increase",) if up[name] else ()) + (("decrease",) if down[name] else ())
        if verbs:
            moves[name] = verbs
    for text in files.values():
        moves.update((name, ("rewrite",)) for name, _ in return_functions(text))
    if names and not moves:
        return None
    return by_promise(moves, list(s.state.nodes.values()))


def by_promise(moves: Moves, nodes: list[Node]) -> Moves:
    """`moves` reordered, most promising first: targets whose latest round of directed tests raised the
    best score of the rounds before, then untested ones, then the rest, least recently tested first
    (program order breaks ties)."""
    top: dict[int, float] = {}  # round -> its best score
    for n in nodes:
        if n.score is not None:
            top[n.round] = max(top.get(n.round, n.score), n.score)
    best_before: dict[int, float] = {}  # round -> the best score of the rounds before it
    running = float("-inf")
    for r in sorted({n.round for n in nodes}):
        best_before[r], running = running, max(running, top.get(r, running))
    # target -> (its latest round of tests, whether one of them raised the best)
    last: dict[str, tuple[int, bool]] = {}
    for n in sorted(nodes, key=lambda n: n.round):
        if n.parent is None or (move := directed_target(n.hypothesis)) is None:
            continue
        raised = n.score is not None and n.score > best_before[n.round]
        r, before = last.get(move[1], (-1, False))
        last[move[1]] = (n.round, raised or (before and r == n.round))
    order = list(moves)

    def rank(name: str) -> tuple[int, int, int]:
        r, raised = last.get(name, (-1, False))
        return (0 if raised else 1 if r < 0 else 2, r, order.index(name))

    return {name: moves[name] for name in sorted(moves, key=rank)}


def parent_ids(s: Search, shown: list[int]) -> list[int]:
    """The parents a proposal may name: on an optimize task the `scientist.parents` best-scoring nodes,
    best first; else (or with 0) every node the state shows."""
    k = s.cfg.scientist.parents
    if k == 0 or s.task.config.kind != "optimize":
        return shown
    ranked = sorted((n for n in s.state.valid_nodes() if n.score is not None), key=lambda n: (-n.score, n.id))
    return [n.id for n in ranked[:k]] or shown


def state_prompt(s: Search) -> tuple[str, list[int], list[int]]:
    """The rendered state, the node ids it shows (allowed parents) and the observation ids (citable)."""
    count = s.scientist_backend.count_tokens if s.scientist_backend else (lambda t: len(t) // 4)
    summary = f"{s.task.name}: {s.task.statement.strip()}"
    if plan := dual.plan_lines(s):
        summary = f"{plan}\n{summary}"
    render = s.cfg.render if s.cfg.components.memory else s.cfg.render.model_copy(update={"memory": 0})
    text, ids = render_state(s.state, summary, render, count)
    spaces, obs = dual.space_prompt(s)
    if spaces:
        text += f"\n\n{spaces}"
    best = s.state.best()
    if best is not None and (k := knobs(best)):
        text += f"\n\n## Constants in node {best.id}\n{k}"
    return text, ids, obs


def inspect_nodes(s: Search, state: str, ids: list[int]) -> str:
    """The scientist names recent nodes to inspect (their reports join the proposal prompt) and memory
    entries to drop (they stay in the store, inactive)."""
    recent = [i for i in sorted(s.state.nodes, reverse=True) if s.state.nodes[i].parent is not None][:6]
    if not recent:  # nothing but the seed yet: its code is already in the audit
        return ""
    t0 = time.time()
    memory = shown_memory(s.state, s.cfg.render) if s.cfg.components.memory else []
    chosen, forget, _ = s.scientist.choose_inspect(state, recent, memory, s.cfg.seed + s.round)
    for mid in forget:
        entry = s.state.insights[mid]
        entry.active = False
        s.update(entry)
        s.store.log_event("memory_drop", round=s.round, insight=mid, text=entry.text)
    notes = [report(s.state, s.state.nodes[nid], s.store.node_dir(nid)) for nid in chosen]
    s.store.log_event("inspect_round", round=s.round, nodes=chosen, seconds=time.time() - t0)
    return "\n\n".join(notes)


def propose(
    s: Search, parents: list[int] | None = None, k: int | None = None, attempt: int = 0
) -> tuple[list[dict], object, str]:
    moves = targets(s) if s.cfg.scientist.directed else {}
    if moves is None:  # measured on friedman: 70 rounds of refused DEGREE moves, an hour, no evaluation
        s.halt = (
            "every value on the menus of the best program's constants has been evaluated: nothing is left"
            " to try (`--set scientist.directed=false` lets the scientist write free hypotheses)"
        )
        return [], None, ""
    state, shown, obs = state_prompt(s)
    allowed = parents or parent_ids(s, shown)
    extra = ""
    if s.cfg.method == "arts" and s.cfg.scientist.inspect and attempt == 0:
        extra = inspect_nodes(s, state, allowed)
    depth = max((s.state.nodes[i].depth for i in allowed), default=0)
    tail = s.cfg.method == "arts" and depth >= s.cfg.scientist.tail_depth
    prompt = f"{state}\n\n## Inspected\n{extra[:2000]}" if extra else state
    scientist = s.scientist
    if k is not None and k != s.cfg.scientist.candidates:
        scientist = Scientist(s.scientist.backend, s.cfg.scientist.model_copy(update={"candidates": k}))
    prop = scientist.propose(
        prompt,
        allowed,
        tail=tail,
        seed=s.cfg.seed * 1000 + s.round * 10 + attempt,
        example=None if moves else example(s),
        observation_ids=obs or None,
        targets=moves or None,
    )
    if not prop.candidates:
        s.store.log_event(
            "proposal_failed", round=s.round, error=prop.completion.error if prop.completion else ""
        )
        s.log(
            f"round {s.round}: unusable proposal ({prop.completion.error if prop.completion else 'no answer'})"
        )
    return prop.candidates, prop, "tail" if tail else ""


def run_group(s: Search, cands: list[dict], prop, picks: list[tuple[int, float, bool]]) -> list[Node]:
    """Execute the drawn candidates one by one; each becomes a rollout, a node, and (for arts) a working
    hypothesis with the evidence its node produced."""
    group, nodes = s.round, []
    for idx, prob, _tail in picks:
        if s.stop_reason(within_round=True):
            break
        c = cands[idx]
        rollout = s.add(
            Rollout(
                round=s.round,
                group=group,
                prompt=prop.messages,
                candidates=cands,
                drawn=idx,
                probability=min(max(prob, 0.0), 1.0),
                action=canonical_action(c),
                json_schema=prop.json_schema,
            )
        )
        if s.ttt is not None:
            rollout = s.ttt.on_rollout(s, rollout)
        h = dual.register(s, c) if s.cfg.method == "arts" else None
        node = s.expand(s.state.nodes[int(c["parent"])], c["hypothesis"], c["axis"], rollout)
        if h is not None:
            dual.after_node(s, node, h, s.findings.pop(node.id, None))
        nodes.append(node)
    return nodes


@METHODS.register("arts")
def arts_round(s: Search) -> None:
    """Propose (K candidates; fewer after the first round) → keep the admissible ones → draw N → execute
    each → attribute failures → compare the tested hypotheses → keep, refine or set each aside."""
    dual.plan_once(s)
    first = not any(n.parent is not None for n in s.state.nodes.values())
    k = s.cfg.scientist.candidates if first else s.cfg.space.explore_candidates
    before = dual.novelty(s)
    cands, prop, tail = propose(s, k=k)
    ok = dual.admissible(s, cands)
    for attempt in range(1, s.cfg.attribution.pivot_retries + 1):  # after a pivot: distinct candidates only
        if any(ok) or not cands:
            break
        s.store.log_event("indistinct", round=s.round, attempt=attempt, candidates=cands)
        cands, prop, tail = propose(s, k=k, attempt=attempt)
        ok = dual.admissible(s, cands)
    if not any(ok):
        return
    if s.cfg.components.verbalized:  # only admissible candidates can be drawn
        idx = [i for i, keep in enumerate(ok) if keep]
        weights = dual.selection_weights(s, [cands[i] for i in idx])
        threshold = s.cfg.scientist.tail_threshold if tail else None
        draws = draw(weights, s.cfg.group, s.rng, tail_threshold=threshold)
        picks = [(idx[d.index], d.probability, d.tail) for d in draws]
    else:  # ablation: the top admissible candidate for every action
        top = max((i for i in range(len(cands)) if ok[i]), key=lambda i: cands[i]["probability"])
        picks = [(top, cands[top]["probability"], False)] * s.cfg.group
    s.store.log_event("draw", round=s.round, drawn=[list(p) for p in picks], candidates=cands)
    nodes = run_group(s, cands, prop, picks)
    tested = list({h.id: h for n in nodes for h in s.state.hypotheses.values() if n.id in h.nodes}.values())
    decisions = dual.attribute_round(s, nodes)
    flawed = dual.compare(s, tested)
    dual.exploit(s, tested, flawed, decisions)
    if s.cfg.space.stop_when_stale and nodes and dual.novelty(s) == before:
        s.halt = "the round added no new hypothesis, observation or direction"


def _first_candidate_rounds(s: Search, choose_parent: Callable[[], Node]) -> None:
    for _ in range(s.cfg.group):
        if s.stop_reason(within_round=True):
            return
        parent = choose_parent()
        cands, prop, _ = propose(s, parents=[parent.id])
        if cands:
            run_group(s, cands, prop, [(0, cands[0]["probability"], False)])


def _debug_depth(s: Search, node: Node) -> int:
    depth = 0
    while (
        node.parent is not None and node.status == "invalid" and node.hypothesis.startswith("Fix the failure")
    ):
        depth, node = depth + 1, s.state.nodes[node.parent]
    return depth


@METHODS.register("greedy")
def greedy_round(s: Search) -> None:
    """AIDE's policy: drafts from the root; then, if the newest node failed (and its debug chain is
    shorter than `debug_depth`), debug it; else improve the best node."""
    root = next(n for n in s.state.nodes.values() if n.parent is None)
    for _ in range(s.cfg.group):
        if s.stop_reason(within_round=True):
            return
        newest = max(s.state.nodes.values(), key=lambda n: n.id)
        drafts = [n for n in s.state.nodes.values() if n.parent == root.id]
        if (
            len(drafts) >= s.cfg.drafts
            and newest.status == "invalid"
            and _debug_depth(s, newest) < s.cfg.debug_depth
        ):
            reason = newest.reason.splitlines()[0][:120] if newest.reason else "no result"
            s.expand(newest, f"Fix the failure of node {newest.id}: {reason}", newest.axis or "debug", None)
            continue
        parent = root if len(drafts) < s.cfg.drafts else (s.state.best() or root)
        cands, prop, _ = propose(s, parents=[parent.id])
        if cands:
            run_group(s, cands, prop, [(0, cands[0]["probability"], False)])


@METHODS.register("random")
def random_round(s: Search) -> None:
    _first_candidate_rounds(s, lambda: s.rng.choice(s.state.valid_nodes()))


@METHODS.register("mutate")
def mutate_round(s: Search) -> None:
    """Random edits from the best node (70%) or a random valid one; no model is called."""
    for _ in range(s.cfg.group):
        if s.stop_reason(within_round=True):
            return
        valid = s.state.valid_nodes()
        parent = s.state.best() if s.rng.random() < 0.7 else s.rng.choice(valid)
        parent = parent or valid[0]

        try:
            random_edit(parent.files, s.rng)
        except EditError as e:  # nothing here to mutate: no node, and no loop of empty rounds
            s.halt = f"mutate: {e}"
            return

        def edit(node: Node, workdir, parent=parent) -> Node:
            for _attempt in range(5):
                try:
                    action = random_edit(parent.files, s.rng)
                    files = apply_edit(parent.files, action)
                except EditError:
                    continue
                node.files, node.hypothesis, node.axis = files, action.model_dump_json()[:140], "mutation"
                node.transcript = [{"action": action.model_dump()}]
                res = s.evaluate(files, workdir)
                node.eval_s = res.wall_s
                if res.valid:
                    node.status, node.raw_score, node.score = "valid", res.score, s.task.normalise(res.score)
                    node.metrics = res.metrics
                else:
                    node.status, node.reason = "invalid", res.reason
                return node
            node.status, node.reason = "invalid", "no applicable random edit"
            return node

        s.expand(parent, "random mutation", "mutation", None, edit=edit)
