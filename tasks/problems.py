"""Why a task directory cannot be used, as task.toml error lines: one line per field of a pydantic error,
listed files that are links out of the directory, text that is not UTF-8, an answer schema that cannot
describe answer.json. Each line names the field and the fix; `tasks.base.load_task` gathers them.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

if TYPE_CHECKING:
    from arts.tasks.base import TaskConfig


def field_problems(err: ValidationError) -> list[str]:
    """One line per field of a pydantic error: the field's path, what is wrong with the value given and the
    fix, never pydantic's own dump (input types, documentation links)."""
    lines = []
    for e in err.errors():
        field = ".".join(str(x) for x in e["loc"]) or "(top level)"
        msg = e["msg"].removeprefix("Value error, ")
        given = e.get("input")
        if e["type"] == "extra_forbidden":
            msg = "unknown field; remove it or check its spelling"
        elif e["type"] == "missing":
            msg = "required field is missing; add it"
        elif e["type"] in ("model_type", "dict_type", "model_attributes_type"):
            msg = f"a table of fields, not {_short(given)}; set its fields one by one ({field}.NAME = value)"
        elif e["type"] == "finite_number":
            msg = f"{given!r} is not a finite number; give a number, or remove the field"
        elif e["type"].endswith(("_type", "_parsing")) or e["type"] in ("literal_error", "enum"):
            quoted = "; write the number without quotes" if _numeric_text(given) else ""
            msg = f"{msg[0].lower()}{msg[1:]} (given {_short(given)}){quoted}"
        elif e["type"].startswith(("greater_than", "less_than", "too_short", "too_long")):
            msg = f"{msg[0].lower()}{msg[1:]} (given {_short(given)})"
        lines.append(f"  field '{field}': {msg}")
    return lines


def _numeric_text(value: object) -> bool:
    try:
        return isinstance(value, str) and math.isfinite(float(value))
    except ValueError:
        return False


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def links_out(root: Path, config: TaskConfig) -> list[str]:
    """task.toml error lines for listed files (or files inside listed folders) that are links leading out
    of the task directory: the sandbox would copy in, or run, whatever they point to."""
    listed = [("statement", config.statement), ("editable", *config.editable)]
    listed += [("material", *config.material), ("hidden", *config.hidden)]
    for key in ("evaluate", "test"):
        if cmd := getattr(config, key):
            listed.append((f"{key}.command", *(a for a in cmd.command[1:] if a.endswith(".py"))))
    problems = []
    for key, *entries in listed:
        for entry in entries:
            for p in _walk_links(root / entry):
                if not Path(os.path.realpath(p)).is_relative_to(root):
                    problems.append(
                        f"  field '{key}': {str(p.relative_to(root))!r} is a link to {os.path.realpath(p)}, "
                        "outside the task directory; copy the file into the task directory instead"
                    )
    return problems


def _walk_links(top: Path) -> list[Path]:
    """`top` if it is a link, else the links inside it (never following one)."""
    if top.is_symlink() or not top.is_dir():
        return [top] if top.is_symlink() else []
    found = []
    for dirpath, dirnames, filenames in os.walk(top):
        found += [Path(dirpath, n) for n in dirnames + filenames if Path(dirpath, n).is_symlink()]
    return found


def not_utf8(path: Path) -> str:
    try:
        path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        return f"byte {e.start}"
    return ""


def schema_problems(root: Path, rel: str) -> list[str]:
    """Why the answer schema file cannot describe answer.json, as task.toml error lines (empty if it can)."""
    path = root / rel
    if not path.is_file():
        return [f"  field 'answer.schema': file {rel!r} not found in {root}; create it or fix the path"]
    try:
        schema = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        return [f"  field 'answer.schema': {rel!r} is not valid JSON ({e}); fix the file"]
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return [
            f'  field \'answer.schema\': {rel!r} must be a JSON schema whose top level has "type": "object"'
            " (answer.json is one JSON object); fix the schema"
        ]
    return []


def under(path: str, entries: list[str]) -> bool:
    """Whether `path` is one of `entries` or inside one of them (a folder entry)."""
    return any(path.rstrip("/") == e.rstrip("/") or path.startswith(e.rstrip("/") + "/") for e in entries)


def shown_and_hidden(config: TaskConfig) -> list[str]:
    """A hidden entry that is also material, or holds or lies in a material entry: the search cannot both
    see it and not see it."""
    problems = []
    for h in config.hidden:
        if both := [m for m in config.material if under(m, [h]) or under(h, [m])]:
            problems.append(
                f"  field 'hidden': {h!r} is also material ({', '.join(map(repr, both))}); a file is either "
                "shown to the search (material) or kept from it (hidden): remove it from one of the lists"
            )
    return problems


def unsearchable(root: Path, config: TaskConfig) -> str | None:
    """Why a search of the task at `root` would spend its whole budget on invalid nodes, with the fix; None
    when nothing known at the start stops it. Loading accepts such a task (a part of arts may use it
    without searching it); `arts search` and `arts tasks check` refuse it."""
    if config.kind == "answer" and config.answer is None:
        return (
            f"{root / 'task.toml'}: an answer task needs an [answer] section naming its deliverable and the "
            'JSON schema it follows, e.g. [answer] file = "answer.json", schema = "answer_schema.json" (the '
            "schema listed under material; see docs/tasks.md)"
        )
    return None
