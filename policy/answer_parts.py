"""An answer in parts, and menus from the case material: what a small model is offered when it writes one.

A diagnosis answer often holds one entry per case (`{"incidents": {"i1": {...}, "i2": {...}}}`) whose
material lies in a folder of the same name (`incidents/i1/`). Asked for the whole answer at once, the 135M
default wrote one case and copied it to the others (incident-rca: the same root and fault for all four).
So such an answer is split into parts (`split`), each written alone from its own folder's material; and
every string enum of a part is narrowed to the values its material names (`narrowed`), then to those the
investigation's notes name (`named`), so that the model chooses among real candidates: a service that
appears in this incident, a fault a noted line speaks of. A value is named where it, or one of its words
of three letters or more (`cpu_saturation`: "cpu", "saturation"), appears as a
word; a menu that nothing names is left whole.

Pure functions on JSON schemas and answers; the model call and the tools are `policy.investigator`'s.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

ENTITY_SHARE = 0.5
"""An enum is a list of the case's entities (services, columns) when at least this share of its values
appear whole in the whole material; only such an enum is narrowed to one part's material."""


@dataclass(frozen=True)
class Part:
    """One entry of the answer, written on its own."""

    name: str
    path: tuple[str, ...]
    """The keys from the answer's top to the entry (`("incidents", "i1")`)."""
    folder: str
    """The material folder of the entry (`incidents/i1/`)."""
    schema: dict
    """The entry's JSON schema (an object)."""


def split(schema: dict, material: list[str], depth: int = 3) -> list[Part]:
    """The answer's parts: the first object (within `depth` levels) of which two or more properties are
    objects named as a material folder; [] when there are none (the answer is written whole)."""

    def walk(node: dict, path: tuple[str, ...], left: int) -> list[Part]:
        props = node.get("properties") or {}
        parts = []
        for key, sub in props.items():
            folder = _folder(key, material)
            if folder and isinstance(sub, dict) and sub.get("type") == "object":
                parts.append(Part(key, (*path, key), folder, sub))
        if len(parts) >= 2:
            return parts
        for key, sub in props.items():
            if left > 0 and isinstance(sub, dict) and sub.get("type") == "object":
                if found := walk(sub, (*path, key), left - 1):
                    return found
        return []

    return walk(inline(schema), (), depth)


def inline(schema: dict) -> dict:
    """`schema` with its local references (`#/$defs/x`, `#/definitions/x`) replaced by what they name, so
    that a part's schema stands alone (a reference nested more than 16 deep is left as it is)."""
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}

    def walk(node: Any, left: int) -> Any:
        if isinstance(node, list):
            return [walk(v, left) for v in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and left > 0 and (name := ref.rsplit("/", 1)[-1]) in defs:
            return walk({**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}, left - 1)
        return {k: walk(v, left) for k, v in node.items() if k not in ("$defs", "definitions")}

    return walk(schema, 16)


def _folder(key: str, material: list[str]) -> str:
    """The folder prefix (`incidents/i1/`) of the material files inside a folder named `key`."""
    for path in material:
        parts = path.split("/")[:-1]
        if key in parts:
            return "/".join(parts[: parts.index(key) + 1]) + "/"
    return ""


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


def enums(node: Any):
    """Every string enum list of a schema (in place), including those of array items."""
    if isinstance(node, dict):
        if node.get("type") == "string" and isinstance(node.get("enum"), list):
            yield node
        for value in node.values():
            yield from enums(value)
    elif isinstance(node, list):
        for value in node:
            yield from enums(value)


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


def get(answer: dict | None, path: tuple[str, ...]) -> dict | None:
    node: Any = answer
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node if isinstance(node, dict) else None


def put(answer: dict | None, path: tuple[str, ...], value: dict) -> dict:
    """A copy of `answer` with the entry at `path` replaced (missing levels created)."""
    out = copy.deepcopy(answer) if isinstance(answer, dict) else {}
    node = out
    for key in path[:-1]:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    node[path[-1]] = value
    return out


def minimal(schema: dict) -> Any:
    """The simplest value a (converted subset of) JSON schema accepts: an enum's first value, bounds'
    lower ends, required keys only. Stands for a part not written yet, so that an answer is always whole."""
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties") or {}
        return {k: minimal(props[k]) for k in schema.get("required", []) if k in props}
    if kind == "array":
        return [minimal(schema.get("items") or {})] * schema.get("minItems", 0)
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    return "?" * schema.get("minLength", 0)


def quoting(schema: dict, quotes: list[str]) -> dict:
    """A copy of `schema` whose free strings (no enum) must be one of `quotes` that fits their length: an
    answer's evidence line is then a line the investigation noted, never invented text."""
    out = copy.deepcopy(schema)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "string" and "enum" not in node and "const" not in node:
                lo, hi = node.get("minLength", 0), node.get("maxLength", 10**9)
                if fits := list(dict.fromkeys(q for q in quotes if lo <= len(q) <= hi)):
                    node["enum"] = fits
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(out)
    return out
