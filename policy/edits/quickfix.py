"""Quick fixes for a program that crashed on a name: what an editor offers a programmer, offered to a
repair before any model call.

A repair starts from the failed program (`search.investigation.followups`). When that program crashed
with `NameError: name 'X' is not defined`, two fixes are mechanical: the name Python itself suggests
(`Did you mean: 'Y'?`, a misspelt constant; where the message came without it, the program's own
closest name), or an import of X from the standard library module that
defines it (`from statistics import median`). With the 135M default, a repair of a median filter written
without its import, implemented again from the parent, came back as a knob step (rmse 0.1847 against the
parent's 0.1843; `tasks/recovery/scenarios.toml`, lo-sm-median-import). Each fix is a whole program, parsed before it is offered; the executor evaluates it like an edit (it
costs an evaluation, and the model's actions follow if it fails).
"""

from __future__ import annotations

import ast
import difflib
import importlib
import io
import keyword
import re
import tokenize

NAME_ERROR = re.compile(r"NameError: name '(\w+)' is not defined(?:\. Did you mean: '(\w+)'\?)?")
MODULES = ("math", "statistics", "random", "itertools", "functools", "collections", "operator", "bisect",
           "heapq", "fractions", "string")  # fmt: skip
"""Standard library modules an import fix may name, in the order they are tried."""


def name_fixes(text: str, reason: str) -> list[tuple[str, str]]:
    """(label, fixed program) for a crash on an undefined name in `text`, best first; none when `reason`
    is not such a crash or no fix parses."""
    m = NAME_ERROR.search(reason or "")
    if m is None or not _uses(text, m.group(1)):
        return []
    name, suggested = m.groups()
    fixes = []
    if suggested:
        fixes.append((f"rename {name} to {suggested}", _renamed(text, name, suggested)))
    for module in MODULES:
        if hasattr(importlib.import_module(module), name):
            fixes.append((f"from {module} import {name}", _imported(text, f"from {module} import {name}")))
            break
    if not suggested and (near := _nearest(text, name)):
        fixes.append((f"rename {name} to {near}", _renamed(text, name, near)))
    return [(label, fixed) for label, fixed in fixes if fixed != text and _parses(fixed)]


def _nearest(text: str, name: str) -> str | None:
    """The program's own name closest to `name`, as Python's suggestion would pick it (`keep` for a list
    named `kept`), for a crash whose message came without one: Python 3.11 suggests no name for a
    function's misspelt local (`len(keep)` beside `kept`), and a task's evaluator may word crashes its own
    way."""
    names = {t.string for t in _tokens(text) if t.type == tokenize.NAME and not keyword.iskeyword(t.string)}
    names.discard(name)
    near = difflib.get_close_matches(name, sorted(names), n=1, cutoff=0.7)
    return near[0] if near else None


def _uses(text: str, name: str) -> bool:
    return any(t.type == tokenize.NAME and t.string == name for t in _tokens(text))


def _tokens(text: str) -> list[tokenize.TokenInfo]:
    try:
        return list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return []


def _renamed(text: str, old: str, new: str) -> str:
    """`text` with every name token `old` written `new` (strings and comments untouched)."""
    lines = text.splitlines(keepends=True)
    for t in reversed(_tokens(text)):
        if t.type == tokenize.NAME and t.string == old:
            row, col = t.start[0] - 1, t.start[1]
            lines[row] = lines[row][:col] + new + lines[row][col + len(old) :]
    return "".join(lines)


def _imported(text: str, line: str) -> str:
    """`text` with the import placed after its docstring and its `__future__` imports."""
    try:
        body = ast.parse(text).body
    except SyntaxError:
        return text
    at = 0
    for stmt in body:
        docstring = isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and stmt is body[0]
        future = isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"
        if not (docstring or future):
            break
        at = stmt.end_lineno or at
    lines = text.splitlines(keepends=True)
    return "".join([*lines[:at], line + "\n", *lines[at:]])


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
        return True
    except SyntaxError:
        return False
