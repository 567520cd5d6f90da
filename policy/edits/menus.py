"""Value menus: the few values a number, a flag or a keyword argument of a call may move to.

A 135M model chooses well from a short list and badly from free text (a score copied as a constant, a
negative radius), so every value an edit sets comes from a menu: a number times a few factors
(`value_menu`), a flag flipped, and for a keyword argument of a library call, what the callee's own
signature allows: the options and intervals of a scikit-learn estimator's `_parameter_constraints`, the
`{'a', 'b'}` option lists of a numpydoc docstring, grids over a declared interval when the default is
None. Menus are built by reading signatures, never by calling the callee.

Safety: a callee is imported only when its top-level package is one of SAFE_PACKAGES (installed
libraries whose import runs no code of the program under search); the program's own functions are read
from its syntax tree. Not done: values that are not Python literals (arrays, callables, objects).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

MENU_FACTORS = (0.25, 0.5, 0.8, 0.9, 1.1, 1.25, 2.0, 4.0)
"""A numeric constant's new value is its value times one of these (`value_menu`). The steps of 10% are
the fine moves: with 20% the smallest, a quadrature point at 0.8 whose best value alone is 0.87 could only
go to 0.64 or 1.0, both worse, and no run of either method beat that seed."""
SAFE_PACKAGES = ("numpy", "sklearn", "scipy")
"""Callees from these packages are imported to read their signatures."""
INT_GRID = (1, 2, 3, 4, 6, 8, 16, 32)
"""Integers offered to a parameter whose default is None and whose constraints allow integers."""
REAL_GRID = (0.001, 0.01, 0.1, 0.3, 0.5, 0.8, 1.0)
"""Reals offered to a parameter whose default is None and whose constraints allow reals."""
SEEDS = (0, 1, 42)
"""Values offered to a `random_state`."""
SKIP = frozenset(
    {"n_jobs", "verbose", "copy", "copy_X", "warm_start", "memory", "out", "dtype", "axis", "order",
     "where", "casting", "subok", "signature", "device", "like", "monotonic_cst", "verbose_feature_names_out",
     "keepdims"}
)  # fmt: skip
"""Parameters never offered: they change resources, logging or array layout, not the result (`keepdims`
of circle-packing's `np.linalg.norm` was drawn again and again, and its programs crashed on the new shape)."""
NUMPY_SHAPE = frozenset({"step"})
"""numpy parameters that set how many elements an array has as a side effect (`np.arange(n)`'s step):
offered only where the call sets them, since the program's own sizes rest on the default (4 of 9 failed experiments of one
bin-packing run were `tune step`, each a crash)."""
MENU_MAX = 10
NOTHING = object()
"""The default of a parameter that has none (or whose default is not a literal)."""


def value_menu(value: int | float) -> list[int | float]:
    """The values a numeric constant may move to: `value` times each of MENU_FACTORS (ints rounded, kept
    >= 1 where positive, plus steps of one and two: DEGREE = 1 has 2, 3 and 4), or small magnitudes of
    both signs for a zero; every entry differs from `value`. The executor's grammar offers these
    (`constant_menus`), and the random-mutation baseline draws from them: both act over the same values.
    Ordered coarse to fine, as a compass search tries its steps: doubling and halving first, then x1.25
    and x0.8, then x1.1 and x0.9, the extreme x4 and x0.25 last (`_step_rank`), for a model that takes
    early entries. The 135M default does not: its picks follow the digits, not the position (it favours
    the smaller values: in one circle-packing run with this order, 4 of 5 decreases took x0.25, the last
    entry, and 3 of 5 increases x1.25 or x1.1), so for it the order changes little."""
    out: list[int | float]
    if value == 0:
        out = (
            [-2, -1, 1, 2] if isinstance(value, int) else [s * 10.0**e for e in (-3, -2, -1) for s in (1, -1)]
        )
    elif isinstance(value, int):
        out = [max(round(value * f), 1) if value > 0 else round(value * f) for f in MENU_FACTORS]
        steps = (-2, -1, 1, 2) if value > 2 or value < 0 else (1, 2)  # a positive int stays >= 1
        out += [value + d for d in steps]
    else:
        out = [float(f"{value * f:.4g}") for f in MENU_FACTORS]
    return sorted({v for v in out if v != value}, key=lambda v: (_step_rank(value, v), v))


STEP_LEVELS = ((2.0, 0.5), (1.25, 0.8), (1.1, 0.9), (4.0, 0.25))
"""The compass's step sizes up and down, coarse to fine, then the extreme one (`ExecutorConfig.compass`)."""


def step_level(value: int | float, new: int | float) -> int:
    """The index of the `STEP_LEVELS` entry nearest (in log scale) to a move from `value` to `new`; 0 for
    a move from zero or across it."""
    if value == 0 or new / value <= 0:
        return 0
    r = math.log(new / value)
    return min(range(len(STEP_LEVELS)), key=lambda i: min(abs(r - math.log(f)) for f in STEP_LEVELS[i]))


def _step_rank(value: int | float, new: int | float) -> float:
    """How far a move from `value` to `new` is from a doubling or a halving, in log scale (0 for x2 and
    x0.5); a move from zero or across zero ranks by magnitude alone."""
    if value == 0 or new / value <= 0:
        return abs(new)
    return abs(abs(math.log(new / value)) - math.log(2))


@dataclass
class Param:
    """One keyword-settable parameter of a callee."""

    name: str
    default: Any = NOTHING
    constraints: list = field(default_factory=list)
    """scikit-learn's constraint objects for it (empty when the callee declares none)."""
    options: list[str] = field(default_factory=list)
    """String options its docstring lists (`kind : {'quicksort', 'stable'}`)."""


@dataclass
class Signature:
    params: list[Param]
    """Keyword-settable parameters, positional ones first, in signature order."""
    positional: int
    """How many leading entries of `params` a positional argument may fill (then not set by keyword)."""
    posonly: int = 0
    """Positional-only parameters before them (not in `params`)."""
    open: bool = False
    """The callee takes **kwargs: any keyword name is accepted."""


@lru_cache(maxsize=256)
def resolve(qualname: str) -> Any:
    """The object named `numpy.argsort` or `sklearn.tree.DecisionTreeRegressor`, imported only from
    SAFE_PACKAGES; None when it cannot be (another package, a missing name, a failing import)."""
    parts = qualname.split(".")
    if parts[0] not in SAFE_PACKAGES:
        return None
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except Exception:  # noqa: BLE001 (not a module, or a library that fails to import: no menu)
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def _doc_options(doc: str | None, name: str) -> list[str]:
    m = re.search(rf"^\s*{re.escape(name)}\s*:\s*\{{([^}}]*)\}}", doc or "", re.M)
    return re.findall(r"['\"]([^'\"]+)['\"]", m.group(1)) if m else []


@lru_cache(maxsize=256)
def library_signature(qualname: str) -> Signature | None:
    """The keyword parameters of a library callee (a class's `__init__`), with their defaults, the
    constraints scikit-learn declares and the docstring's options; None when it cannot be read (a numpy
    ufunc has no signature)."""
    obj = resolve(qualname)
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    constraints = getattr(obj, "_parameter_constraints", None) or {}
    doc, params, positional, posonly, open_ = inspect.getdoc(obj), [], 0, 0, False
    for p in sig.parameters.values():
        open_ = open_ or p.kind is p.VAR_KEYWORD
        posonly += p.kind is p.POSITIONAL_ONLY
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            continue
        positional += p.kind is p.POSITIONAL_OR_KEYWORD
        default = NOTHING if p.default is p.empty or not _literal(p.default) else p.default
        if qualname.startswith("numpy.") and p.name in NUMPY_SHAPE:
            default = NOTHING  # moved only where the call sets it
        params.append(Param(p.name, default, list(constraints.get(p.name, [])), _doc_options(doc, p.name)))
    return Signature(params, positional, posonly, open_)


def source_signature(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Signature:
    """The keyword parameters of a function of the program itself, read from its syntax tree."""
    args = fn.args
    plain = [*args.posonlyargs, *args.args]
    defaults = [NOTHING] * (len(plain) - len(args.defaults)) + list(args.defaults)
    pairs = list(zip(plain, defaults)) + list(zip(args.kwonlyargs, args.kw_defaults))
    doc, params = ast.get_docstring(fn), []
    for arg, node in pairs[len(args.posonlyargs) :]:
        default = NOTHING
        if isinstance(node, ast.expr):
            try:
                default = ast.literal_eval(node)
            except (ValueError, SyntaxError, TypeError):
                default = NOTHING
        params.append(Param(arg.arg, default, [], _doc_options(doc, arg.arg)))
    return Signature(params, len(args.args), len(args.posonlyargs), args.kwarg is not None)


def _literal(value: Any) -> bool:
    try:
        return ast.literal_eval(repr(value)) == value and type(value) in (int, float, str, bool, type(None))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False


def allowed(param: Param, value: Any) -> bool:
    """Whether scikit-learn's declared constraints accept `value` (any value when none are declared)."""
    if not param.constraints:
        return True
    try:
        from sklearn.utils._param_validation import make_constraint
    except ImportError:
        return True
    for c in param.constraints:
        try:
            if make_constraint(c).is_satisfied_by(value):
                return True
        except Exception:  # noqa: BLE001 (a constraint this version cannot build: not a reason to refuse)
            continue
    return False


def _from_constraints(param: Param) -> tuple[list[str], list[Any]]:
    """(string options, other values) that the declared constraints suggest."""
    words: list[str] = []
    values: list[Any] = []
    for c in param.constraints:
        kind = getattr(c, "type", None)
        if getattr(c, "options", None) is not None and kind is str:
            words += sorted(c.options - getattr(c, "deprecated", set()))
        elif c == "random_state":
            values += SEEDS
        elif c == "boolean":
            values += [True, False]
        elif kind is not None and hasattr(c, "left"):
            values += INT_GRID if getattr(kind, "__name__", "") == "Integral" else REAL_GRID
    return words, values


def param_menu(param: Param, current: Any = NOTHING) -> list[str]:
    """Source texts of the values `param` may be set to, given its current value in the call (NOTHING
    when the call does not set it): around the current value (or the default), the options and
    intervals the callee declares, and the default itself when the call sets another value (which
    removes the keyword). Empty for a skipped parameter or one without a literal value to start from."""
    if param.name in SKIP or param.name.startswith("_"):
        return []
    base = param.default if current is NOTHING else current
    if base is NOTHING:
        return []
    words, values = _from_constraints(param)
    words = param.options + words
    cands: list[Any] = [not base] if isinstance(base, bool) else []
    if isinstance(base, int | float) and not isinstance(base, bool):
        cands += value_menu(base) + words
    elif base is None:  # nothing to scale: the declared options and grids
        cands += words + values
    elif isinstance(base, str):
        cands += words
    if param.name == "random_state":
        cands += SEEDS
    out = [v for v in cands if not (v == base and type(v) is type(base)) and allowed(param, v)]
    texts = list(dict.fromkeys(repr(v) for v in out))[:MENU_MAX]
    if current is not NOTHING and param.default is not NOTHING and repr(param.default) != repr(current):
        texts.append(repr(param.default))
    return list(dict.fromkeys(texts))
