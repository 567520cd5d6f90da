"""The search config as flags: every leaf field a flag named by its path (`--budget.evals 30`), found by
walking the pydantic model, the short flags of the common fields (`SHORT_FLAGS`, the one table of them),
and the same walk for `arts config show`.

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
SHORT_DEST = "short:"
"""Prefix of the argparse dest of a short flag; the rest is the field path it sets."""

SHORT_FLAGS: dict[str, tuple[str, str | None]] = {
    "--method": ("method", "arts | greedy | random | mutate | module:attr"),
    "--model": ("scientist_model.model", "scientist (and, unless --executor-model, executor) model; default: embedded"),
    "--backend": ("scientist_model.backend", "transformers | vllm | openai | module:attr"),
    "--base-url": ("scientist_model.base_url", "server for the openai backend"),
    "--dtype": ("scientist_model.dtype", "weights' dtype of the local models (default auto: bfloat16 on a GPU, "
                "and on a CPU with native bf16 unless --ttt trains the model; else float32)"),
    "--executor-model": ("executor_model.model", "the executor's model (default: --model)"),
    "--executor-backend": ("executor_model.backend", "the executor's backend (default: --backend)"),
    "--executor-base-url": ("executor_model.base_url", "the executor's server (default: --base-url)"),
    "--evals": ("budget.evals", "evaluation budget"),
    "--rounds": ("budget.rounds", "round cap"),
    "--tokens": ("budget.tokens", "token budget"),
    "--wall": ("budget.wall_s", "wall-clock budget in seconds"),
    "--group": ("group", "N actions per round (the GRPO group)"),
    "-k": ("scientist.candidates", "K candidates per proposal"),
    "--audits": ("scientist.audits", "R baseline audit calls"),
    "--drafts": ("baselines.drafts", "greedy: initial drafts"),
    "--seed": ("seed", None),
    "--profile": ("profile", "defaults for the model's size"),
    "--adapter": ("scientist.adapter", "a peft adapter folder the scientist starts from (a warm start)"),
    "--evaluate-on": ("evaluate_on", "where evaluations run: this machine, or ray (a cluster)"),
    "--ray-address": ("ray_address", "with --evaluate-on ray: the cluster to join (default: start a local one)"),
    "--ttt": ("ttt.enabled", "test-time training (LoRA GRPO)"),
    "--update-every": ("ttt.grpo.update_every", "TTT: rounds between GRPO updates"),
    "--lora-rank": ("ttt.grpo.lora_rank", "TTT: LoRA rank"),
    "--lr": ("ttt.grpo.lr", "TTT: learning rate"),
}  # fmt: skip
"""The `search` sub-command's short flags: flag -> (the config field it sets, help; None: the field's
docstring). Type and choices come from the field. Every field also has its long flag, `--PATH`."""

EXECUTOR_FOLLOWS = {
    "scientist_model.model": "executor_model.model",
    "scientist_model.backend": "executor_model.backend",
    "scientist_model.base_url": "executor_model.base_url",
    "scientist_model.dtype": "executor_model.dtype",
}
"""Short flags of the scientist's model that also set the executor's, unless its own flag is given."""

RENAMED_FLAGS = {
    "search": {"--executor": ("--evaluate-on", "where evaluations run; [executor] in the config is the editing agent")},
    "export": {"--adapter": ("--checkpoint", "which of the run's checkpoints; in `arts search`, --adapter is a warm start")},
}  # fmt: skip
"""Flags of earlier releases, by sub-command: old -> (new, why). Given, one stops the command with a
message naming the new flag."""


class _Renamed(argparse.Action):
    def __init__(self, *args: Any, new: str, why: str, **kw: Any):
        super().__init__(*args, **kw)
        self.new, self.why = new, why

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option: Any = None
    ) -> None:
        parser.error(f"{option} is now {self.new} ({self.why}); write {self.new} {values or ''}".rstrip())


def add_renamed(parser: argparse.ArgumentParser, command: str) -> None:
    """The old flags of `command`, hidden from help, each answering with its new name."""
    for old, (new, why) in RENAMED_FLAGS.get(command, {}).items():
        parser.add_argument(old, nargs="?", action=_Renamed, new=new, why=why, help=argparse.SUPPRESS)


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


def _short_flag(
    parser: argparse.ArgumentParser, flag: str, path: str, help: str | None, info: FieldInfo
) -> None:
    from arts.search.config import parse_value

    kw: dict[str, Any] = {"dest": SHORT_DEST + path, "help": (help or doc(info)).replace("%", "%%")}
    if info.annotation is bool:
        kw |= {"action": "store_true", "default": None}
    elif get_origin(info.annotation) is Literal:
        kw["choices"] = list(get_args(info.annotation))
    else:
        kw["type"] = str if _is_text(info.annotation) else parse_value
        kw["metavar"] = flag.lstrip("-").upper().replace("-", "_")
    parser.add_argument(flag, **kw)


def add_field_flags(parser: argparse.ArgumentParser) -> None:
    """The short flags (`SHORT_FLAGS`), then one `--PATH VALUE` flag per leaf field of SearchConfig not
    already given a flag of that name, and the choices of `--without` from the components' fields. Imports
    the config, hence the model code: called only when `search` is parsed."""
    from arts.search.config import MOVED_KEYS, SearchConfig, parse_value

    fields = list(config_fields(SearchConfig))
    info_at = {path: info for path, info, _ in fields}
    for flag, (path, text) in SHORT_FLAGS.items():
        _short_flag(parser, flag, path, text, info_at[path])
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
