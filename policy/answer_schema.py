"""A task's answer schema (a JSON-schema file) as a pydantic model that grammar-constrained decoding accepts.

Answer-kind tasks declare their deliverable in JSON schema; the backends constrain decoding with a pydantic
model. Only the subset answers use is converted (objects, string enums and lengths, arrays with bounds,
numbers with bounds, booleans, nesting, local `$defs`); anything else is refused with an error naming the
construct and where it is, so a task author learns at once what to change.
"""

from __future__ import annotations

import keyword
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

# -- answer schemas -----------------------------------------------------------------------------------------
_NOTES = {"title", "description", "default", "examples", "$comment", "$schema", "$id"}
"""Annotations: accepted anywhere and ignored (descriptions are kept as field docs)."""
_KEYS = {
    "string": {"enum", "const", "maxLength", "minLength"},
    "integer": {"enum", "const", "minimum", "maximum"},
    "number": {"minimum", "maximum"},
    "boolean": set(),
    "array": {"items", "maxItems", "minItems"},
    "object": {"properties", "required", "additionalProperties", "$defs", "definitions"},
}
_BOUNDS = {"maxLength": "max_length", "minLength": "min_length", "maxItems": "max_length",
           "minItems": "min_length", "minimum": "ge", "maximum": "le"}  # fmt: skip


def schema_model(json_schema: dict, name: str = "Answer") -> type[BaseModel]:
    """A pydantic model (extra="forbid", strict) for an answer file's JSON schema, usable as a grammar
    schema. The subset: objects with properties/required (optional fields may be left out), strings with
    enum/const/maxLength/minLength, arrays with items/maxItems/minItems, integers and numbers with
    minimum/maximum, booleans, nested objects, and local `#/$defs/...` references. Anything else raises a
    ValueError naming the construct and where it is. Keys that are not Python names get aliases; dumps
    use the original keys."""
    if not isinstance(json_schema, dict) or json_schema.get("type") != "object":
        raise ValueError('the answer schema must be a JSON-schema object ({"type": "object", ...})')
    defs = {**json_schema.get("definitions", {}), **json_schema.get("$defs", {})}
    return _annotation(json_schema, name, defs, 0)


def _annotation(node: Any, where: str, defs: dict, depth: int) -> Any:
    if not isinstance(node, dict):
        raise ValueError(f"{where}: a schema must be an object, not {node!r}")
    if depth > 32:
        raise ValueError(f"{where}: nesting deeper than 32 levels (a recursive $ref?) is not supported")
    if "$ref" in node:
        ref, key = node["$ref"], str(node["$ref"]).rsplit("/", 1)[-1]
        if set(node) - _NOTES - {"$ref"} or not str(ref).startswith(("#/$defs/", "#/definitions/")):
            raise ValueError(f"{where}: $ref {ref!r} with siblings or to another document is not supported")
        if key not in defs:
            raise ValueError(f"{where}: $ref {ref!r} names no entry of $defs")
        return _annotation(defs[key], where, defs, depth + 1)
    kind = node.get("type", "string" if "enum" in node or "const" in node else None)
    if kind is None:
        found = ", ".join(sorted(set(node) - _NOTES)) or "an empty schema"
        raise ValueError(f"{where}: {found} without a type is not supported; give a type")
    if not isinstance(kind, str) or kind not in _KEYS:
        raise ValueError(f"{where}: type {kind!r} is not supported; use one of {', '.join(_KEYS)}")
    unknown = set(node) - _NOTES - _KEYS[kind] - {"type"}
    if unknown:
        raise ValueError(f"{where}: {', '.join(sorted(unknown))} ({kind}) is not supported")
    bounds = {_BOUNDS[k]: v for k, v in node.items() if k in _BOUNDS}
    if "enum" in node or "const" in node:
        values = node["enum"] if "enum" in node else [node["const"]]
        if not values or not all(isinstance(v, str | int) and not isinstance(v, bool) for v in values):
            raise ValueError(f"{where}: enum/const needs string or integer values, got {values!r}")
        base: Any = Literal[tuple(dict.fromkeys(values))]  # type: ignore[valid-type]
    elif kind == "array":
        if "items" not in node:
            raise ValueError(f"{where}: an array without items is not supported; give its items' schema")
        base = list[_annotation(node["items"], f"{where}[]", defs, depth + 1)]
    elif kind == "object":
        base = _object(node, where, defs, depth)
    else:
        base = {"string": str, "integer": int, "number": float, "boolean": bool}[kind]
    return Annotated[base, Field(**bounds)] if bounds else base


def _object(node: dict, where: str, defs: dict, depth: int) -> type[BaseModel]:
    if node.get("additionalProperties", False) is not False:
        raise ValueError(f"{where}: additionalProperties other than false is not supported")
    props, required = node.get("properties", {}), node.get("required", [])
    if not isinstance(props, dict) or not isinstance(required, list) or set(required) - set(props):
        raise ValueError(f"{where}: properties must be an object and required a list of its keys")
    fields: dict[str, Any] = {}
    for i, (key, sub) in enumerate(props.items()):
        annotation = _annotation(sub, f"{where}.{key}", defs, depth + 1)
        doc = sub.get("description") if isinstance(sub, dict) else None
        plain = key.isidentifier() and not keyword.iskeyword(key) and not key.startswith(("_", "model_"))
        plain = plain and not hasattr(BaseModel, key)
        default = ... if key in required else None
        field = Field(default, description=doc, alias=None if plain else key)
        fields[key if plain else f"field_{i}"] = (annotation, field)
    config = ConfigDict(extra="forbid", strict=True, serialize_by_alias=True, validate_by_name=True)
    return create_model(re.sub(r"\W", "_", where), __config__=config, **fields)
