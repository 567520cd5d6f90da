"""Search methods: how one round chooses its actions. All share the loop, the executor and the sandbox.

- `arts`: inspect → attribute failures → K verbalized candidates → the sampler draws N → execute each.
- `greedy` (AIDE-like): a few drafts from the root, then debug a failed leaf or improve the best node.
- `random`: a uniformly random valid node, with the scientist's first candidate for it.
- `mutate`: random edits over the executor's own action space, no model (the floor any model must beat).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from policy.edits import EditError, apply_edit, list_targets, random_edit
from policy.sampler import draw
from policy.scientist import canonical_action
from search.inspect import failed_or_regressed, report
from search.loop import Search
from search.render import render_state, shown_memory
from search.state import Insight, Node, Rollout
from tasks.registry import Registry

METHODS: Registry[Callable[[Search], None]] = Registry("search method")


def knobs(node: Node, limit: int = 8) -> str:
    """The named constants of a node's program: what a small model can cite in a concrete hypothesis."""
    pairs = [(k, v) for text in node.files.values() for k, v in list_targets(text).constants.items()][:limit]
    return "\n".join(f"- {k} = {v[:40]}" for k, v in pairs)


def example(s: Search) -> str | None:
    """A concrete hypothesis about a real constant of the best node, drawn at random each round."""
    best = s.state.best()
    pairs = [
        (k, v)
        for text in (best.files.values() if best else [])
        for k, v in list_targets(text).constants.items()
    ]
    numeric = [(k, v) for k, v in pairs if v.replace(".", "", 1).replace("-", "", 1).isdigit()]
    if not numeric:
        return None
    name, value = s.rng.choice(numeric)
    return f"change {name} from {value} to a better value"


def state_prompt(s: Search) -> tuple[str, list[int]]:
    count = s.scientist_backend.count_tokens if s.scientist_backend else (lambda t: len(t) // 4)
    summary = f"{s.task.name}: {s.task.statement.strip()}"
    text, ids = render_state(s.state, summary, s.cfg.render, count)
    best = s.state.best()
    if best is not None and (k := knobs(best)):
        text += f"\n\n## Constants in node {best.id}\n{k}"
    return text, ids


def inspect_and_attribute(s: Search, state: str, ids: list[int]) -> str:
    """The scientist names nodes to inspect; failed or regressed ones get an idea/implementation verdict.
    Returns the text added to the proposal prompt (reports and verdicts)."""
    recent = [i for i in sorted(s.state.nodes, reverse=True) if s.state.nodes[i].parent is not None][:6]
    if not recent:  # nothing but the seed yet: its code is already in the audit
        return ""
    t0 = time.time()
    chosen, forget, _ = s.scientist.choose_inspect(
        state, recent, shown_memory(s.state, s.cfg.render), s.cfg.seed + s.round
    )
    for mid in forget:  # the scientist edits its memory: dropped entries stay in the store, inactive
        entry = s.state.insights[mid]
        entry.active = False
        s.update(entry)
        s.store.log_event("memory_drop", round=s.round, insight=mid, text=entry.text)
    notes: list[str] = []
    for nid in chosen:
        node = s.state.nodes[nid]
        rep = report(s.state, node, s.store.node_dir(nid))
        s.store.log_event("inspect", round=s.round, node=nid)
        if not failed_or_regressed(s.state, node):
            notes.append(rep)
            continue
        verdict, c = s.scientist.attribute(rep, nid, seed=s.cfg.seed + s.round)
        s.store.log_event(
            "attribution",
            round=s.round,
            node=nid,
            ok=verdict is not None,
            verdict=verdict.model_dump() if verdict else None,
            error=c.error,
        )
        if verdict is None:
            notes.append(rep)
            continue
        if verdict.verdict == "implementation":
            line = f"node {nid} ({node.axis}): implementation was wrong; retry this axis: {verdict.fix}"
        else:
            line = f"node {nid} ({node.axis}): the idea was wrong; pivot. {verdict.fix}"
        notes.append(f"{rep}\nverdict: {line}")
        s.add(Insight(text=line[:200], kind="memory", node=nid, round=s.round))
    s.store.log_event("inspect_round", round=s.round, nodes=chosen, seconds=time.time() - t0)
    return "\n\n".join(notes)


def propose(s: Search, parents: list[int] | None = None) -> tuple[list[dict], object, str]:
    state, shown = state_prompt(s)
    allowed = parents or shown
    extra = ""
    if s.cfg.method == "arts" and s.cfg.scientist.inspect:
        extra = inspect_and_attribute(s, state, allowed)
    depth = max((s.state.nodes[i].depth for i in allowed), default=0)
    tail = s.cfg.method == "arts" and depth >= s.cfg.scientist.tail_depth
    prompt = f"{state}\n\n## Inspected\n{extra[:2000]}" if extra else state
    prop = s.scientist.propose(
        prompt, allowed, tail=tail, seed=s.cfg.seed * 1000 + s.round, example=example(s)
    )
    if not prop.candidates:
        s.store.log_event(
            "proposal_failed", round=s.round, error=prop.completion.error if prop.completion else ""
        )
        s.log(
            f"round {s.round}: unusable proposal ({prop.completion.error if prop.completion else 'no answer'})"
        )
    return prop.candidates, prop, "tail" if tail else ""


def run_group(s: Search, cands: list[dict], prop, picks: list[tuple[int, float, bool]]) -> None:
    group = s.round
    for idx, prob, _tail in picks:
        if s.stop_reason(within_round=True):
            return
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
        s.expand(s.state.nodes[int(c["parent"])], c["hypothesis"], c["axis"], rollout)


@METHODS.register("arts")
def arts_round(s: Search) -> None:
    cands, prop, tail = propose(s)
    if not cands:
        return
    draws = draw(
        [c["probability"] for c in cands],
        s.cfg.group,
        s.rng,
        tail_threshold=s.cfg.scientist.tail_threshold if tail else None,
    )
    s.store.log_event("draw", round=s.round, drawn=[d.model_dump() for d in draws], candidates=cands)
    run_group(s, cands, prop, [(d.index, d.probability, d.tail) for d in draws])


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
