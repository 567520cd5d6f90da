"""`arts config show`: the search config as a TOML file that `arts search --config FILE` takes unchanged.

Every field is printed under its table (`[budget]`, `[scientist_model.pricing]`), with its whole docstring
and its declared default as comments above it. TOML has no null: a field left unset is printed as a
comment, so the file still loads to the same config. Values are written by the formatter of the run's own
`config.toml` (`search.config.toml_value`); a TOML writer library would still leave the comments to us.
"""

from __future__ import annotations

import argparse
import textwrap
from typing import TYPE_CHECKING, Any

from arts.search.cli.flags import config_fields

if TYPE_CHECKING:
    from pydantic import BaseModel
    from pydantic.fields import FieldInfo

WIDTH = 100


def _comment(text: str) -> list[str]:
    """A docstring as `# ` lines: paragraphs kept, each rewrapped, nothing cut."""
    paragraphs = [" ".join(p.split()) for p in text.strip().split("\n\n") if p.strip()]
    lines: list[str] = []
    for i, p in enumerate(paragraphs):
        lines += ["#"] if i else []
        lines += ["# " + line for line in textwrap.wrap(p, WIDTH - 2)]
    return lines


def _full_doc(info: FieldInfo, sub: type | None) -> str:
    return info.description or (sub.__doc__ if sub is not None else None) or ""


def _profile_defaults(path: str) -> str | None:
    """`small: X, capable: Y` where a profile supplies this field's default, else None."""
    from arts.search.config import toml_value
    from arts.search.profiles import PROFILES

    found = []
    for name, table in PROFILES.items():
        node: Any = table
        for key in path.split("."):
            node = node.get(key, KeyError) if isinstance(node, dict) else KeyError
        if node is not KeyError:
            found.append(f"{name} profile: {toml_value(node)}")
    return ", ".join(found) or None


def _default(info: FieldInfo, path: str) -> str:
    from arts.search.config import toml_value

    value = info.get_default(call_default_factory=True)
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    declared = "unset" if value is None else toml_value(value)
    by_profile = _profile_defaults(path)
    return f"default: {declared}" + (f" (under the {by_profile})" if by_profile else "")


def _at(data: Any, path: str) -> Any:
    for key in path.split("."):
        data = data.get(key) if isinstance(data, dict) else None
    return data


def render(cfg: BaseModel) -> str:
    """`cfg` as commented TOML: leaf fields of a table, then its sub-tables, each `[path]` header once."""
    from arts.search.config import toml_value

    values = cfg.model_dump(mode="json")
    fields = list(config_fields(type(cfg)))
    tables = [""] + [path for path, _, sub in fields if sub is not None]
    out: list[str] = []
    for table in tables:
        unset = False  # a table that is None (`pricing`): its header would make it a table of defaults
        if table:
            info, sub = next((i, s) for p, i, s in fields if p == table)
            unset = _at(values, table) is None
            out += ["", *_comment(_full_doc(info, sub)), f"# [{table}]" if unset else f"[{table}]"]
        prefix = f"{table}." if table else ""
        for path, info, sub in fields:
            name = path.removeprefix(prefix)
            if sub is not None or not path.startswith(prefix) or "." in name:
                continue
            value = _at(values, path)
            out += _comment(_full_doc(info, None)) + [f"# {_default(info, path)}"]
            out.append(f"# {name} =" if value is None or unset else f"{name} = {toml_value(value)}")
    return "\n".join(out).lstrip("\n") + "\n"


def cmd_config_show(args: argparse.Namespace) -> int:
    from arts.search.cli.search import load, set_items

    print(render(load(args.config, set_items(args.set))), end="")
    return 0
