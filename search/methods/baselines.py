"""Baseline methods, run in the same loop, lab and sandbox as arts so that they compare on equal terms.

- `greedy` (AIDE-like): a few drafts from the root, then debug a failed leaf or improve the best node;
- `random`: a uniformly random valid node, with the scientist's first candidate for it;
- `mutate`: random edits over the executor's own action space, no model (the floor any model must beat).
"""

from __future__ import annotations

from collections.abc import Callable

from arts.policy.edits import EditError, apply_edit
from arts.policy.mutation import random_edit
from arts.search.context import Run
from arts.search.methods.base import method
from arts.search.methods.proposals import propose, run_group
from arts.search.state import Node


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
            reason = newest.reason.splitlines()[0][:120] if newest.reason else "no result"
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
    """Random edits from the best node (`mutate_from_best`) or a random valid one; no model is called."""
    cfg = run.cfg.baselines
    for _ in range(run.cfg.group):
        if run.stop_reason(within_round=True):
            return
        valid = run.state.valid_nodes()
        parent = run.state.best() if run.rng.random() < cfg.mutate_from_best else run.rng.choice(valid)
        parent = parent or valid[0]
        try:
            random_edit(parent.files, run.rng)
        except EditError as e:  # nothing here to mutate: no node, and no loop of empty rounds
            run.meter.halt(f"mutate: {e}")
            return

        def edit(node: Node, workdir, parent=parent) -> Node:
            for _attempt in range(cfg.mutate_attempts):
                try:
                    action = random_edit(parent.files, run.rng)
                    files = apply_edit(parent.files, action)
                except EditError:
                    continue
                if run.lab.known_programs()(files):  # draw again rather than spend a node on a rerun
                    continue
                node.files, node.hypothesis, node.axis = files, action.model_dump_json()[:140], "mutation"
                node.transcript = [{"action": action.model_dump()}]
                return run.lab.score(node, run.lab.evaluate(files, workdir))
            node.status, node.reason = "invalid", "no applicable random edit"
            return node

        run.lab.expand(parent, "random mutation", "mutation", edit=edit)
