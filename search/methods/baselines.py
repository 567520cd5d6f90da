"""Baseline methods, run in the same loop, lab and sandbox as arts so that they compare on equal terms.

- `greedy` (AIDE-like): a few drafts from the root, then debug a failed leaf or improve the best node;
- `random`: a uniformly random valid node, with the scientist's first candidate for it;
- `mutate`: random edits over the executor's own action space, no model (the floor any model must beat).
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel

from arts.policy.edits.apply import EditError, apply_edit, program_key
from arts.policy.edits.mutation import random_edit
from arts.search.context import Run
from arts.search.lab import Edit
from arts.search.methods.base import method
from arts.search.methods.proposals import evals_left, propose, run_group
from arts.search.overlap import default_workers
from arts.search.state import Node

DEBUG_REASON_CHARS = 120
"""greedy: a failure's first line, quoted in its debug hypothesis, is cut to this."""
MUTATION_TEXT_CHARS = 140
"""mutate: a random edit's JSON, kept as the node's hypothesis, is cut to this."""


def _first_candidates(run: Run, choose_parent: Callable[[], Node]) -> None:
    for _ in range(run.cfg.group):
        if run.stop_reason(within_round=True):
            return
        parent = choose_parent()
        proposed = propose(run, parents=[parent.id])
        if proposed.candidates:
            run_group(run, proposed, [(0, proposed.candidates[0].probability, False)], register=False)


def _debug_depth(run: Run, node: Node) -> int:
    depth = 0
    while (
        node.parent is not None and node.status == "invalid" and node.hypothesis.startswith("Fix the failure")
    ):
        depth, node = depth + 1, run.state.nodes[node.parent]
    return depth


@method("greedy")
def greedy_round(run: Run) -> None:
    """AIDE's policy: drafts from the root; then, if the newest node failed (and its debug chain is
    shorter than `debug_depth`), debug it; else improve the best node."""
    cfg = run.cfg.baselines
    root = next(n for n in run.state.nodes.values() if n.parent is None)
    for _ in range(run.cfg.group):
        if run.stop_reason(within_round=True):
            return
        newest = max(run.state.nodes.values(), key=lambda n: n.id)
        drafts = [n for n in run.state.nodes.values() if n.parent == root.id]
        if (
            len(drafts) >= cfg.drafts
            and newest.status == "invalid"
            and _debug_depth(run, newest) < cfg.debug_depth
        ):
            reason = newest.reason.splitlines()[0][:DEBUG_REASON_CHARS] if newest.reason else "no result"
            run.lab.expand(newest, f"Fix the failure of node {newest.id}: {reason}", newest.axis or "debug")
            continue
        parent = root if len(drafts) < cfg.drafts else (run.state.best() or root)
        proposed = propose(run, parents=[parent.id])
        if proposed.candidates:
            run_group(run, proposed, [(0, proposed.candidates[0].probability, False)], register=False)


@method("random")
def random_round(run: Run) -> None:
    _first_candidates(run, lambda: run.rng.choice(run.state.valid_nodes()))


@method("mutate", uses_model=False)
def mutate_round(run: Run) -> None:
    """Random edits from the best node (`mutate_from_best`) or a random valid one; no model is called.
    With more than one worker (`SearchConfig.workers`, default the cores available) the round's `group`
    edits are drawn first and evaluated at once, as arts's experiments are (`search.batching`): on an
    evaluation-bound task the pool, not the draws, sets the pace. With one, each edit is drawn after the
    previous one's result, from the best node as it then stands."""
    cfg = run.cfg.baselines
    workers = run.cfg.workers or default_workers()
    drawn: list[tuple[Node, Edit]] = []
    taken: set = set()
    for _ in range(run.cfg.group):
        if run.stop_reason(within_round=True) or (drawn and len(drawn) >= evals_left(run)):
            break
        valid = run.state.valid_nodes()
        parent = run.state.best() if run.rng.random() < cfg.mutate_from_best else run.rng.choice(valid)
        parent = parent or valid[0]
        try:
            random_edit(parent.files, run.rng)
        except EditError as e:  # nothing here to mutate: no node, and no loop of empty rounds
            run.meter.halt(f"mutate: {e}")
            break
        if workers > 1:
            drawn.append((parent, _mutation(run, parent, _draw(run, parent, taken))))
            continue
        run.lab.expand(parent, "random mutation", "mutation", edit=_mutation(run, parent))
    if drawn:
        waiting = [
            (run.lab.begin(parent, "random mutation", "mutation"), parent, edit) for parent, edit in drawn
        ]
        with run.agents.batching.together(None, workers) as together:
            together([lambda w=w: run.lab.finish(w[0], w[1], edit=w[2]) for w in waiting])


Drawn = tuple[BaseModel, dict[str, str]] | None
"""A random edit and the program it makes; None when no attempt gave a new program."""


def _draw(run: Run, parent: Node, taken: set | None = None) -> Drawn:
    """A random edit of `parent` whose program the run has not evaluated (nor drawn: `taken`)."""
    for _attempt in range(run.cfg.baselines.mutate_attempts):
        try:
            action = random_edit(parent.files, run.rng)
            files = apply_edit(parent.files, action)
        except EditError:
            continue
        key = program_key(files)
        if run.lab.known_programs()(files) or (taken is not None and key in taken):
            continue  # draw again rather than spend a node on a rerun
        if taken is not None:
            taken.add(key)
        return action, files
    return None


def _mutation(run: Run, parent: Node, drawn: Drawn | str = "now") -> Edit:
    """The lab's edit of a mutation node: the `drawn` edit, or one drawn when the node runs ("now")."""

    def edit(node: Node, workdir) -> Node:
        pick = _draw(run, parent) if drawn == "now" else drawn
        if pick is None:
            node.status, node.reason = "invalid", "no applicable random edit"
            return node
        action, files = pick
        node.files, node.hypothesis, node.axis = (
            files,
            action.model_dump_json()[:MUTATION_TEXT_CHARS],
            "mutation",
        )
        node.transcript = [{"action": action.model_dump()}]
        return run.lab.score(node, run.lab.evaluate(files, workdir))

    return edit
