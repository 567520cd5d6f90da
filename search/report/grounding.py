"""Grounding model-written text: how numbers are read, and every method claimed must be one the code ran.

A small scientist model writes fluent text with invented numbers ("accuracy rose to 0.97", "a 4.5x
speed-up") and invented methods ("the random forest on MNIST"). Reports built from that text must not
pass those off as results. `numbers` reads the numbers as written (checked against the store, with their
words, by `search.report.claims`, which replaces those that do not stand with "[unmeasured]"), and
`unsupported_claims` lists the methods, libraries and data sets the text names but the code that
actually ran shows no sign of; `mark_methods` marks each such mention in place.

Method claims come from a fixed vocabulary, so a method outside it is neither flagged nor confirmed, and
a code signature shows a method appears in the code, not that it ran. Negation is read only from a few
words right before a mention ("without a random forest").
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


REDACTED = "[unmeasured]"
"""What an unmeasured number is replaced with (its unit, such as % or x, is kept after it)."""
UNSUPPORTED = " [not in code]"
"""Appended after each mention of a method that the code that ran does not show."""

_NUMBER = re.compile(
    r"(?<![\w.])"  # not inside a word, an identifier or another number (i3, x2, SmolLM2, 1.2.3)
    r"(?<![^\W\d_]-)"  # nor a hyphenated name's digits (CIFAR-10, GPT-2)
    r"(?P<num>[-\u2212]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?)"
    r"(?P<unit>\s?%|[x\u00d7]|s)?"
    r"(?![\w%]|\.\d)"
)


class Span(BaseModel):
    """One number as written in a text."""

    model_config = ConfigDict(extra="forbid")
    start: int
    """Offset of its first character (the sign, if any)."""
    end: int
    """Offset just past its last digit (the unit is not part of the span)."""
    text: str
    """The number as written, e.g. '13,365,000' or '-1.2e-3'."""
    value: float
    """Its value (separators removed)."""
    unit: str = ""
    """'%', 'x' (or '×') or 's' when written right after it; empty otherwise."""


class Sanitized(BaseModel):
    """A text with its unmeasured numbers replaced."""

    model_config = ConfigDict(extra="forbid")
    text: str
    """The text, each unmeasured number replaced by REDACTED."""
    redacted: list[str] = []
    """The numbers that were replaced, as written, in order."""


class Grounded(BaseModel):
    """A text checked against the store and the code that ran."""

    model_config = ConfigDict(extra="forbid")
    text: str
    """Sanitised text, each mention of an unsupported method followed by UNSUPPORTED."""
    redacted: list[str] = []
    """The numbers that were replaced, as written."""
    unsupported: list[str] = []
    """Canonical names of the methods claimed but not found in the code."""


def flat_numbers(x: Any) -> Iterable[float]:
    """Every finite number inside a value (dicts and lists walked; bools and None skipped)."""
    if isinstance(x, bool) or x is None:  # a bool is an int in Python, and no measurement
        return
    if isinstance(x, int | float):
        if math.isfinite(x):
            yield float(x)
    elif isinstance(x, dict):
        for v in x.values():
            yield from flat_numbers(v)
    elif isinstance(x, list | tuple):
        for v in x:
            yield from flat_numbers(v)


def numbers(text: str) -> list[Span]:
    """The numbers written in `text`, in order ('13,365,000' is one; the 2 of 'SmolLM2' is none)."""
    spans = []
    for m in _NUMBER.finditer(text):
        written = m.group("num")
        value = float(written.replace(",", "").replace("\u2212", "-"))
        unit = (m.group("unit") or "").strip()
        spans.append(Span(start=m.start("num"), end=m.end("num"), text=written, value=value, unit=unit))
    return spans


_S = r"[\s_-]*"  # a separator between the words of a name: space, hyphen, underscore, or none
_VOCABULARY: tuple[tuple[str, str, str], ...] = tuple(
    (c["name"], c["prose"].replace("~", _S), c["code"])
    for c in tomllib.loads((Path(__file__).with_name("vocabulary.toml")).read_text())["concept"]
)
"""(canonical name, aliases in prose, signatures in code), from `vocabulary.toml`, which says how each is
matched."""
_PROSE = [
    (name, re.compile(rf"(?<![a-z0-9])(?:{aliases})(?:e?s)?(?![a-z])", re.IGNORECASE))
    for name, aliases, _ in _VOCABULARY
]
_CODE = {name: re.compile(sig, re.IGNORECASE) for name, _, sig in _VOCABULARY}
_NEGATED = re.compile(
    r"\b(?:no|not|without|instead of|rather than|never|nor)\b(?:\s+[\w-]+){0,2}\s*$", re.IGNORECASE
)


def _mentions(text: str) -> list[tuple[int, int, str]]:
    """(start, end, canonical name) of every mention of a vocabulary entry that is not negated."""
    found = []
    for name, pattern in _PROSE:
        for m in pattern.finditer(text):
            if not _NEGATED.search(text[max(0, m.start() - 40) : m.start()]):
                found.append((m.start(), m.end(), name))
    return sorted(found)


def claimed_methods(text: str) -> set[str]:
    """Canonical names of the libraries, models, data sets and algorithms the text claims were used."""
    return {name for _, _, name in _mentions(text)}


def unsupported_claims(text: str, code: str) -> list[str]:
    """Claimed methods that the code that actually ran shows no sign of, sorted."""
    return sorted(name for name in claimed_methods(text) if not _CODE[name].search(code))


def mark_methods(clean: Sanitized, code: str) -> Grounded:
    """Mark in place each mention, in an already sanitised text, of a method the code does not show."""
    unsupported = unsupported_claims(clean.text, code)
    out = clean.text
    # Insert from the end so the earlier offsets stay valid; overlapping mentions get one mark.
    ends = sorted({end for _, end, name in _mentions(out) if name in unsupported}, reverse=True)
    for end in ends:
        out = out[:end] + UNSUPPORTED + out[end:]
    return Grounded(text=out, redacted=clean.redacted, unsupported=unsupported)
