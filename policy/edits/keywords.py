"""The calls of a program whose keyword arguments an edit can set, and the text edit that sets one.

A program that builds a library object (`return DecisionTreeRegressor(random_state=0)`) has no constant
to move and no arithmetic return to rewrite; what there is to change are the call's keyword arguments.
A call is a target when its callee's signature can be read (a library callee imported by the program
from `policy.menus.SAFE_PACKAGES`, or a function of the program itself) and at least one of its keyword
parameters has a value menu. A call is named by its callee as written (`DecisionTreeRegressor`,
`np.argsort`), with `#2`, `#3` for later calls of the same callee in the file.
The edit is textual (the rest of the line, comments and layout stay): a keyword's value is replaced,
a new keyword is appended after the last argument, and setting a keyword back to its default removes it.
Not done: positional arguments, calls whose callee is not a plain (dotted) name.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from arts.policy.edits.menus import NOTHING, Signature, library_signature, param_menu, source_signature
from arts.policy.edits.targets import function_nodes, parse, span

MAX_CALLS = 8
"""At most this many calls of a file are targets (the first ones): each adds branches to the grammar."""


@dataclass
class CallSite:
    name: str
    """The callee as written, `#k` added for the k-th call of the same callee in the file."""
    node: ast.Call
    signature: Signature
    menus: dict[str, list[str]]
    """Keyword parameter → source texts of the values it may be set to (non-empty menus only)."""


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and (head := _dotted(node.value)):
        return f"{head}.{node.attr}"
    return None


def imports(tree: ast.Module) -> dict[str, str]:
    """Local name → the qualified name it stands for, from the module's top-level imports."""
    out: dict[str, str] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
            for a in stmt.names:
                out[a.asname or a.name] = f"{stmt.module}.{a.name}"
    return out


def _signature(callee: str, tree: ast.Module, names: dict[str, str]) -> Signature | None:
    local = function_nodes(tree)
    if callee in local:
        return source_signature(local[callee])
    head, _, rest = callee.partition(".")
    if head not in names:
        return None
    return library_signature(names[head] + (f".{rest}" if rest else ""))


_EXPRESSION = object()


def _current(call: ast.Call, keyword: str) -> object:
    """The literal the call passes for `keyword`; NOTHING when it passes none, _EXPRESSION for a
    non-literal (no menu around it)."""
    for kw in call.keywords:
        if kw.arg == keyword:
            try:
                return ast.literal_eval(kw.value)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                return _EXPRESSION
    return NOTHING


def named_calls(tree: ast.Module) -> list[tuple[str, str, ast.Call]]:
    """(name, callee, node) of every call whose callee is a plain or dotted name, in source order: the
    name is the callee as written, `#k` added for the k-th call of the same callee."""
    calls = sorted(
        (n for n in ast.walk(tree) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset)
    )
    seen: dict[str, int] = {}
    out = []
    for call in calls:
        callee = _dotted(call.func)
        if callee is not None:
            seen[callee] = seen.get(callee, 0) + 1
            out.append((callee if seen[callee] == 1 else f"{callee}#{seen[callee]}", callee, call))
    return out


def call_sites(text: str) -> list[CallSite]:
    """The calls of a Python source whose keyword arguments have menus, in source order."""
    tree = parse(text)
    if tree is None:
        return []
    names, out = imports(tree), []
    for name, callee, call in named_calls(tree):
        sig = _signature(callee, tree, names)
        if sig is None:
            continue
        starred = any(isinstance(a, ast.Starred) for a in call.args)
        filled = min(sig.positional, 10**6 if starred else max(len(call.args) - sig.posonly, 0))
        menus = {}
        for i, p in enumerate(sig.params):
            current = _current(call, p.name)
            if i < filled or current is _EXPRESSION:
                continue
            if menu := param_menu(p, current):
                menus[p.name] = menu
        if menus:
            out.append(CallSite(name, call, sig, menus))
        if len(out) >= MAX_CALLS:
            break
    return out


def call_source(text: str, site: Any, limit: int = 60) -> str:
    """The call's source (of a site with a `node`) on one line, cut to `limit` characters (for a prompt)."""
    src = " ".join(text[slice(*span(text, site.node))].split())
    return src if len(src) <= limit else src[: limit - 4] + "...)"


def set_keyword(text: str, call: str, keyword: str, value: str) -> str:
    """`text` with `keyword=value` set in the call named `call`: the value replaced if the keyword is
    there, the keyword appended if not, removed if `value` is the parameter's default. Raises
    LookupError (no such call or parameter) or ValueError (a value that is not an expression, or the
    default of a keyword the call does not set), with a message for the model."""
    try:
        ast.parse(value, mode="eval")
    except SyntaxError as e:
        raise ValueError(f"value {value!r} is not a Python expression ({e.msg}); give a literal") from None
    site = next((s for s in call_sites(text) if s.name == call), None)
    if site is None:
        raise LookupError(f"no call {call!r} with keyword arguments to set; pick one of the calls listed")
    params = {p.name: p for p in site.signature.params}
    if keyword not in params and not site.signature.open:
        raise LookupError(f"{call} takes no keyword {keyword!r}; it takes {', '.join(site.menus)}")
    node, default = site.node, params[keyword].default if keyword in params else NOTHING
    is_default = default is not NOTHING and value.strip() == repr(default)
    parts = sorted([*node.args, *node.keywords], key=lambda n: (n.lineno, n.col_offset))
    here = next((k for k in node.keywords if k.arg == keyword), None)
    if here is not None and is_default:  # back to the default: the keyword goes
        return remove_keyword(text, node, keyword)
    if here is not None:
        a, b = span(text, here.value)
        return text[:a] + value.strip() + text[b:]
    if is_default:
        raise ValueError(
            f"{keyword} of {call} is already {value.strip()} (its default); choose another value"
        )
    at = span(text, parts[-1])[1] if parts else span(text, node)[1] - 1
    return text[:at] + (", " if parts else "") + f"{keyword}={value.strip()}" + text[at:]


def remove_keyword(text: str, node: ast.Call, keyword: str) -> str:
    """`text` without the argument `keyword=...` of the call `node` (with the comma that joined it)."""
    parts = sorted([*node.args, *node.keywords], key=lambda n: (n.lineno, n.col_offset))
    here = next(k for k in node.keywords if k.arg == keyword)
    i = parts.index(here)
    if i > 0:
        a, b = span(text, parts[i - 1])[1], span(text, here)[1]
    elif i + 1 < len(parts):
        a, b = span(text, here)[0], span(text, parts[i + 1])[0]
    else:
        a, b = span(text, here)[0], span(text, node)[1] - 1
    return text[:a] + text[b:]


def keyword_menus(
    files: dict[str, str], keep: Callable[[dict[str, str]], bool] | None = None
) -> dict[str, dict[str, list[str]]]:
    """Call name → keyword → its menu, over the Python files (the first file naming a call wins), less
    the values whose edited program `keep` refuses (one already evaluated, say); empty menus dropped."""
    out: dict[str, dict[str, list[str]]] = {}
    for path, text in files.items():
        for site in call_sites(text) if path.endswith(".py") else ():
            if site.name in out:
                continue
            menus = {}
            for kw, menu in site.menus.items():
                if keep is not None:
                    menu = [v for v in menu if keep({**files, path: set_keyword(text, site.name, kw, v)})]
                if menu:
                    menus[kw] = menu
            if menus:
                out[site.name] = menus
    return out


def numeric_keywords(files: dict[str, str]) -> dict[tuple[str, str], int | float]:
    """(call, keyword) → the number the keyword has in that call (the literal it passes, else the
    parameter's default), for every keyword with a menu whose value is a number (not a bool): what a
    directed `increase k` or `decrease k` moves (`policy.step_menus.direction`)."""
    out: dict[tuple[str, str], int | float] = {}
    for path, text in files.items():
        for site in call_sites(text) if path.endswith(".py") else ():
            params = {p.name: p for p in site.signature.params}
            for kw in site.menus:
                value = _current(site.node, kw)
                if value is NOTHING and kw in params:
                    value = params[kw].default
                if isinstance(value, int | float) and not isinstance(value, bool):
                    out.setdefault((site.name, kw), value)
    return out
