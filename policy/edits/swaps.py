"""Swaps among siblings: a called library class or function replaced by another of the same kind.

A program that returns `DecisionTreeClassifier(random_state=0)` can tune the tree's keywords, but the
move that pays may be another classifier altogether. A swap is typed like every edit a 135M model makes:
the call is named as in `policy.edits.keywords`, and the new callee is an entry of a menu built by introspection.
Siblings of a scikit-learn estimator are the estimators of the same type (`all_estimators`' classifier,
regressor, cluster or transformer), with the same input and target tags (a multi-task regressor needs a
2-d target; isotonic regression a 1-d input), from the estimator's own module and SWAP_MODULES, that
construct with their defaults without a deprecation warning and pass their own parameter validation.
Siblings of a numpy (or scipy) function are the public functions of the module it came from with the
same required parameters and the same `axis` / `keepdims` / `kind` parameters (`np.mean`: the other
reductions; `np.argsort`: `np.sort`).

The call's keywords were chosen for the old callee: a keyword the sibling does not take, or whose literal
value its declared constraints refuse, is dropped (it is not a reason to withhold the sibling: a seed's
`random_state=0` would otherwise hide every estimator without a seed). A sibling is offered only when
the call's positional and kept keyword arguments bind to its signature and, for a class, when it
constructs and validates with the kept literal values. The swap adds `from <module> import <Name>`,
replacing the old import when the old name is no longer used; a dotted callee (`np.mean`) keeps its
prefix (`np.median`). Not done: swaps of the program's own functions, of methods, or across modules
other than those listed.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from itertools import zip_longest
from typing import Any

from arts.policy.edits.keywords import imports, named_calls, remove_keyword
from arts.policy.edits.menus import allowed, library_signature, resolve
from arts.policy.edits.targets import constant_nodes, function_nodes, parse, span

SWAP_MODULES = (
    "sklearn.ensemble", "sklearn.linear_model", "sklearn.tree", "sklearn.neighbors", "sklearn.svm",
    "sklearn.naive_bayes", "sklearn.discriminant_analysis",
)  # fmt: skip
"""Public scikit-learn modules whose estimators are siblings of an estimator from any of them."""
KINDS = ("classifier", "regressor", "cluster", "transformer")
SWAP_MAX = 32
"""At most this many siblings per call, taken in turns from its own module and SWAP_MODULES."""
FUNCTION_KIND = ("axis", "keepdims", "kind")
"""Parameters a sibling function must have exactly when the callee has them."""


@dataclass
class SwapSite:
    name: str
    """The call's name (`policy.calls.named_calls`)."""
    node: ast.Call
    callee: str
    """The callee as written (`DecisionTreeClassifier`, `np.mean`)."""
    menu: dict[str, str]
    """The new callee as it will be written → its qualified name, for each sibling offered."""


def _public(obj: Any) -> str | None:
    """`sklearn.ensemble.RandomForestClassifier` for the class defined in `sklearn.ensemble._forest`: the
    shortest public module path that exports the object."""
    parts = obj.__module__.split(".")
    for i in range(2, len(parts) + 1):
        module = ".".join(parts[:i])
        if any(p.startswith("_") for p in parts[1:i]):
            break
        try:
            if getattr(importlib.import_module(module), obj.__name__, None) is obj:
                return f"{module}.{obj.__name__}"
        except Exception:  # noqa: BLE001 (a module that fails to import exports nothing)
            continue
    return None


def _builds(cls: type, *args: Any, **kwargs: Any) -> bool:
    """Whether an estimator constructs with `args` and `kwargs` and passes its own parameter validation,
    without a warning (a deprecated class warns when built)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            est = cls(*args, **kwargs)
            if hasattr(est, "_validate_params"):
                est._validate_params()
        return True
    except Exception:  # noqa: BLE001 (any failure to build means: not offered)
        return False


def _tags(cls: type) -> tuple:
    try:
        from sklearn.utils import get_tags

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = get_tags(cls())
        return t.input_tags.two_d_array, t.input_tags.one_d_array, t.target_tags.single_output
    except Exception:  # noqa: BLE001 (no tags: compared as such)
        return ()


def _estimator_siblings(cls: type) -> tuple[str, ...]:
    try:
        from sklearn.base import BaseEstimator
        from sklearn.utils import all_estimators
    except ImportError:
        return ()
    if not issubclass(cls, BaseEstimator) or (home := _public(cls)) is None:
        return ()
    for kind in KINDS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pairs = all_estimators(type_filter=kind)
        if any(c is cls for _, c in pairs):
            break
    else:
        return ()
    by_module: dict[str, list[str]] = {m: [] for m in (home.rsplit(".", 1)[0], *SWAP_MODULES)}
    for _, c in sorted(pairs):
        q = _public(c) if c is not cls else None
        if q and q.rsplit(".", 1)[0] in by_module and _tags(c) == _tags(cls) and _builds(c):
            by_module[q.rsplit(".", 1)[0]].append(q)
    # taken in turns from each module (its own first), so that one large module cannot fill the menu
    turns = zip_longest(*by_module.values())
    return tuple(q for turn in turns for q in turn if q is not None)[:SWAP_MAX]


def _function_kind(fn: Any) -> tuple | None:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    plain = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    required = tuple(p.name for p in params if p.default is p.empty and p.kind in plain)
    names = {p.name for p in params}
    return required, tuple(k in names for k in FUNCTION_KIND)


def _function_siblings(qualname: str, fn: Any) -> tuple[str, ...]:
    module_name = qualname.rsplit(".", 1)[0]
    module, kind = resolve(module_name), _function_kind(fn)
    if not inspect.ismodule(module) or kind is None or not kind[0]:
        return ()
    found, seen = [], {id(fn)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in sorted(n for n in dir(module) if not n.startswith("_")):
            obj = getattr(module, name, None)
            if obj is None or inspect.isclass(obj) or not callable(obj) or id(obj) in seen:
                continue
            seen.add(id(obj))  # an alias (np.amax of np.max) is offered once
            if _function_kind(obj) == kind:
                found.append(f"{module_name}.{name}")
    return tuple(sorted(found, key=lambda q: (len(q), q))[:SWAP_MAX])  # the short, common names first


@lru_cache(maxsize=128)
def siblings(qualname: str) -> tuple[str, ...]:
    """Qualified names of the siblings of a library class or function (not itself); empty when it has
    none or cannot be imported from `policy.menus.SAFE_PACKAGES`."""
    obj = resolve(qualname)
    if obj is None:
        return ()
    return _estimator_siblings(obj) if inspect.isclass(obj) else _function_siblings(qualname, obj)


def _literal(node: ast.expr) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False, None


def kept_keywords(qualname: str, call: ast.Call) -> list[str]:
    """The keywords of `call` that the callee `qualname` takes, with a value its constraints accept."""
    sig = library_signature(qualname)
    if sig is None:
        return []
    params = {p.name: p for p in sig.params}
    out = []
    for kw in call.keywords:
        if kw.arg is None or (kw.arg not in params and sig.open):  # **options, or a callee taking any
            out.append(kw.arg)
        elif kw.arg in params:
            is_literal, value = _literal(kw.value)
            if not is_literal or allowed(params[kw.arg], value):
                out.append(kw.arg)
    return out


def _value(node: ast.expr, constants: dict[str, Any]) -> tuple[bool, Any]:
    """A literal argument's value, or a module constant's when the argument names one."""
    if isinstance(node, ast.Name):
        return (True, constants[node.id]) if node.id in constants else (False, None)
    return _literal(node)


def _fits(qualname: str, call: ast.Call, constants: dict[str, Any] | None = None) -> bool:
    """Whether the call's arguments, less the dropped keywords, bind to the sibling (and, for a class
    whose arguments are all literals or module constants (`constants`: name -> value), whether it builds
    with them: on friedman, `PolynomialFeatures(DEGREE)` offered `Normalizer`, `MinMaxScaler` and
    `LinearDiscriminantAnalysis`, and each failed its evaluation on `DEGREE` as its first parameter)."""
    obj, kept = resolve(qualname), kept_keywords(qualname, call)
    if any(isinstance(a, ast.Starred) for a in call.args) or None in kept:
        return True  # the arguments are not known here: the evaluation decides
    try:
        inspect.signature(obj).bind(*call.args, **dict.fromkeys(kept))
    except TypeError:
        return False
    except ValueError:
        return True  # no signature to bind to
    args = [_value(a, constants or {}) for a in call.args]
    values = [_value(kw.value, constants or {}) for kw in call.keywords if kw.arg in kept]
    if inspect.isclass(obj) and all(ok for ok, _ in args + values):
        return _builds(obj, *(v for _, v in args), **{kw: v for kw, (_, v) in zip(kept, values)})
    return True


def _bound(tree: ast.Module) -> set[str]:
    """Names the module binds at top level (imports, functions, classes, assignments)."""
    out = set(imports(tree))
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(stmt.name)
        for node in ast.walk(stmt) if isinstance(stmt, ast.Assign | ast.AnnAssign) else ():
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                out.add(node.id)
    return out


def swap_sites(text: str) -> list[SwapSite]:
    """The calls of a Python source whose library callee has siblings that fit the call, in order."""
    tree = parse(text)
    if tree is None:
        return []
    names, local, bound, out = imports(tree), function_nodes(tree), _bound(tree), []
    constants = {
        n: v for n, node in constant_nodes(tree).items() if "#" not in n for ok, v in [_literal(node)] if ok
    }
    for name, callee, call in named_calls(tree):
        head, _, rest = callee.partition(".")
        if callee in local or head not in names:
            continue
        menu = {}
        for q in siblings(names[head] + (f".{rest}" if rest else "")):
            if rest and q.startswith(names[head] + "."):
                written = head + q[len(names[head]) :]  # np.mean -> np.median
            else:
                written = q.rsplit(".", 1)[1]
                if written in bound and names.get(written) != q:
                    continue  # the name means something else in this program
            if _fits(q, call, constants):
                menu[written] = q
        if menu:
            out.append(SwapSite(name, call, callee, menu))
    return out


def _site(text: str, call: str) -> SwapSite:
    site = next((s for s in swap_sites(text) if s.name == call), None)
    if site is None:
        raise LookupError(f"no call {call!r} with siblings to swap to; pick one of the calls listed")
    return site


def _node(text: str, call: str) -> ast.Call:
    return next(node for name, _, node in named_calls(parse(text)) if name == call)


def swap_call(text: str, call: str, to: str) -> str:
    """`text` with the callee of the call named `call` replaced by its sibling `to` (as written in its
    menu): keywords the sibling does not take dropped, its import added. Raises LookupError (no such
    call, or `to` not on its menu) with a message for the model."""
    site = _site(text, call)
    if to not in site.menu:
        raise LookupError(f"{to!r} is not a sibling of {site.callee}; pick one of {', '.join(site.menu)}")
    qualname = site.menu[to]
    kept = kept_keywords(qualname, site.node)
    for kw in [k.arg for k in site.node.keywords if k.arg not in kept]:
        text = remove_keyword(text, _node(text, call), kw)
    a, b = span(text, _node(text, call).func)
    text = text[:a] + to + text[b:]
    if "." in to:
        return text  # written through a module the program already imports
    return _import(text, site.callee, qualname, to)


def _import(text: str, old: str, qualname: str, name: str) -> str:
    """`text` importing `name` from its module: in place of `from m import <old>` when `old` is no
    longer used and imported alone, else after the last top-level import."""
    tree = parse(text)
    if imports(tree).get(name) == qualname:
        return text
    line = f"from {qualname.rsplit('.', 1)[0]} import {name}"
    used = any(isinstance(n, ast.Name) and n.id == old for n in ast.walk(tree))
    stmts = [s for s in tree.body if isinstance(s, ast.Import | ast.ImportFrom)]
    for stmt in stmts:
        alone = isinstance(stmt, ast.ImportFrom) and [(a.name, a.asname) for a in stmt.names] == [(old, None)]
        if alone and not used:
            a, b = span(text, stmt)
            return text[:a] + line + text[b:]
    lines, first = text.split("\n"), tree.body[0] if tree.body else None
    doc = isinstance(first, ast.Expr) and isinstance(getattr(first.value, "value", None), str)
    at = stmts[-1].end_lineno if stmts else first.end_lineno if doc else 0
    return "\n".join([*lines[:at], line, *lines[at:]])


def swap_menus(
    files: dict[str, str], keep: Callable[[dict[str, str]], bool] | None = None
) -> dict[str, list[str]]:
    """Call name → the siblings it may swap to, over the Python files (the first file naming a call
    wins), less those whose edited program `keep` refuses; empty menus dropped."""
    out: dict[str, list[str]] = {}
    for path, text in files.items():
        for site in swap_sites(text) if path.endswith(".py") else ():
            if site.name in out:
                continue
            menu = [
                t for t in site.menu if keep is None or keep({**files, path: swap_call(text, site.name, t)})
            ]
            if menu:
                out[site.name] = menu
    return out
