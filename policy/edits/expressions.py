"""Return expressions a small model can write: a regular grammar over the names a function can see.

A short scoring function (`priority(item, bins)`) is often the whole program worth changing, and a 135M
model asked for a new function body wrote prose or identifiers that do not exist ("actor.replace_function",
"a la prei-rai") in 12 of 12 tries. Asked instead for one expression under a regular expression that admits
only the function's parameters, the module's constants, short numbers, a few numpy calls and arithmetic,
every answer is a well-formed expression over real names; whether it is a good one is the experiment.
The same grammar gives the random-mutation baseline its random expressions (`random_expression`).
With value menus (the small profile) the answer is instead an entry of `expression_menu`, concrete
expressions over the parameters: under the free grammar the 135M default wrote `np.exp(bins) + c`
variants of the seed's worst-fit order on bin-packing in every try, never the `-bins` the grammar allows,
until its proposals were refused as already run (2 of 3 seeds ended at the seed).

Not covered: attribute access, comparisons, calls other than the listed numpy ones, keyword arguments,
nesting deeper than one pair of parentheses.
"""

from __future__ import annotations

import ast
import random
import re

NUMPY_CALLS = ("np.log", "np.sqrt", "np.abs", "np.exp", "np.square")
"""Elementwise numpy calls offered when the module imports numpy as np."""
OPERATORS = ("+", "-", "*", "/")
MAX_TERMS = 4
EXPRESSION_MENU = 24
"""At most this many expressions on an arithmetic return's menu (`expression_menu`)."""
MENU_CALLS = ("np.log", "np.sqrt", "np.square")
"""The calls an expression menu applies to a name: defined wherever the name is positive (no `np.exp`,
which overflows, and no `np.abs`, which a positive name makes the identity)."""


_NOT_ARITHMETIC = (
    ast.Tuple, ast.List, ast.Dict, ast.Set, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
    ast.JoinedStr, ast.Compare, ast.BoolOp, ast.Lambda, ast.IfExp,
)  # fmt: skip


def returns(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.Return | None:
    """The function's final statement when it is a one-line `return <expr>` whose value an expression of
    the grammar could replace: not a tuple, container, string, comparison, conditional or a call that
    builds an object (`return centers, radii` replaced by one number crashed its caller in every try of
    the 135M default; so did `return make_pipeline(...)` replaced by `DEGREE`)."""
    last = fn.body[-1] if fn.body else None
    if not (isinstance(last, ast.Return) and last.value is not None and last.lineno == last.end_lineno):
        return None
    value = last.value
    if isinstance(value, _NOT_ARITHMETIC) or (
        isinstance(value, ast.Constant) and isinstance(value.value, str)
    ):
        return None
    if isinstance(value, ast.Call) and not _numeric_call(value):  # builds an object (a model, a pipeline)
        return None
    return last


def _numeric_call(call: ast.Call) -> bool:
    """A call of numpy or math (`np.arange(...)`), whose result an arithmetic expression can replace."""
    func = call.func
    return (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id in ("np", "numpy", "math")
    )


def shape_error(fn: ast.FunctionDef | ast.AsyncFunctionDef, old: ast.expr, new: ast.expr) -> str | None:
    """Why `new` cannot stand in for the return value `old` of `fn`, or None. A return that used names
    must still use one (a constant ignores the inputs), and a function annotated to return the type of
    some of its parameters (`bins: np.ndarray -> np.ndarray`) must use one of those parameters (else it
    returns a scalar where an array is expected). Checked before an evaluation is spent."""
    used = {n.id for n in ast.walk(new) if isinstance(n, ast.Name)}
    if not used and any(isinstance(n, ast.Name) for n in ast.walk(old)):
        return f"{fn.name} would return a constant, which ignores its inputs; use a name in the expression"
    if fn.returns is not None:
        kind = ast.unparse(fn.returns)
        args = (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)
        same = [a.arg for a in args if a.annotation is not None and ast.unparse(a.annotation) == kind]
        if same and not used & set(same):
            return f"{fn.name} returns {kind}: the expression must use {' or '.join(same)} (of that type)"
    return None


def visible_names(
    tree: ast.Module, fn: ast.FunctionDef | ast.AsyncFunctionDef
) -> tuple[list[str], list[str]]:
    """(names, calls): the function's parameters and the module's UPPER_CASE constants; the numpy calls
    when `import numpy as np` is present."""
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs) if a.arg != "self"]
    consts = [
        t.id
        for s in tree.body
        if isinstance(s, ast.Assign)
        for t in s.targets
        if isinstance(t, ast.Name) and t.id.isupper()
    ]
    numpy = any(
        isinstance(s, ast.Import) and any(a.name == "numpy" and a.asname == "np" for a in s.names)
        for s in tree.body
    )
    return list(dict.fromkeys(params + consts)), list(NUMPY_CALLS) if numpy else []


def pattern(names: list[str], calls: list[str], named_first: bool = False) -> str:
    """The regular expression of an expression: factors joined by ` op `, a factor being an optionally
    negated name, number, call of a listed function on a name, or a parenthesised group of 2-3 terms.
    With `named_first`, the first factor is a name or a call on one (the expression is then never a
    constant: `np.argsort(3)` is no ordering of anything)."""
    name = "(" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) + ")"
    num = r"[0-9]{1,3}(\.[0-9]{1,3}){0,1}"  # `{0,1}`, not `?`: see `policy.scientist.directed_pattern`
    atoms = [name, num] + ([f"({'|'.join(re.escape(c) for c in calls)})\\({name}\\)"] if calls else [])
    atom = "(" + "|".join(atoms) + ")"
    op = r" [-+*/] "
    group = rf"\(-?{atom}({op}-?{atom}){{1,2}}\)"
    factor = rf"-?({atom}|{group})"
    first = "-?(" + "|".join([name] + atoms[2:]) + ")" if named_first else factor
    return rf"^{first}({op}{factor}){{0,{MAX_TERMS - 1}}}$"


def random_expression(names: list[str], calls: list[str], rng: random.Random) -> str:
    """A random expression of the same grammar (the random-mutation baseline's answer)."""

    def atom() -> str:
        kind = rng.random()
        if kind < 0.6 or not (calls or kind < 0.85):
            return rng.choice(names)
        if kind < 0.85 or not calls:
            return rng.choice(["0.5", "1", "2", "3", "10", f"{rng.uniform(0, 10):.2f}"])
        return f"{rng.choice(calls)}({rng.choice(names)})"

    def factor() -> str:
        sign = "-" if rng.random() < 0.3 else ""
        if rng.random() < 0.2:
            inner = f" {rng.choice(OPERATORS)} ".join(atom() for _ in range(2))
            return f"{sign}({inner})"
        return sign + atom()

    return f" {rng.choice(OPERATORS)} ".join(factor() for _ in range(rng.randint(1, 3)))


def expression_menu(
    tree: ast.Module, fn: ast.FunctionDef | ast.AsyncFunctionDef, limit: int = EXPRESSION_MENU
) -> list[str]:
    """The expressions a value menu offers for an arithmetic return of `fn` (the small profile's
    set_return answers, one enum entry each), over its first three visible names: each name and its
    negation, then for each pair the difference and the ratio both ways and the product and its negation,
    then the `MENU_CALLS` of each name, each also negated. Entries that `shape_error` refuses (a constant,
    or no array where the function returns one) are left out; no entry divides by a difference, which is
    zero somewhere (`1 / (bins - item)` at an exact fit). Each is of the `pattern` grammar; which one
    scores is the experiment."""
    names, calls = visible_names(tree, fn)
    names, calls = names[:3], [c for c in MENU_CALLS if c in calls]
    menu = [e for a in names for e in (a, f"-{a}")]
    menu += [e for a in names for b in names if a != b for e in (f"{a} - {b}", f"{a} / {b}")]
    menu += [e for n, a in enumerate(names) for b in names[n + 1 :] for e in (f"{a} * {b}", f"-({a} * {b})")]
    menu += [e for c in calls for a in names for e in (f"{c}({a})", f"-{c}({a})")]
    old = returns(fn)
    if old is None:
        return []
    fits = [e for e in menu if shape_error(fn, old.value, ast.parse(e, mode="eval").body) is None]
    return fits[:limit]
