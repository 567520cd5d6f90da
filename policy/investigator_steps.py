"""The investigator's action grammar: read, grep, compare, bisect and note steps, each call's schema narrowed to what exists.

A small model asked for free-form actions greps for patterns that match nothing and reads past the end of
a file, so every step is one grammar-constrained object whose choices are `Literal`s of what is there: the
material files, the words of the hypothesis, the line numbers and lines the last output showed
(`InvestigatorConfig.narrow` holds the measurements). Running the tools, prompting and turning notes into
findings is `policy.investigator`; nothing here calls a model or reads a file.
"""

from __future__ import annotations

import re
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

OP_HELP = {
    "read": "read: show about 20 lines of a file from line `start` (1 is the top)",
    "grep": "grep: show the lines of a file that contain `pattern`, a word of the hypothesis",
    "compare": "compare: show which numeric series of a folder's tables left their usual range first, and "
    "whether they came back",
    "bisect": "bisect: run the failing test at each commit of a case's history and show the first commit "
    "after which it fails",
    "note": "note: record an observation (a line of the output above) and whether it supports, opposes or "
    "is neutral to the hypothesis",
}
Relation = Literal["support", "oppose", "neutral"]
MAX_LINE = 99_999
"""Largest line number a `read` may ask for (keeps a random model's number short)."""


class _Step(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReadStep(_Step):
    """Show about 20 lines of a material file from line `start`."""

    op: Literal["read"]
    file: str
    start: int = Field(ge=1, le=MAX_LINE)


class GrepStep(_Step):
    """Show the lines of a material file that match `pattern`."""

    op: Literal["grep"]
    pattern: str = Field(min_length=1, max_length=40)
    file: str


class CompareStep(_Step):
    """Compare the numeric series of a folder's CSV files (`tasks.windows`)."""

    op: Literal["compare"]
    folder: str


class BisectStep(_Step):
    """Run the failing test at each commit of a folder's history (`tasks.history`)."""

    op: Literal["bisect"]
    folder: str


class NoteStep(_Step):
    """Record an observation and its relation to the hypothesis."""

    op: Literal["note"]
    observation: str = Field(min_length=4, max_length=160)
    relation: Relation


def step_schema(
    files: list[str],
    ops: tuple[str, ...] = ("read", "grep", "note"),
    words: list[str] | None = None,
    starts: list[int] | None = None,
    quotes: list[str] | None = None,
    folders: list[str] | None = None,
    histories: list[str] | None = None,
) -> type[BaseModel]:
    """This call's action schema, `{"action": <one of ops>}`: `file` is a `Literal` of the material files
    (read and grep are left out when there are none), a compare's `folder` one of `folders` and a bisect's
    one of `histories` (each left out when there are none); a grep pattern, a read's start and a note's
    observation are `Literal`s of `words`, `starts` and `quotes` when given. A plain union (anyOf) tagged
    by `op`: xgrammar cannot represent pydantic's oneOf exactly (it falls back to anyOf with a warning),
    while validation still picks the branch by its `op` literal."""
    branches: list[type[BaseModel]] = []
    if files:
        names = (_enum(files), ...)
        if "read" in ops:
            start = (_enum(starts), ...) if starts else (int, Field(ge=1, le=MAX_LINE))
            branches.append(create_model("ReadAction", __base__=ReadStep, file=names, start=start))
        if "grep" in ops:
            pattern = (_enum(words), ...) if words else (str, Field(min_length=1, max_length=40))
            branches.append(create_model("GrepAction", __base__=GrepStep, pattern=pattern, file=names))
    if folders and "compare" in ops:
        branches.append(create_model("CompareAction", __base__=CompareStep, folder=(_enum(folders), ...)))
    if histories and "bisect" in ops:
        branches.append(create_model("BisectAction", __base__=BisectStep, folder=(_enum(histories), ...)))
    if "note" in ops or not branches:
        observation = (_enum(quotes), ...) if quotes else (str, Field(min_length=4, max_length=160))
        branches.append(create_model("NoteAction", __base__=NoteStep, observation=observation))
    union = Union[tuple(branches)]  # noqa: UP007  (a runtime tuple of models)
    return create_model("Step", __config__=ConfigDict(extra="forbid"), action=(union, ...))


def _enum(values: list) -> Any:
    return Literal[tuple(dict.fromkeys(values))]  # type: ignore[valid-type]


def choices(hypothesis: str, shown: str | None) -> dict[str, list]:
    """What a narrowed step may pick (see `InvestigatorConfig.narrow`), from the hypothesis and the last
    output as the prompt shows it (numbered `<n>: text` lines give the read starts)."""
    lines = [clip(line.strip(), 160) for line in (shown or "").splitlines() if line.strip()]
    lines = [line for line in lines if not line.endswith(":")]  # a heading ("stays out ...:") says nothing
    numbers = sorted({int(m.group(1)) for line in lines if (m := re.match(r"(\d+):", line))})
    starts = sorted({1, *numbers, *([numbers[-1] + 1] if numbers else [])})[:20]
    return {"words": hypothesis_words(hypothesis), "starts": starts, "quotes": lines[:20]}


STOPWORDS = frozenset(
    "a an and are as at be been but by did do does for from had has have in into is it its of on or than "
    "that the then there these this those to was were which while will with".split()
)


def hypothesis_words(hypothesis: str, limit: int = 12) -> list[str]:
    """The hypothesis's distinct words worth grepping for (lower case, no stopwords), in order."""
    words = re.findall(r"[a-z0-9_][a-z0-9_.-]*[a-z0-9_]|[a-z0-9]", hypothesis.lower())
    kept = [w for w in words if w not in STOPWORDS and len(w) >= 2 and len(w) <= 40]
    return list(dict.fromkeys(kept))[:limit]


def clip(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, marked with ' ...' where cut."""
    return text if len(text) <= limit else text[: limit - 4] + " ..."
