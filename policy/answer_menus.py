"""Menus from the case material: what a small model is offered when it writes a part of an answer.

Every string enum of a part that lists the case's entities is narrowed to the values its material names
(`narrowed`), then to those the investigation's notes name, so that the model chooses among real
candidates: a service that appears in this incident, a fault a noted line speaks of. A value is named
where it, or one of its words of three letters or more (`cpu_saturation`: "cpu", "saturation"), appears
as a word; a menu that nothing names is left whole. A free string may be held to the lines noted
(`quoting`). Pure functions on JSON schemas; the model call is `policy.investigator`'s.
"""

from __future__ import annotations

import copy
import re
from typing import Any

ENTITY_SHARE = 0.5
"""An enum is a list of the case's entities (services, columns) when at least this share of its values
appear whole in the whole material; only such an enum is narrowed to one part's material."""


def words(text: str) -> set[str]:
    """A text's words, lower case; a dotted word also gives its pieces (`orders.csv`: `orders`, `csv`)."""
    found = re.findall(r"[a-z0-9][a-z0-9_.-]*[a-z0-9]|[a-z0-9]", text.lower())
    return {*found, *(piece for w in found if "." in w for piece in w.split("."))}


def named(value: str, text_words: set[str], pieces: bool = True) -> bool:
    """Whether `value` is named in a text (given as its `words`): whole, or (with `pieces`) by one of its
    words of three letters or more (`cpu_saturation` by "cpu")."""
    v = value.lower()
    return (
        v in text_words or pieces and any(len(w) >= 3 and w in text_words for w in re.split(r"[_\s/-]+", v))
    )


def _strings(node: Any):
    """Every string schema inside a schema (in place), those of array items included."""
    if isinstance(node, dict):
        if node.get("type") == "string":
            yield node
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


def enums(node: Any):
    """Every string enum of a schema (in place)."""
    return (n for n in _strings(node) if isinstance(n.get("enum"), list))


def entities(values: list[str], material_words: set[str]) -> bool:
    """Whether an enum lists the case's entities: `ENTITY_SHARE` of its values named whole in the material."""
    return sum(named(v, material_words, False) for v in values) >= ENTITY_SHARE * len(values)


def narrowed(
    schema: dict, text: str, whole: str = "", entities_only: bool = False, by_mention: bool = False
) -> dict:
    """A copy of `schema` whose string enums keep only the values `text` names (in the order it first names
    them with `by_mention`, else the schema's); an enum that `text` names none of stays whole. With
    `entities_only`, only enums of the case's entities are narrowed (`entities`: values a statement
    enumerates, such as fault kinds, are not named in the material and stay whole)."""
    out, seen, everything = copy.deepcopy(schema), words(text), words(whole)
    for enum in enums(out):
        values = enum["enum"]
        if entities_only and not entities(values, everything):
            continue
        if kept := [v for v in values if named(v, seen)]:
            enum["enum"] = sorted(kept, key=lambda v: _first_mention(v, text.lower())) if by_mention else kept
    return out


def _first_mention(value: str, text: str) -> int:
    """Where `text` first names `value` (as `named` reads it); a narrowed menu lists values in this order,
    so the value the first note names comes first."""
    pieces = [value.lower(), *(w for w in re.split(r"[_\s/-]+", value.lower()) if len(w) >= 3)]
    found = [m.start() for p in pieces if (m := re.search(rf"(?<![a-z0-9]){re.escape(p)}(?![a-z0-9])", text))]
    return min(found, default=len(text))


def quoting(schema: dict, quotes: list[str]) -> dict:
    """A copy of `schema` whose free strings (no enum) must be one of `quotes` that fits their length: an
    answer's evidence line is then a line the investigation noted, never invented text."""
    out = copy.deepcopy(schema)
    for node in _strings(out):
        if "enum" not in node and "const" not in node:
            lo, hi = node.get("minLength", 0), node.get("maxLength", 10**9)
            if fits := list(dict.fromkeys(q for q in quotes if lo <= len(q) <= hi)):
                node["enum"] = fits
    return out
