"""What in a program an edit can name: its constants, functions, one-line returns and line anchors.

Found by parsing a Python file, never by running it. The executor's action schemas and appliers
(`policy.edits.apply`), its prompt, the random-mutation baseline (`policy.edits.mutation`) and the search's directed
targets all read a program through this module, so they agree on what exists: a module-level UPPER_CASE
constant (and each number of one that is a short literal list or tuple, `SIZES#1`; and the number a function
returns when that is its whole body, under the function's name), a top-level function (with its body, docstring left out), a function ending in a one-line
`return` of an expression, and a line named by its number and stripped text.
Not done: class attributes and methods (only `replace_lines` reaches inside a class), and other
languages (a file that is not Python has no targets).
"""

from __future__ import annotations

import ast
import textwrap

from pydantic import BaseModel, ConfigDict

from arts.policy.edits.expressions import visible_names
from arts.policy.edits.orderings import return_pattern

ELEMENTS = 8
"""A module-level list or tuple of at most this many numbers has each number as a target (`_elements`)."""
ANCHOR_CHARS = 72
"""An anchor keeps this many characters of its line: enough to tell lines apart, short in a grammar."""


class Targets(BaseModel):
    """The editable targets of one Python file."""

    model_config = ConfigDict(extra="forbid")
    constants: dict[str, str] = {}
    """Module-level UPPER_CASE constant → source text of its current value."""
    functions: dict[str, str] = {}
    """Top-level function → source of its body (without the docstring)."""


def parse(text: str) -> ast.Module | None:
    """The module's syntax tree; None when it does not parse."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def _offset(text: str, lineno: int, col: int) -> int:
    """Absolute string offset of an ast position (col_offset counts UTF-8 bytes)."""
    lines = text.split("\n")
    start = sum(len(line) + 1 for line in lines[: lineno - 1])
    return start + len(lines[lineno - 1].encode()[:col].decode(errors="ignore"))


def span(text: str, node: ast.AST) -> tuple[int, int]:
    """(start, end) string offsets of `node`'s source in `text`: `text[start:end]` is its source."""
    return _offset(text, node.lineno, node.col_offset), _offset(text, node.end_lineno, node.end_col_offset)


def constant_nodes(tree: ast.Module) -> dict[str, ast.expr]:
    """Module-level UPPER_CASE assignments (plain or annotated): name → value expression; a literal list
    or tuple of numbers adds each number as `NAME#k`; a top-level function whose whole body returns a
    number (`def answer(): return 0.25`) adds that number under the function's name (`returned_number`)."""
    out: dict[str, ast.expr] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            name, value = stmt.targets[0].id, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            name, value = stmt.target.id, stmt.value
        else:
            continue
        if name.isupper():  # UPPER_CASE
            out[name] = value
            out |= _elements(name, value)
    for name, fn in function_nodes(tree).items():
        if (value := returned_number(fn)) is not None:
            out.setdefault(name, value)
    return out


def _elements(name: str, value: ast.expr) -> dict[str, ast.expr]:
    """The numbers of a literal list or tuple of at most ELEMENTS numbers, each a constant of its own named
    `NAME#k` (the k-th, from 1, as `policy.edits.keywords` numbers calls): `SIZES = (64, 32)` gives SIZES#1 and
    SIZES#2, which a value menu moves one at a time."""
    if not isinstance(value, ast.List | ast.Tuple) or not 1 <= len(value.elts) <= ELEMENTS:
        return {}
    if not all(number(ast.unparse(e)) is not None for e in value.elts):
        return {}
    return {f"{name}#{k}": e for k, e in enumerate(value.elts, 1)}


def returned_number(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.expr | None:
    """The number literal a function returns when its body (docstring aside) is that one `return`: a
    constant in all but name. The README's first task is such a function; without it as a target, the
    135M default had no move to offer and wrote 5 of 5 invalid free hypotheses ("drew 0.2")."""
    body = body_statements(fn)
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return None
    value = body[0].value
    return value if number(ast.unparse(value)) is not None else None


def function_nodes(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Top-level functions (sync or async) by name; methods and nested functions are not targets."""
    return {s.name: s for s in tree.body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)}


def body_statements(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
    """The body without a leading docstring (which replace_function keeps)."""
    first = fn.body[0]
    is_doc = isinstance(first, ast.Expr) and isinstance(getattr(first.value, "value", None), str)
    return fn.body[1:] if is_doc and isinstance(first.value, ast.Constant) else fn.body


def list_targets(source: str) -> Targets:
    """Constants and top-level functions of a Python source; empty if it does not parse."""
    tree = parse(source)
    if tree is None:
        return Targets()
    constants = {name: source[slice(*span(source, v))] for name, v in constant_nodes(tree).items()}
    functions = {}
    for name, fn in function_nodes(tree).items():
        first = (body_statements(fn) or [None])[0]
        start = _offset(source, first.lineno, first.col_offset) if first else 0
        seg = source[start : _offset(source, fn.end_lineno, fn.end_col_offset)] if first else ""
        functions[name] = textwrap.dedent(" " * (first.col_offset if first else 0) + seg)
    return Targets(constants=constants, functions=functions)


def return_functions(source: str) -> list[tuple[str, list[str]]]:
    """(name, visible names) of the top-level functions whose one-line final return is arithmetic or
    builds a list (set_return targets)."""
    tree = parse(source)
    fns = function_nodes(tree) if tree else {}
    return [(n, visible_names(tree, fn)[0]) for n, fn in fns.items() if return_pattern(tree, fn)]


def anchor(lineno: int, line: str) -> str:
    """The enum value that names a line: its number and stripped text (cut to ANCHOR_CHARS)."""
    return f"{lineno} | {line.strip()}"[:ANCHOR_CHARS]


def anchors(text: str, window: tuple[int, int] | None = None, limit: int = 40) -> list[str]:
    """Anchors of the non-blank lines in `window` (1-based, inclusive), evenly thinned to `limit`."""
    lines = text.split("\n")
    lo, hi = window or (1, len(lines))
    cands = [n for n in range(max(lo, 1), min(hi, len(lines)) + 1) if lines[n - 1].strip()]
    if len(cands) > limit:
        cands = [cands[i * len(cands) // limit] for i in range(limit)]
    return [anchor(n, lines[n - 1]) for n in cands]


def number(src: str) -> int | float | None:
    """The int or float a literal's source text stands for (`3e-3`, `-2`); None for anything else
    (bools, strings, expressions)."""
    try:
        value = ast.literal_eval(src)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return value if type(value) in (int, float) else None
