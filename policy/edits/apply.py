"""Typed edit actions applied to a program, and the menus of values and returns an action may take.

An edit is one small typed action (`policy.edits.actions`), which a small model emits through the per-call
schema of `policy.edits.schema`. `apply_edit` checks the result before an evaluation is spent (Python must
parse, something must change); `value_menu` gives the values a numeric constant may move to, which the
executor's grammar offers and the random-mutation baseline (`policy.edits.mutation`) draws from.
Not done: running anything (the sandbox does), renames, class-level edits other than `replace_lines`,
or any check beyond parsing.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import re
import textwrap
from collections.abc import Callable

from pydantic import BaseModel

from arts.policy.edits.actions import (
    EditError,
    ReplaceFunction,
    ReplaceLines,
    SetConstant,
    SetKeyword,
    SetReturn,
    SwapCall,
)
from arts.policy.edits.expressions import returns, shape_error
from arts.policy.edits.keywords import call_sites, set_keyword
from arts.policy.edits.menus import value_menu
from arts.policy.edits.orderings import builds_list, is_list_build, return_menu
from arts.policy.edits.schema import BODY_CHARS
from arts.policy.edits.swaps import swap_call, swap_menus
from arts.policy.edits.targets import (
    anchor,
    body_statements,
    constant_nodes,
    function_nodes,
    list_targets,
    number,
    parse,
    span,
)


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _normalise_block(text: str, indent: str) -> list[str]:
    """`text` re-indented so that its first line sits at `indent`, inner structure kept. A small model
    often writes a body's first line flush and the rest indented (as after `def ...:`); when the plain
    dedent does not parse but dedenting the rest on its own does, the latter is taken."""
    block = textwrap.dedent(text.replace("\r\n", "\n").strip("\n")).split("\n")
    rest = [line for line in block[1:] if line.strip()]
    flush_first = not _indent_of(block[0]) and rest and all(_indent_of(line) for line in rest)
    if flush_first and not parse("\n".join(block)):
        alt = [block[0], *textwrap.dedent("\n".join(block[1:])).split("\n")]
        block = alt if parse("\n".join(alt)) else block
    shift = len(indent) - len(_indent_of(block[0]))
    pad, cut = " " * max(shift, 0), max(-shift, 0)
    return [pad + line[min(cut, len(_indent_of(line))) :] if line.strip() else "" for line in block]


def _find(files: dict[str, str], name: str, kind: str) -> tuple[str, str, ast.AST]:
    """(path, text, node) of the first Python file defining constant/function `name`."""
    for path, text in files.items():
        tree = parse(text) if path.endswith(".py") else None
        table = (constant_nodes if kind == "constant" else function_nodes)(tree) if tree else {}
        if name in table:
            return path, text, table[name]
    raise EditError(f"no {kind} named {name!r} in {list(files)}; pick one of the names listed")


def _set_constant(files: dict[str, str], action: SetConstant) -> tuple[str, str]:
    value = action.value.strip() if isinstance(action.value, str) else repr(action.value)
    try:
        ast.parse(value, mode="eval")
    except SyntaxError as e:
        raise EditError(f"value {value!r} is not a Python expression ({e.msg}); give a literal") from None
    path, text, node = _find(files, action.name, "constant")
    a, b = span(text, node)
    return path, text[:a] + value + text[b:]


def _replace_function(files: dict[str, str], action: ReplaceFunction) -> tuple[str, str]:
    if len(action.body) > BODY_CHARS:
        raise EditError(f"the body has {len(action.body)} characters, at most {BODY_CHARS}; change less")
    path, text, fn = _find(files, action.name, "function")
    # The 135M model mostly starts a body with the signature (even twice); the file's header stays, so drop it.
    signature = re.compile(rf"^(\s*(async\s+)?def\s+{fn.name}\s*\(.*?\)\s*(->[^:]*)?:)+", re.S)
    source = signature.sub("", action.body, count=1)
    lines, stmts = text.split("\n"), body_statements(fn)
    first = stmts[0] if stmts else fn.body[0]  # a docstring-only body: insert after the docstring
    line = lines[first.lineno - 1]
    header = line[: len(line.encode()[: first.col_offset].decode(errors="ignore"))]
    inline = bool(header.strip())  # `def f(): return 1`: the header shares the body's line
    indent = _indent_of(lines[fn.lineno - 1]) + "    " if inline else _indent_of(line)
    if not source.strip():
        raise EditError(f"the new body of {fn.name} is empty; give its statements, e.g. `return ...`")
    body = _normalise_block(source, indent)
    head = [header.rstrip()] if inline and stmts else []
    start, end = (first.lineno, fn.end_lineno) if stmts else (first.end_lineno + 1, first.end_lineno)
    return path, "\n".join(lines[: start - 1] + head + body + lines[end:])


def _set_keyword(files: dict[str, str], action: SetKeyword) -> tuple[str, str]:
    for path, text in files.items():
        if path.endswith(".py") and any(s.name == action.call for s in call_sites(text)):
            try:
                return path, set_keyword(text, action.call, action.keyword, action.value)
            except (LookupError, ValueError) as e:
                raise EditError(str(e).strip("'\"")) from None
    raise EditError(f"no call {action.call!r} with keyword arguments in {list(files)}; pick one listed")


def _swap_call(files: dict[str, str], action: SwapCall) -> tuple[str, str]:
    for path, text in files.items():
        if path.endswith(".py") and any(name == action.call for name in swap_menus({path: text})):
            try:
                return path, swap_call(text, action.call, action.to)
            except LookupError as e:
                raise EditError(str(e).strip("'\"")) from None
    raise EditError(f"no call {action.call!r} with siblings to swap to in {list(files)}; pick one listed")


def _set_return(files: dict[str, str], action: SetReturn) -> tuple[str, str]:
    try:
        ast.parse(action.expression, mode="eval")
    except SyntaxError as e:
        raise EditError(f"{action.expression!r} is not an expression ({e.msg})") from None
    path, text, fn = _find(files, action.function, "function")
    ret, new = returns(fn) or builds_list(fn), ast.parse(action.expression, mode="eval").body
    if ret is None:
        raise EditError(
            f"{fn.name} does not end in a one-line `return` of an expression; use replace_function"
        )
    if is_list_build(ret.value) and not is_list_build(new):
        raise EditError(f"{fn.name} returns a list: the expression must build one (sorted, list, np.argsort)")
    if why := shape_error(fn, ret.value, new):
        raise EditError(why)
    a, b = span(text, ret.value)
    end = text.find("\n", b)
    end = len(text) if end < 0 else end
    rest = text[b:end]  # a trailing comment describes the old expression: it goes with it
    rest = "" if rest.strip().startswith("#") else rest
    return path, text[:a] + action.expression.strip() + rest + text[end:]


def _line_of(lines: list[str], path: str, value: str) -> int:
    n = int(value.split(" | ")[0]) if value.split(" | ")[0].isdigit() else 0
    if not 1 <= n <= len(lines) or anchor(n, lines[n - 1]) != value:
        raise EditError(f"anchor {value!r} is not a line of {path}; use a numbered line as shown")
    return n


def _replace_lines(files: dict[str, str], action: ReplaceLines) -> tuple[str, str]:
    if action.file not in files:
        raise EditError(f"no file {action.file!r}; files: {list(files)}")
    lines = files[action.file].split("\n")
    start, end = _line_of(lines, action.file, action.start), _line_of(lines, action.file, action.end)
    if end < start:
        raise EditError(f"end line {end} comes before start line {start}; give start <= end")
    new = _normalise_block(action.text, _indent_of(lines[start - 1])) if action.text.strip() else []
    return action.file, "\n".join(lines[: start - 1] + new + lines[end:])


def apply_edit(files: dict[str, str], action: BaseModel) -> dict[str, str]:
    """The files after `action`. Raises EditError when the action does not apply, changes nothing, or
    leaves a Python file that does not parse (checked here, before an evaluation is spent on it)."""
    op = getattr(action, "op", None)
    appliers = dict(
        set_constant=_set_constant,
        set_keyword=_set_keyword,
        swap_call=_swap_call,
        set_return=_set_return,
        replace_function=_replace_function,
        replace_lines=_replace_lines,
    )
    appliers["write_file"] = lambda _, a: (a.file, a.content.rstrip("\n") + "\n")
    if op not in appliers:
        raise EditError(f"{op!r} is not an edit op (read_file only shows a file)")
    path, text = appliers[op](files, action)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:  # a lone surrogate: no file, store or interpreter would take it
        raise EditError(
            f"{path} would not be UTF-8 text after the edit ({e.reason}); write plain text"
        ) from None
    if files.get(path) == text:
        raise EditError(f"no change: the edit leaves {path} exactly as it was; change something")
    if path.endswith(".py"):
        try:
            tree = ast.parse(text, filename=path)
        except SyntaxError as e:
            where = f"line {e.lineno}: {e.msg}: {(e.text or '').strip()}"
            raise EditError(f"{path} does not parse after the edit: {where}") from None
        old = parse(files.get(path, ""))
        if old is not None and _code(old) == _code(tree):
            raise EditError(
                f"no change to the code: the edit only touches comments or docstrings of {path}; change the program"
            )
    return {**files, path: text}


def _code(tree: ast.Module) -> str:
    """The program without its docstrings: two files with the same `_code` behave the same."""
    tree = copy.deepcopy(tree)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def program_key(files: dict[str, str]) -> str:
    """A digest of a program's files: equal programs, equal keys. A Python file counts by its syntax tree,
    so comments, layout and the spelling of a literal do not make a new program: in a char-lm benchmark
    run, `LR = 0.003` re-ran the seed's `LR = 3e-3` at the cost of an evaluation."""
    h = hashlib.blake2b(digest_size=16)
    for path in sorted(files):
        text = files[path]
        if path.endswith(".py"):
            try:
                text = ast.dump(ast.parse(text))
            except SyntaxError:
                pass  # keyed by its text
        h.update(path.encode() + b"\0" + text.encode() + b"\0")
    return h.hexdigest()


def constant_menus(
    files: dict[str, str],
    keep: Callable[[dict[str, str]], bool] | None = None,
    sides: dict[str, int] | None = None,
) -> dict[str, list[int | float]]:
    """Each numeric constant's `value_menu`, less the values whose edited program `keep` refuses (one
    already evaluated, say), for `edit_schema(menus=...)`. `sides` keeps, for the constants it names, only
    the values above (+1) or below (-1) the current one."""
    menus: dict[str, list[int | float]] = {}
    for path, text in files.items():
        for name, src in list_targets(text).constants.items() if path.endswith(".py") else ():
            value = number(src)
            if value is None:
                continue
            menu = value_menu(value)
            if sides and name in sides:
                menu = [v for v in menu if (v - value) * sides[name] > 0]
            if keep is not None:
                menu = [v for v in menu if keep(apply_edit(files, SetConstant(name=name, value=v)))]
            menus[name] = menu
    return menus


def return_menus(
    files: dict[str, str], keep: Callable[[dict[str, str]], bool] | None = None
) -> dict[str, list[str]]:
    """Each settable return's `return_menu` (an arithmetic or a list-building one), less the expressions
    whose edited program `keep` refuses (one already evaluated, say), for `edit_schema(rewrites=...)`."""
    menus: dict[str, list[str]] = {}
    for text in (t for p, t in files.items() if p.endswith(".py")):
        tree = parse(text)
        for name, fn in (function_nodes(tree) if tree else {}).items():
            if (menu := return_menu(tree, fn)) is None:
                continue
            menus[name] = []
            for expr in menu:
                try:  # an expression the function already returns is no edit
                    edited = apply_edit(files, SetReturn(function=name, expression=expr))
                except EditError:
                    continue
                if keep is None or keep(edited):
                    menus[name].append(expr)
    return menus
