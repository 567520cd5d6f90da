"""The compass's step level on a parent: how fine the next directed move of one of its constants (or
numeric keyword arguments) starts.

A compass search polls each direction with one step size and halves the size once a whole poll fails.
Here the scientist chooses which constant and which way; the harness keeps the step size per parent.
Level 0 (x2 and x0.5) until `GIVE_UP` moves of that size from the parent have all failed to beat it,
then level 1 (x1.25, x0.8), then level 2 (x1.1, x0.9), the finest (`policy.menus.STEP_LEVELS`). A move
that beat the parent keeps its level: the child it made is the next parent. Measured on a quadrature
rule whose best points lie within 10% of the seed's: with every directed move starting at x2 or x0.5,
2 of 2 runs spent their 12 evaluations on coarse steps of 6 constants and never beat the seed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from arts.policy.edits.keywords import numeric_keywords
from arts.policy.edits.menus import step_level
from arts.policy.edits.targets import list_targets, number
from arts.search.state import Node, SearchState

GIVE_UP = 3
"""Failed moves of one size from a parent (none beating it) before its next moves start finer."""


def moves(state: SearchState, parent: Node, normalise: Callable[[float | None], float | None]):
    """(the constant or keyword's name, its verb, the step's level, whether it beat the parent) of each
    evaluated move of one constant or numeric keyword from `parent`: the executor's evaluated edits, and
    probes (a node with one edit and no per-edit result)."""
    values = {
        name: number(src)
        for path, text in parent.files.items()
        if path.endswith(".py")
        for name, src in list_targets(text).constants.items()
    }
    keywords = numeric_keywords({p: t for p, t in parent.files.items() if p.endswith(".py")})
    for n in state.nodes.values():
        if n.parent != parent.id:
            continue
        judged = [t for t in n.transcript if "valid" in t]
        if not judged and len(n.transcript) == 1 and n.status in ("valid", "invalid"):
            judged = [{**n.transcript[0], "valid": n.status == "valid", "score": n.raw_score}]
        for t in judged:
            action = t.get("action") or {}
            if action.get("op") == "set_keyword":
                name = action.get("keyword")
                old = keywords.get((action.get("call"), name))
                new = number(str(action.get("value")))
            elif action.get("op") == "set_constant":
                name = action.get("name")
                old, new = values.get(name), action.get("value")
            else:
                continue
            if not isinstance(new, int | float) or isinstance(new, bool) or old is None:
                continue
            if old == new:
                continue
            score = normalise(t.get("score")) if t["valid"] else None
            beat = score is not None and parent.score is not None and score > parent.score
            yield name, "increase" if new > old else "decrease", step_level(old, new), beat


def level(state: SearchState, parent: Node, normalise: Callable[[float | None], float | None]) -> int:
    """The step level the next directed move from `parent` starts at (see the module docstring)."""
    failed, beat = Counter(), Counter()
    for _, _, lvl, won in moves(state, parent, normalise):
        (beat if won else failed)[lvl] += 1
    out = 0
    while out < 2 and failed[out] >= GIVE_UP and not beat[out]:
        out += 1
    return out


OPPOSITE = {"increase": "decrease", "decrease": "increase"}


def held(state: SearchState, normalise: Callable[[float | None], float | None]) -> set[str]:
    """The directed steps to hold back at the best node (`scientist.poll`), as `increase TOL`: those of
    which every one run from it failed to beat it while the opposite way has not run from it at all. A
    compass search polls both directions before it trusts one; a 135M scientist copies the step it sees
    tried, so on probe-kepler it wrote `increase TOL`, which hurts, round after round, and never the
    opposite, which pays. Whatever the step's size: held only at its level, `increase TOL` came back
    finer as soon as three failed moves of any knob made the level finer, and the model wrote it again.
    Once both ways have run, both are offered (the compass's level then sets the size)."""
    best = state.best()
    if best is None:
        return set()
    failed, won = set(), set()
    for name, verb, _, beat in moves(state, best, normalise):
        (won if beat else failed).add((verb, name))
    tried = failed | won
    return {f"{verb} {name}" for verb, name in failed - won if (OPPOSITE[verb], name) not in tried}
