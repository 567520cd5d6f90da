"""An answer in parts: one entry per case, written on its own from the case's folder.

A diagnosis answer often holds one entry per case (`{"incidents": {"i1": {...}, "i2": {...}}}`) whose
material lies in a folder of the same name (`incidents/i1/`). Asked for the whole answer at once, the 135M
default wrote one case and copied it to the others (incident-rca: the same root and fault for all four).
So such an answer is split into parts (`split`), each written alone from its own folder's material, and
put back into the whole (`get`, `put`, `minimal` for a part not written yet). What each part offers is
`policy.answer_menus`. Pure functions on JSON schemas and answers.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any


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
