"""The typed edit actions a model writes, one pydantic model per op (`policy.edits.apply` applies them and builds
the per-call schema that restricts their fields to the program's real targets)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class EditError(ValueError):
    """An action that cannot be applied; the message is shown back to the model as its last error."""


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid")


# Field order is the order the grammar makes the model write: the target comes first (a small model
# copies a name from the hypothesis well), and the op that follows is then forced by the branch.
class SetConstant(_Action):
    """Set a module-level UPPER_CASE constant to a new value (a number, or a Python literal as text)."""

    name: str
    op: Literal["set_constant"] = "set_constant"
    value: int | float | str


class SetKeyword(_Action):
    """Set a keyword argument of a call (named by its callee, `policy.edits.keywords`) to a value of its menu;
    the parameter's default removes the keyword."""

    call: str
    op: Literal["set_keyword"] = "set_keyword"
    keyword: str
    value: str


class SwapCall(_Action):
    """Replace the callee of a call by a sibling of the same kind from its menu (`policy.edits.swaps`)."""

    call: str
    op: Literal["swap_call"] = "swap_call"
    to: str


class SetReturn(_Action):
    """Replace the expression a function returns (its one-line final `return`), under the grammar of
    `policy.edits.expressions` (the function's parameters, the module's constants, numbers, arithmetic) or,
    for a return that builds a list, of `policy.edits.orderings` (sorted by a key, argsort, reversed)."""

    function: str
    op: Literal["set_return"] = "set_return"
    expression: str


class ReplaceFunction(_Action):
    """Replace the body of a top-level function (its signature and docstring stay)."""

    name: str
    op: Literal["replace_function"] = "replace_function"
    body: str


class ReplaceLines(_Action):
    """Replace lines `start`..`end` (inclusive anchors "<n> | <stripped line>") with `text`."""

    start: str
    end: str
    op: Literal["replace_lines"] = "replace_lines"
    file: str
    text: str


class WriteFile(_Action):
    """Write a whole file (a draft for a seedless task, or a large model's rewrite)."""

    file: str
    op: Literal["write_file"] = "write_file"
    content: str


class ReadFile(_Action):
    """Show another editable file in the next prompt (multi-file tasks); not an edit."""

    file: str
    op: Literal["read_file"] = "read_file"
