"""What the harness measured about a failed experiment, and the route those facts point to.

A 135M analyst and critic read a failure report and, measured on the recovery benchmark
(`search/bench/recovery.py`), routed a failure of known cause no better than chance (0.17-0.26 of 12
scenarios x 2 seeds, with six routes). Some causes the harness can see without a model: an exception
or an invalid result that hit no limit (the code broke its contract), a result that is not a finite
number or a training curve that blew up or climbed above where it started, or still fell where its
parent's had not (the method, one step too far or too short), a regression too small to matter, and a
program that computes what its parent does (up to names and comments) yet scored lower on an evaluator
that is not known to be exact (the measurement). On an exact evaluator a numbers-only edit that ran is
the step's own doing: one that hurt blames the method (never a repair or a remeasurement: over four probe-kepler
runs the 135M critic sent 15 of 30 routed failures, mostly such steps, to a repair), and one
that changed the score not at all is pivoted from (an inert knob: the axis does nothing, and its
refinements were spent evaluations; accepted, it stayed on the menus, and on probe-kepler over 5 seeds
the lists then drew the knobs that change nothing more often and `decrease TOL`, which pays, half as
often: docs/benchmark.md).
The diff says which of two kinds an edit was: one that changed only
numbers (a step along knobs: when a large one, x4 or more, made things worse, or any blew up, the step
is refined on the same knobs, SAGE's local refinement) or one that changed the code (when that blew up
while setting no knob, the code is suspected first). A code edit that introduced a constant and hurt
set a new knob once, at a value nothing measured: it is refined locally too, and the refinement's line
search along that knob (`investigation.steps`) is the evidence that settles the route: a value that pays
confirms it, none paying makes it a pivot (`pursue.refuted`). A number switched on from zero is a new
term, the idea itself, and a small step that hurt asks about its direction, not its size: neither is
decided here.
These `Signals` are shown to the causes and the critic as lines of the report, and where one is
decisive it weighs in the ranking and the depth (`attribution.attribute`). Everything else (a sound
program that is simply worse, a missing component) is left to the critic.
"""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path
from typing import NamedTuple

from arts.policy.analysis_answers import Category
from arts.search.investigation import probes
from arts.search.investigation.reports import report, tail
from arts.search.state import Node, SearchState
from arts.tasks.workcopy import read_text

NEGLIGIBLE = 1e-3
"""A regression smaller than this share of the parent's score is too small to act on."""
BIG_STEP = 4.0
"""A numbers-only edit that moved a number by this factor or more and hurt is refined with a smaller step."""
CURVE_KEYS = ("train_loss", "loss", "val_loss")
"""The first of these fields of a node's curves.jsonl is its training curve."""


class Signals(NamedTuple):
    exception: str = ""
    """The last error line when the program raised one; else, for an invalid result that hit no limit and
    is not a divergence (the program broke its contract: a wrong length, a missing value), the evaluator's
    reason."""
    limit: str = ""
    """"time" or "memory" when the run hit that limit."""
    nonfinite: bool = False
    curve: str = ""
    """The training curve's last move: "blew up", "climbed" (rising, and above where it started), "still
    falling", "rose", "flat", or "" without one."""
    parent_curve: str = ""
    """The parent's, the same way: a curve still falling is news only where the parent's was not."""
    drop: float | None = None
    """How much worse than its parent, as a share of the parent's score (None: not a valid regression)."""
    exact: bool = False
    """The evaluator is known to be deterministic."""
    same_program: bool = False
    """The program computes what its parent's does: the same syntax tree up to names and comments."""
    edit: str = ""
    """"numbers" when the edit changed only numeric constants (names and comments aside), "code" when it
    changed more, "same" when only names or comments (`same_program`), "" when nothing changed or a
    Python file does not parse."""
    steps: tuple[tuple[str, float, float], ...] = ()
    """For a numbers-only edit: each changed constant as (the name it is assigned to, or "", old, new)."""
    unchanged: bool = False
    """It ran valid and scored exactly what its parent did."""
    introduced: tuple[tuple[str, float], ...] = ()
    """For a code edit: each numeric module-level constant it added (name, value), a knob the idea brought
    and set once, at a value nothing measured."""

    def lines(self) -> list[str]:
        out = [f"the program failed: {self.exception}"] if self.exception else []
        out += [f"it ran past its {self.limit} limit"] if self.limit else []
        out += ["its result was not a finite number (diverged)"] if self.nonfinite else []
        curve = {"still falling": "was still falling at the end (under-trained?)", "blew up": "blew up",
                 "climbed": "rose above where it started (training made it worse)"}  # fmt: skip
        out += (
            [f"its training curve {curve.get(self.curve, self.curve + ' at the end')}"] if self.curve else []
        )
        if self.drop is not None:
            out.append(
                f"a negligible regression ({self.drop:.2%} of the parent's score)"
                if self.drop < NEGLIGIBLE
                else f"{self.drop:.0%} worse than its parent"
            )
        out += (
            ["it computes what its parent does (only names or comments changed)"] if self.same_program else []
        )
        if self.edit == "numbers":
            moved = ", ".join(f"{name or 'a number'} {a:g} -> {b:g}" for name, a, b in self.steps[:4])
            out.append(f"the edit changed only numbers: {moved}")
        elif self.edit == "code":
            out.append("the edit changed the code, not only numbers")
        out.append(
            "the evaluator is deterministic: measuring again gives the same score"
            if self.exact
            else "the evaluator is not known to be deterministic: a score may move when measured again"
        )
        return out

    def evidence(self) -> tuple[Category | None, str]:
        """(The category the decisive signal blames, or None for any; the depth it calls for: "accept",
        "local", "pivot" or "" when it leaves the depth to the critic)."""
        if self.same_program and not self.exact:  # nothing computed changed: any drop is the measurement's
            return "design", ""
        if self.drop is not None and self.drop < NEGLIGIBLE:
            return None, "accept"
        if self.exception:
            return "implementation", ""
        newly_falling = self.curve == "still falling" and self.parent_curve != "still falling"
        blew_up = self.nonfinite or self.curve in ("blew up", "climbed")
        if blew_up and self.edit == "code" and not self.introduced:
            return "implementation", ""  # no knob it set explains a divergence: the code first
        if blew_up or self.limit or newly_falling:
            return "method", "local"
        if self.drop is not None and (self.steps_taken or self.introduced):
            return "method", "local"  # a step along knobs that hurt, or a new knob's one setting: a line
            # search along it (`investigation.steps`) tells which; none paying, the route becomes a pivot
        if self.exact and self.edit == "numbers":  # valid: the code ran as its parent's, measured exactly
            if self.unchanged:
                return "method", "pivot"  # an inert knob: nothing to repair, remeasure or refine; leave it
            if self.drop is not None:
                return "method", ""  # the step itself (its direction or size), neither code nor protocol
        return None, ""

    @property
    def steps_taken(self) -> bool:
        """A numbers-only edit that moved a number that was not zero by a factor of `BIG_STEP` or more (a
        step that may have gone too far; not a new term switched on, nor a nudge whose direction, not its
        size, is the question)."""
        return self.edit == "numbers" and any(
            a != 0 and b != 0 and max(abs(b / a), abs(a / b)) >= BIG_STEP for _, a, b in self.steps
        )


def measure(state: SearchState, node: Node, node_dir: Path, deterministic: bool = False) -> Signals:
    """The node's signals, read from the node, its folder and its parent; no model."""
    text = f"{node.reason}\n{tail(node_dir / 'stderr.txt', 6)}"
    low = text.lower()
    invalid = node.status == "invalid"
    limit = "time" if invalid and ("timed out" in low or "time limit" in low) else ""
    limit = limit or ("memory" if invalid and "memory" in low else "")
    nonfinite = invalid and any(w in low for w in ("non-finite", "nan", "diverged", "infinity"))
    exception = ""
    if invalid and ("traceback" in low or "error" in low or "exception" in low):
        lines = reversed(text.splitlines())
        exception = next((ln.strip()[:100] for ln in lines if "Error" in ln or "Exception" in ln), "an error")
    elif invalid and not limit and not nonfinite:
        exception = node.reason.strip().splitlines()[-1][:100] if node.reason.strip() else "an invalid result"
    parent = state.nodes.get(node.parent) if node.parent is not None else None
    curve = _shape_of(_curve(node_dir))
    parent_curve = _shape_of(_curve(node_dir.parent / str(parent.id))) if parent is not None else ""
    drop = None
    if (
        node.score is not None
        and parent is not None
        and parent.score is not None
        and node.score < parent.score
    ):
        drop = (parent.score - node.score) / max(abs(parent.score), 1e-12)
    edit, steps = _edit(parent.files, node.files) if parent is not None else ("", ())
    same = edit == "same"
    unchanged = node.status == "valid" and parent is not None and parent.score is not None
    unchanged = unchanged and node.score == parent.score
    introduced = ()
    if edit == "code" and parent is not None:
        before = probes.constants(parent)
        introduced = tuple((k, float(v)) for k, v in probes.constants(node).items() if k not in before)
    return Signals(exception, limit, nonfinite, curve, parent_curve, drop, deterministic, same, edit, steps,
                   unchanged, introduced)  # fmt: skip


def failure_report(state: SearchState, node: Node, node_dir: Path, sig: Signals) -> str:
    """The node's report with its signals: what the causes, the critic and the judge read."""
    return report(state, node, node_dir) + "\nsignals:\n" + "\n".join(f"- {line}" for line in sig.lines())


def _shape_of(values: list[float]) -> str:
    """A curve's last move: "blew up", "climbed" (rising to above its first value: training made it
    worse), "still falling", "rose", "flat"; "" for fewer than three points."""
    if len(values) < 3:
        return ""
    a, b, c = values[-3:]
    if not all(map(math.isfinite, (a, b, c))) or c > 10 * max(abs(values[0]), 1e-12):
        return "blew up"
    if c > b > a:
        return "climbed" if c > values[0] else "rose"
    return "still falling" if c < b < a else "flat"


def _curve(node_dir: Path) -> list[float]:
    values = []
    for line in read_text(node_dir / "curves.jsonl", 256 << 10).splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        key = next((k for k in CURVE_KEYS if isinstance(row, dict) and k in row), None)
        if key is not None and isinstance(row[key], int | float):
            values.append(float(row[key]))
    return values


def _edit(before: dict[str, str], after: dict[str, str]) -> tuple[str, tuple[tuple[str, float, float], ...]]:
    """What kind of edit turned `before` into `after` (see `Signals.edit`) and, for numbers only, its steps.
    Every changed Python file is parsed once; "same" when each parses to the same tree up to the names it
    binds and its comments (a renamed variable, a new comment) and other files are equal."""
    if before == after:
        return "", ()
    if set(before) != set(after):
        return "code", ()
    steps: list[tuple[str, float, float]] = []
    for path, text in after.items():
        if text == before[path]:
            continue
        if not path.endswith(".py"):
            return "code", ()
        try:
            old, new = ast.parse(before[path]), ast.parse(text)
        except (SyntaxError, ValueError):
            return "", ()
        pairs = [(a, b) for a, b in zip(_numbers(old), _numbers(new)) if a[1] != b[1]]
        if _shape(old, numbers=True) != _shape(new, numbers=True):
            return "code", ()
        steps += [(name, float(a), float(b)) for (name, a), (_, b) in pairs]
    return ("numbers", tuple(steps)) if steps else ("same", ())


def _numbers(tree: ast.AST) -> list[tuple[str, float]]:
    """Each numeric constant in walk order, with the name a plain `NAME = number` assigns it to."""
    named = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value.operand if isinstance(node.value, ast.UnaryOp) else node.value
            named[id(value)] = node.targets[0].id
    return [(named.get(id(n), ""), n.value) for n in ast.walk(tree) if _is_number(n)]


def _is_number(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int | float)
        and not isinstance(node.value, bool)
    )


def _shape(tree: ast.AST, numbers: bool = False) -> str:
    """The tree with local names numbered by first appearance (module-level and called names kept); with
    `numbers`, every numeric constant reads 0. Changes `tree`."""
    names: dict[str, str] = {}
    for node in ast.walk(tree) if numbers else ():
        if _is_number(node):
            node.value = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and not node.id.isupper():
            names.setdefault(node.id, f"v{len(names)}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in names:
            node.id = names[node.id]
    return ast.dump(tree, annotate_fields=False)
