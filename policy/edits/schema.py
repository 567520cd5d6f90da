"""The per-call schema that makes a small model emit one typed edit action, and nothing else.

The default executor is a 135M model: free-form diffs and rewrites gave 0 valid edits in 33 tries, grammar-
constrained JSON gave 40 valid objects of 40. So `edit_schema` builds, per call, a pydantic model whose
`Literal` enums hold the program's real constants, functions, calls and line anchors (`policy.edits.targets`
finds them) and whose values come from the menus it is given. The grammar only constrains what a model may
write: applying and checking the action is `policy.edits.apply`, and the menus are built there and in
`policy.edits.keywords`, `swaps` and `orderings`.
"""

from __future__ import annotations

from typing import Literal, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

from arts.policy.edits.actions import (
    EditError,
    ReadFile,
    ReplaceFunction,
    ReplaceLines,
    SetConstant,
    SetKeyword,
    SetReturn,
    SwapCall,
    WriteFile,
)
from arts.policy.edits.keywords import keyword_menus
from arts.policy.edits.orderings import return_pattern
from arts.policy.edits.swaps import swap_menus
from arts.policy.edits.targets import anchors, function_nodes, list_targets, number, parse

OPS = ("set_constant", "set_keyword", "swap_call", "set_return", "replace_function", "replace_lines",
       "write_file", "read_file")  # fmt: skip
VALUE_CHARS = 40
"""A constant's new value is a short one-line literal; the grammar caps it (and so forbids newlines)."""
BODY_CHARS = 600
"""Cap on a function body, checked after decoding: under a maxLength xgrammar forbids escapes (newlines)."""


def _enum(values: list[str]):
    return Literal[tuple(dict.fromkeys(values))]  # type: ignore[valid-type]


def edit_schema(
    files: dict[str, str],
    ops: set[str] | frozenset[str],
    focus: str | None = None,
    window: tuple[int, int] | None = None,
    max_anchors: int = 40,
    only: set[str] | None = None,
    menus: dict[str, list[int | float]] | None = None,
    keywords: dict[str, dict[str, list[str]]] | None = None,
    swaps: dict[str, list[str]] | None = None,
    rewrites: dict[str, list[str]] | None = None,
) -> type[BaseModel]:
    """The action schema for one call. Names are `Literal` enums of what exists: constants (one branch per
    value type) and functions of every Python file, line anchors of the `focus` file (default: the first)
    within `window`, file names of `files`; `only` keeps just those constants and functions. Ops without a
    target are dropped. With `menus` (see `apply.constant_menus`), each numeric constant has its own branch
    whose value is an entry of its menu (no branch for an empty or missing menu). Each keyword argument
    of a call with a menu (`keywords`, default `policy.calls.keyword_menus`) has its own set_keyword
    branch, and each call with siblings (`swaps`, default `policy.swaps.swap_menus`) a swap_call
    branch; `only` keeps the calls or keywords it names. With `rewrites` (see `apply.return_menus`), a
    function with a settable return answers from its menu (none left: no branch) instead of the
    return grammar. One branch gives its
    own model; several give `{"action": <anyOf branches>}`, a root object as every structured backend
    accepts. Raises EditError when no allowed op has a target."""
    if set(ops) - set(OPS):
        raise ValueError(f"unknown edit ops {sorted(set(ops) - set(OPS))}; known: {list(OPS)}")
    names = list(files)
    focus = focus if focus is not None else (names[0] if names else None)
    targets = [list_targets(t) for p, t in files.items() if p.endswith(".py")]
    functions = [f for t in targets for f in t.functions if only is None or f in only]
    # Constants by the JSON type of their value: int and float (numbers the grammar keeps well-formed),
    # str for any other literal (Python source).
    groups: dict[type, list[str]] = {int: [], float: [], str: []}
    for name, src in ((k, v) for t in targets for k, v in t.constants.items() if only is None or k in only):
        groups[type(number(src)) if number(src) is not None else str].append(name)
    if menus is not None:  # a list whose numbers are targets of their own is not rewritten as free text
        split = {n.split("#")[0] for n in groups[int] + groups[float] if "#" in n}
        groups[str] = [n for n in groups[str] if n not in split]
    lines = anchors(files[focus], window, max_anchors) if focus in files else []
    models: list[type[BaseModel]] = []

    def add(base: type[BaseModel], suffix: str = "Action", **fields) -> None:
        op = base.model_fields["op"].annotation
        models.append(create_model(base.__name__ + suffix, __base__=base, op=(op, ...), **fields))

    for kind, group in groups.items() if "set_constant" in ops else ():
        value = (str, Field(min_length=1, max_length=VALUE_CHARS)) if kind is str else (kind, ...)
        if group and menus is not None and kind is not str:
            for name in (n for n in group if menus.get(n)):
                add(SetConstant, "_" + name, name=(_enum([name]), ...), value=(_enum(menus[name]), ...))
        elif group:
            add(SetConstant, kind.__name__.title(), name=(_enum(group), ...), value=value)
    kw_menus = keywords if keywords is not None else keyword_menus(files) if "set_keyword" in ops else {}
    for call, menus_of in kw_menus.items() if "set_keyword" in ops else ():
        for kw, menu in menus_of.items():
            if menu and (only is None or call in only or kw in only):
                at, value = (_enum([call]), ...), (_enum(menu), ...)
                add(SetKeyword, f"_{len(models)}", call=at, keyword=(_enum([kw]), ...), value=value)
    swap_menu = swaps if swaps is not None else swap_menus(files) if "swap_call" in ops else {}
    for call, menu in swap_menu.items() if "swap_call" in ops else ():
        if menu and (only is None or call in only):
            add(SwapCall, f"_{len(models)}", call=(_enum([call]), ...), to=(_enum(menu), ...))
    for path, text in files.items() if "set_return" in ops else ():
        tree = parse(text) if path.endswith(".py") else None
        for name, fn in (function_nodes(tree) if tree else {}).items():
            if (only is None or name in only) and (grammar := return_pattern(tree, fn)):
                if rewrites is not None and name in rewrites:
                    if rewrites[name]:
                        at, expr = (_enum([name]), ...), (_enum(rewrites[name]), ...)
                        add(SetReturn, "_" + name, function=at, expression=expr)
                    continue
                # no maxLength: xgrammar ignores it next to a pattern, which bounds the length anyway
                expr = (str, Field(pattern=grammar))
                add(SetReturn, "_" + name, function=(_enum([name]), ...), expression=expr)
    if "replace_function" in ops and functions:
        add(ReplaceFunction, name=(_enum(functions), ...), body=(str, ...))
    if "replace_lines" in ops and lines:
        at = _enum(lines)
        add(ReplaceLines, start=(at, ...), end=(at, ...), file=(_enum([focus]), ...), text=(str, ...))
    if "write_file" in ops and names:
        add(WriteFile, file=(_enum(names), ...), content=(str, ...))
    if "read_file" in ops and len(names) > 1:
        add(ReadFile, file=(_enum(names), ...))
    if not models:
        raise EditError(f"no target for any of the ops {sorted(ops)} in {names or 'an empty file set'}")
    if len(models) == 1:
        return models[0]
    union = Union[tuple(models)]  # noqa: UP007  (a runtime tuple of models)
    return create_model("EditAction", __config__=ConfigDict(extra="forbid"), action=(union, ...))


def unwrap(parsed: BaseModel) -> BaseModel:
    """The action inside a parsed `edit_schema` object (a bare action, or `{"action": ...}`)."""
    return getattr(parsed, "action", parsed)
