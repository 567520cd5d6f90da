"""The search config as flags: every leaf field a flag named by its path (`--budget.evals 30`), found by
walking the pydantic model, and the same walk for `arts config show`.

Importing this module is cheap; the walk imports the config (hence the model code) only when called, so
`arts --help` stays fast (`search.cli.main`).
"""

from __future__ import annotations

import argparse
import json
import types
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal, Union, get_args, get_origin

if TYPE_CHECKING:
    from pydantic import BaseModel
    from pydantic.fields import FieldInfo

FIELD_DEST = "field:"
"""Prefix of the argparse dest of a generated field flag; the rest is the field path."""


def _submodel(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model a field holds (also as `Model | None`), or None for a leaf field."""
    from pydantic import BaseModel

    if get_origin(annotation) is None and isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (Union, types.UnionType):
        found = [m for m in map(_submodel, get_args(annotation)) if m is not None]
        return found[0] if len(found) == 1 else None
    return None


def config_fields(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, FieldInfo, type | None]]:
    """(path, field, submodel or None) of every field under `model`, depth first, in declaration order."""
    for name, info in model.model_fields.items():
        sub = _submodel(info.annotation)
        yield prefix + name, info, sub
        if sub is not None:
            yield from config_fields(sub, f"{prefix}{name}.")


def doc(info: FieldInfo, sub: type | None = None) -> str:
    """The first line of a field's docstring (else its model's), or ""."""
    text = info.description or (sub.__doc__ if sub is not None else None) or ""
    return text.strip().split("\n", 1)[0].strip()


def _is_text(annotation: Any) -> bool:
    """Whether a field holds only text (str or string literals, maybe None): its flag value stays as typed."""
    args = get_args(annotation) if get_origin(annotation) in (Union, types.UnionType) else (annotation,)

    def text(a: Any) -> bool:
        return a is str or (get_origin(a) is Literal and all(isinstance(v, str) for v in get_args(a)))

    rest = [a for a in args if a is not type(None)]
    return bool(rest) and all(map(text, rest))


def at(data: Any, path: str) -> Any:
    """The value at a dotted path of a dumped config; None under a field that is None."""
    for key in path.split("."):
        data = data.get(key) if isinstance(data, dict) else None
    return data


def add_field_flags(parser: argparse.ArgumentParser) -> None:
    """One `--PATH VALUE` flag per leaf field of SearchConfig not already given a flag of that name, and the
    choices of `--without` from the components' fields. Imports the config, hence the model code: called
    only when `search` is parsed."""
    from arts.search.config import MOVED_KEYS, SearchConfig, parse_value

    fields = list(config_fields(SearchConfig))
    parser.add_argument(
        "--without", action="append", metavar="PART",
        choices=[path.removeprefix("components.") for path, _, sub in fields if path.startswith("components.")],
        help="turn one part of the arts round off (an ablation), repeatable: %(choices)s",
    )  # fmt: skip
    group = parser.add_argument_group("config fields", "every field by its path (see `arts config show`)")
    defaults = SearchConfig().model_dump(mode="json")
    for path, info, sub in fields:
        if sub is not None or f"--{path}" in parser._option_string_actions:
            continue  # a table, or a top-level field whose short flag is its path (--seed, --group)
        default = json.dumps(at(defaults, path))
        group.add_argument(
            f"--{path}", dest=FIELD_DEST + path, metavar="VALUE",
            type=str if _is_text(info.annotation) else parse_value,
            help=f"{doc(info)} (default {default})".replace("%", "%%"),
        )  # fmt: skip
    for old in MOVED_KEYS:  # an earlier config's key: taken, so that loading the config names its new key
        parser.add_argument(f"--{old}", dest=FIELD_DEST + old, type=parse_value, help=argparse.SUPPRESS)
