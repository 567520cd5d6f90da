"""Grounding model-written text: every number must be one the store measured, every method one the code ran.

A small scientist model writes fluent text with invented numbers ("accuracy rose to 0.97", "a 4.5x
speed-up") and invented methods ("the random forest on MNIST"). Reports and summaries built from that
text must not pass those off as results, so this module checks both against the record: `sanitize`
replaces every number that matches no measured value (within a relative tolerance) with "[unmeasured]",
and `unsupported_claims` lists the methods, libraries and data sets the text names but the code that
actually ran shows no sign of. `ground` does both and marks each unsupported mention in place.

Not done here: no understanding of what a number refers to (a measured 0.91 quoted as another node's
score passes); derived numbers (differences, ratios, percent changes) are redacted unless they happen to
equal a measured value; method claims come from a fixed vocabulary, so a method outside it is neither
flagged nor confirmed, and a code signature shows a method appears in the code, not that it ran. Negation
is read only from a few words right before a mention ("without a random forest").
"""

from __future__ import annotations

import bisect
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

from arts.search.state import SearchState

REDACTED = "[unmeasured]"
"""What an unmeasured number is replaced with (its unit, such as % or x, is kept after it)."""
UNSUPPORTED = " [not in code]"
"""Appended after each mention of a method that the code that ran does not show."""
_MEASURED_EVENTS = ("eval", "test", "update", "usage", "finish")
"""Event kinds whose payload numbers were measured by the harness (others hold model-stated numbers)."""

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


def _flatten(x: Any) -> Iterable[float]:
    if isinstance(x, bool) or x is None:  # a bool is an int in Python, and no measurement
        return
    if isinstance(x, int | float):
        if math.isfinite(x):
            yield float(x)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _flatten(v)
    elif isinstance(x, list | tuple):
        for v in x:
            yield from _flatten(v)


def measured_values(state: SearchState) -> list[float]:
    """Every number the store measured or counted, sorted and unique."""
    out: set[float] = set()
    nodes = list(state.nodes.values())
    for n in nodes:
        out.update(_flatten([n.id, n.round, n.depth, n.raw_score, n.score, n.eval_s, n.metrics]))
    valid = sum(n.status == "valid" for n in nodes)
    invalid = sum(n.status == "invalid" for n in nodes)
    seeds = sum(n.status == "seed" for n in nodes)
    # Counts as a report states them: with and without the seed, valid, invalid, evaluated.
    out.update(map(float, (len(nodes), len(nodes) - seeds, valid, valid + seeds, invalid, valid + invalid)))
    out.update(map(float, (len(state.hypotheses), len(state.observations))))
    evals = [e for e in state.events.values() if e.kind in _MEASURED_EVENTS]
    out.add(float(sum(e.kind == "eval" for e in evals)))
    for e in evals:
        out.update(_flatten(e.payload))
    out.update(_flatten(state.meta))
    return sorted(out)


def numbers(text: str) -> list[Span]:
    """The numbers written in `text`, in order ('13,365,000' is one; the 2 of 'SmolLM2' is none)."""
    spans = []
    for m in _NUMBER.finditer(text):
        written = m.group("num")
        value = float(written.replace(",", "").replace("\u2212", "-"))
        unit = (m.group("unit") or "").strip()
        spans.append(Span(start=m.start("num"), end=m.end("num"), text=written, value=value, unit=unit))
    return spans


def _matches(v: float, measured: list[float], rel_tol: float) -> bool:
    """Whether some measured m has |v - m| <= rel_tol * |m| (`measured` sorted; exact for zero)."""
    if v == 0:
        i = bisect.bisect_left(measured, 0.0)
        return i < len(measured) and measured[i] == 0.0
    # |v - m| <= tol*|m| puts m (same sign as v) between v/(1+tol) and v/(1-tol); widen a hair for
    # rounding, then check exactly.
    a, b = v / (1 + rel_tol), v / (1 - rel_tol)
    lo, hi = min(a, b), max(a, b)
    lo, hi = lo - abs(lo) * 1e-12, hi + abs(hi) * 1e-12
    i = bisect.bisect_left(measured, lo)
    while i < len(measured) and measured[i] <= hi:
        if abs(v - measured[i]) <= rel_tol * abs(measured[i]):
            return True
        i += 1
    return False


def sanitize(text: str, values: Iterable[float], rel_tol: float = 0.01) -> Sanitized:
    """Replace every number that matches no measured value (relative tolerance; '12%' may be 12 or 0.12)."""
    if not 0 <= rel_tol < 1:
        raise ValueError(f"rel_tol must be in [0, 1), got {rel_tol}")
    measured = sorted(v for v in values if math.isfinite(v))
    pieces: list[str] = []
    redacted: list[str] = []
    last = 0
    for sp in numbers(text):
        if _matches(sp.value, measured, rel_tol) or (
            sp.unit == "%" and _matches(sp.value / 100, measured, rel_tol)
        ):
            continue
        pieces += [text[last : sp.start], REDACTED]
        redacted.append(sp.text)
        last = sp.end
    pieces.append(text[last:])
    return Sanitized(text="".join(pieces), redacted=redacted)


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


def ground(text: str, values: Iterable[float], code: str, rel_tol: float = 0.01) -> Grounded:
    """Sanitise the numbers, then mark in place each mention of a method the code does not show.

    Marking rather than deleting keeps the sentence readable and shows the reader exactly which words
    are the model's claim; numbers are replaced outright because a wrong number read as a result misleads
    even when it is flagged.
    """
    clean = sanitize(text, values, rel_tol)
    unsupported = unsupported_claims(clean.text, code)
    out = clean.text
    # Insert from the end so the earlier offsets stay valid; overlapping mentions get one mark.
    ends = sorted({end for _, end, name in _mentions(out) if name in unsupported}, reverse=True)
    for end in ends:
        out = out[:end] + UNSUPPORTED + out[end:]
    return Grounded(text=out, redacted=clean.redacted, unsupported=unsupported)
