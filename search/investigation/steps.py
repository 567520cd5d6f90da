"""Smaller steps: the mechanical part of a local refinement, tried before the executor's model.

A local refinement says the failed experiment went the right way too far (`attribution`: refine_local).
When its edit moved a numeric constant further than any value menu reaches (`policy.edits.menus`: a jump
written outside the menus, or a constant the edit introduced), "the same change with a smaller step" is
a line search back along that constant, which needs no model: the constant moved furthest (largest
ratio) is set between its parent's value and the failed one, halfway then a quarter of the way (on a log
scale when both have one sign, else linearly: LR 0.05 -> 0.5 gives 0.16 then 0.089). A constant the edit
introduced has no parent value and no known scale, so it is tried an order of magnitude each way (MEDIAN
101 gives 10 then 1010; CEILING 0.2 gives 0.02 then 2). Measured with the 135M default on the recovery
scenarios (`tasks/recovery/scenarios.toml`), a refinement left to the model moved the new constant one
menu step (MEDIAN 101 -> 102, CEILING 0.2 -> 0.22), and no local refinement recovered. A move a menu
could have made (LR x2) is left to the executor, whose next menu step is the smaller step.

Each value is a whole program (the failed program with that constant set), run as a node that follows the
failed one; the search stops at the first that beats the parent (`search.investigation.pursue`).
"""

from __future__ import annotations

import math

from arts.policy.edits.menus import value_menu
from arts.search.investigation import probes
from arts.search.state import Node

STEPS = 2
"""Values one local refinement tries at most (each costs an evaluation)."""
BACK = (0.5, 0.25)
"""Fractions of the failed move kept: halfway back, then a quarter of the way from the parent."""
SCALES = (0.1, 10.0)
"""Factors tried on a constant the failed edit introduced."""


def smaller_steps(failed: Node, parent: Node) -> list[tuple[str, int | float]]:
    """(constant, value) to try, best first: a line search back along the constant the failed edit moved
    furthest beyond its menu (or, when it moved none so, the first it introduced); empty when every number
    it moved stayed within its value menu."""
    before, after = probes.constants(parent), probes.constants(failed)
    moved = [
        (name, before[name], v) for name, v in after.items() if name in before and _jump(before[name], v)
    ]
    moved.sort(key=lambda m: -_distance(m[1], m[2]))
    new = [(name, None, v) for name, v in after.items() if name not in before]
    for name, v0, v1 in moved + new:
        values = [_step(v0, v1, t) for t in BACK] if v0 is not None else [_scaled(v1, f) for f in SCALES]
        kept = list(dict.fromkeys(v for v in values if v is not None and v != v1 and v != v0))
        if kept:
            return [(name, v) for v in kept[:STEPS]]
    return []


def _jump(v0: int | float, v1: int | float) -> bool:
    """Whether `v0` -> `v1` is a move no value menu of `v0` offers."""
    return v0 != v1 and not any(math.isclose(v, v1, rel_tol=1e-9) for v in value_menu(v0))


def _distance(v0: float, v1: float) -> float:
    if v0 and v1 and (v0 > 0) == (v1 > 0):
        return abs(math.log(abs(v1) / abs(v0)))
    return math.inf


def _step(v0: int | float, v1: int | float, t: float) -> int | float | None:
    """The value a fraction `t` of the way from `v0` to `v1`, as round as the two are."""
    if v0 and v1 and (v0 > 0) == (v1 > 0):
        value = v0 * (v1 / v0) ** t
    else:
        value = v0 + (v1 - v0) * t
    return _round(value, isinstance(v0, int) and isinstance(v1, int))


def _scaled(v1: int | float, factor: float) -> int | float | None:
    """`v1` times `factor`; None where that rounds to 0 (the term switched off, not a smaller step)."""
    value = _round(v1 * factor, isinstance(v1, int)) if v1 != 0 else None
    return value if value else None


def _round(value: float, integer: bool) -> int | float | None:
    if not math.isfinite(value):
        return None
    if integer:
        return int(round(value))
    return float(f"{value:.2g}")
