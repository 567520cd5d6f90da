"""Returns that build a list: the orderings a small model can write over a function's parameters.

A function that returns an ordering of its inputs (`return list(range(len(jobs)))`, a permutation
problem's seed) has no arithmetic return for `policy.edits.expressions` to rewrite, and a 135M model asked for
a whole new body writes prose. So such a return gets its own regular grammar: the identity order
reversed (not the identity itself: the 135M default, offered it, copied a seed's `list(range(len(p)))`
into 15 of its first 16 actions, each refused as no change); `sorted(range(len(x)), key=lambda i: <key>)` with a key over the arguments at `i` (`p[i] /
w[i]`), optionally reversed; and, when the module imports numpy as np, `list(np.argsort(<expr>))` over
whole arrays, optionally reversed by `[::-1]`. Keys and array expressions are those of
`policy.edits.expressions` (names, numbers, the listed numpy calls, arithmetic), so each answer is a
well-formed permutation of `range(len(x))` over real names; whether it is a good one is the experiment.
With value menus (the small profile) the grammar is an enum of concrete orderings instead (`ordering_menu`,
less those already evaluated): under the regular grammar the 135M default answered a refused ordering
again until its actions ran out (5 valid of 15 nodes on weighted-completion).
Not covered: comprehensions with conditions, lists that are not permutations (subsets, repeats),
keys over more than one index.
"""

from __future__ import annotations

import ast
import random
import re

from arts.policy.edits.expressions import (
    OPERATORS,
    expression_menu,
    pattern,
    random_expression,
    returns,
    visible_names,
)

BUILDERS = ("list", "sorted", "reversed", "range", "np.argsort", "np.arange", "np.lexsort")
"""A one-line return calling one of these (outermost, or under a slice) builds a list or an array."""
ORDERING_MENU = 24
"""At most this many orderings on a list-building return's menu (`ordering_menu`)."""


def _callee(node: ast.expr) -> str:
    return ast.unparse(node.func) if isinstance(node, ast.Call) else ""


def builds_list(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.Return | None:
    """The function's final statement when it is a one-line `return` of a list construction (a call of
    one of BUILDERS, a list comprehension, or a slice of either) over at least one parameter."""
    last = fn.body[-1] if fn.body else None
    if not (isinstance(last, ast.Return) and last.value is not None and last.lineno == last.end_lineno):
        return None
    return last if is_list_build(last.value) and parameters(fn) else None


def is_list_build(value: ast.expr) -> bool:
    """Whether an expression is a list construction (see `builds_list`)."""
    while isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Slice):
        value = value.value
    return isinstance(value, ast.ListComp) or _callee(value) in BUILDERS


def parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    return [a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs) if a.arg != "self"]


def _index(names: list[str]) -> str:
    """The lambda's variable: `i`, or another letter when a parameter is called `i`."""
    return next(v for v in ("i", "j", "k", "idx") if v not in names)


def ordering_pattern(names: list[str], calls: list[str], numpy: bool) -> str:
    """The regular expression of a list-building return over the parameters `names`."""
    i = _index(names)
    seq = "(" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) + ")"
    key = pattern([f"{n}[{i}]" for n in names], calls)[1:-1]  # the arithmetic grammar, unanchored
    identity = rf"list\(range\(len\({seq}\)\)\)\[::-1\]"  # reversed only: the plain one changes nothing
    by_key = rf"sorted\(range\(len\({seq}\)\), key=lambda {i}: {key}(, reverse=True){{0,1}}\)"
    forms = [identity, by_key]
    if numpy:
        forms.append(
            rf"list\(np\.argsort\({pattern(names, calls, named_first=True)[1:-1]}\)(\[::-1\]){{0,1}}\)"
        )
    return "^(" + "|".join(forms) + ")$"


def ordering_menu(names: list[str], limit: int = ORDERING_MENU) -> list[str]:
    """The orderings a value menu offers for a list-building return over `names` (the small profile's
    set_return answers, one enum entry each): the identity reversed, then `sorted` by each parameter, by
    each ratio and by each product of two, each also reversed; the first three parameters only. Each is a
    permutation of `range(len(names[0]))`, so every entry runs; which one scores is the experiment."""
    i, names = _index(names), names[:3]
    keys = [f"{a}[{i}]" for a in names]
    keys += [f"{a}[{i}] / {b}[{i}]" for a in names for b in names if a != b]
    keys += [f"{a}[{i}] * {b}[{i}]" for n, a in enumerate(names) for b in names[n + 1 :]]
    seq = names[0]
    menu = [f"list(range(len({seq})))[::-1]"]
    for key in keys:
        menu += [f"sorted(range(len({seq})), key=lambda {i}: {key}{rev})" for rev in ("", ", reverse=True")]
    return menu[:limit]


def random_ordering(names: list[str], calls: list[str], numpy: bool, rng: random.Random) -> str:
    """A random expression of the same grammar (the random-mutation baseline's answer)."""
    i, seq = _index(names), rng.choice(names)
    kind = rng.choice(["identity", "key", "key", "argsort", "argsort"] if numpy else ["identity", "key"])
    if kind == "identity":
        return f"list(range(len({seq})))[::-1]"
    if kind == "key":
        key = random_expression([f"{n}[{i}]" for n in names], calls, rng)
        reverse = ", reverse=True" if rng.random() < 0.3 else ""
        return f"sorted(range(len({seq})), key=lambda {i}: {key}{reverse})"
    flip = "[::-1]" if rng.random() < 0.3 else ""
    lead = rng.choice([*names, *(f"{c}({n})" for c in calls[:2] for n in names)])
    rest = f" {rng.choice(OPERATORS)} {random_expression(names, calls, rng)}" if rng.random() < 0.7 else ""
    return f"list(np.argsort({lead}{rest}){flip})"


def return_pattern(tree: ast.Module, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The grammar of a new return of `fn` (a set_return target): arithmetic for an arithmetic return,
    an ordering for a list-building one; None when its return is neither."""
    names, calls = visible_names(tree, fn)
    if returns(fn) is not None and names:
        return pattern(names, calls)
    if builds_list(fn) is not None:
        return ordering_pattern(parameters(fn), calls, bool(calls))
    return None


def return_menu(tree: ast.Module, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str] | None:
    """The value menu of a new return of `fn` (a set_return target under value menus): the
    `expression_menu` of an arithmetic return, the `ordering_menu` of a list-building one; None when its
    return is neither (the same cases as `return_pattern`)."""
    names, _ = visible_names(tree, fn)
    if returns(fn) is not None and names:
        return expression_menu(tree, fn)
    if builds_list(fn) is not None:
        return ordering_menu(parameters(fn))
    return None


def random_return(tree: ast.Module, fn: ast.FunctionDef | ast.AsyncFunctionDef, rng: random.Random) -> str:
    """A random new return of a set_return target, under its grammar (`return_pattern`)."""
    names, calls = visible_names(tree, fn)
    if returns(fn) is not None and names:
        return random_expression(names, calls, rng)
    return random_ordering(parameters(fn), calls, bool(calls), rng)
