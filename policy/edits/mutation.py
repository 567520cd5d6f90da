"""Random mutation: the no-model baseline's action space, random edits over the executor's own actions.

The `mutate` search method changes a program without any model, so that what the scientist and the
executor add can be measured against chance over the same moves. `random_edit` draws one applicable
action of the kinds the executor may emit: a numeric constant moved to an entry of its value menu
(set_constant, the menu the executor's grammar offers), a numeric literal or an operator inside a
function rewritten as replace_lines over its line (+ and -, * and /, < and > swapped; a unary minus
dropped), a keyword argument of a call moved to an entry of its menu (set_keyword, the menus of
`policy.edits.keywords`), a called class or function swapped for a sibling (swap_call, the menus of
`policy.edits.swaps`), or a random return expression under the set_return grammar. Each action is checked
with `apply_edit`, exactly as a model's would be, before it is returned.
Not done: choosing the program to mutate or judging the result (the search's `mutate` method does).
"""

from __future__ import annotations

import ast
import copy
import random

from pydantic import BaseModel

from arts.policy.edits.apply import (
    EditError,
    ReplaceLines,
    SetConstant,
    SetKeyword,
    SetReturn,
    SwapCall,
    apply_edit,
)
from arts.policy.edits.keywords import keyword_menus
from arts.policy.edits.menus import value_menu
from arts.policy.edits.orderings import random_return, return_pattern
from arts.policy.edits.swaps import swap_menus
from arts.policy.edits.targets import anchor, function_nodes, list_targets, number, parse, span


def _perturb(value: int | float, rng: random.Random) -> int | float:
    """A random entry of the value's menu: ints stay ints; always moves."""
    return rng.choice(value_menu(value))


def _numbers(text: str, tree: ast.Module) -> list[ast.Constant]:
    """Numeric literals inside top-level functions whose source span is exactly the literal."""
    walk = (n for fn in function_nodes(tree).values() for n in ast.walk(fn))
    nodes = [n for n in walk if isinstance(n, ast.Constant) and type(n.value) in (int, float)]
    return [n for n in nodes if n.lineno == n.end_lineno and number(text[slice(*span(text, n))]) == n.value]


def _literal_edit(path: str, text: str, node: ast.Constant, src: str) -> tuple[BaseModel, str, str]:
    """(action, path, intended text): a literal replaced by `src`, as replace_lines over its line."""
    a, b = span(text, node)
    new, n = text[:a] + src + text[b:], node.lineno
    line = anchor(n, text.split("\n")[n - 1])
    return ReplaceLines(file=path, start=line, end=line, text=new.split("\n")[n - 1]), path, new


_SWAPS: dict[type, type] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.Lt: ast.Gt,
    ast.Gt: ast.Lt,
    ast.LtE: ast.GtE,
    ast.GtE: ast.LtE,
}


def _operators(tree: ast.Module) -> list[ast.expr]:
    """Single-line operator expressions inside functions: a binary or comparison operator to swap, or a
    unary minus to drop."""
    walk = (n for fn in function_nodes(tree).values() for n in ast.walk(fn))
    out: list[ast.expr] = []
    for n in walk:
        if getattr(n, "lineno", 0) != getattr(n, "end_lineno", -1):
            continue
        if isinstance(n, ast.BinOp) and type(n.op) in _SWAPS:
            out.append(n)
        elif isinstance(n, ast.Compare) and len(n.ops) == 1 and type(n.ops[0]) in _SWAPS:
            out.append(n)
        elif (
            isinstance(n, ast.UnaryOp)
            and isinstance(n.op, ast.USub)
            and not isinstance(n.operand, ast.Constant)
        ):
            out.append(n)
    return out


def _mutated(node: ast.expr) -> str:
    """The source of `node` with its operator swapped (or its unary minus dropped)."""
    if isinstance(node, ast.UnaryOp):
        return ast.unparse(node.operand)
    new = copy.deepcopy(node)
    if isinstance(new, ast.BinOp):
        new.op = _SWAPS[type(new.op)]()
    else:
        new.ops = [_SWAPS[type(new.ops[0])]()]
    return ast.unparse(new)


def _candidates(path: str, text: str, rng: random.Random) -> list[tuple[BaseModel, str, str | None]]:
    """One random (action, path, intended text or None) per kind the file offers: constant, keyword
    argument, swap of a callee, literal, operator, return expression."""
    tree = parse(text) if path.endswith(".py") else None
    if tree is None:
        return []
    out: list[tuple[BaseModel, str, str | None]] = []
    consts = {n: v for n, src in list_targets(text).constants.items() if (v := number(src)) is not None}
    if consts:
        name = rng.choice(sorted(consts))
        out.append((SetConstant(name=name, value=_perturb(consts[name], rng)), path, None))
    calls = keyword_menus({path: text})
    if calls:
        call = rng.choice(sorted(calls))
        keyword = rng.choice(sorted(calls[call]))
        out.append(
            (SetKeyword(call=call, keyword=keyword, value=rng.choice(calls[call][keyword])), path, None)
        )
    swaps = swap_menus({path: text})
    if swaps:
        call = rng.choice(sorted(swaps))
        out.append((SwapCall(call=call, to=rng.choice(swaps[call])), path, None))
    literals = _numbers(text, tree)
    if literals:
        node = rng.choice(literals)
        out.append(_literal_edit(path, text, node, repr(_perturb(node.value, rng))))
    ops = _operators(tree)
    if ops:
        node = rng.choice(ops)
        out.append(_literal_edit(path, text, node, f"({_mutated(node)})"))
    fns = [(n, fn) for n, fn in function_nodes(tree).items() if return_pattern(tree, fn)]
    if fns:
        name, fn = rng.choice(fns)
        expr = random_return(tree, fn, rng)
        out.append((SetReturn(function=name, expression=expr), path, None))
    return out


def random_edit(files: dict[str, str], rng: random.Random) -> BaseModel:
    """A random applicable action for the random-mutation baseline, from the same action space: perturb a
    numeric constant (set_constant) or a keyword argument of a call (set_keyword), swap a callee for a
    sibling (swap_call); as replace_lines over
    its line, perturb a numeric literal in a function or an operator (swap + and -, * and /, < and >; drop a unary minus); or a random return
    expression of the set_return grammar. Raises EditError when the files hold nothing to change."""
    for _ in range(20):
        cands = [c for path, text in files.items() for c in _candidates(path, text, rng)]
        if not cands:
            break
        action, path, intended = rng.choice(cands)
        try:
            new = apply_edit(files, action)
        except EditError:
            continue
        if intended is None or new[path] == intended:
            return action
    raise EditError(f"no numeric constant, literal, operator or keyword argument to mutate in {list(files)}")
