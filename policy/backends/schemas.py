"""JSON schemas as pydantic models, for `arts serve`: clients send schemas, backends take pydantic models.

A flat object of string/number/integer/boolean/enum fields becomes a real pydantic model (`create_model`),
so validation is exact. Any other object schema becomes a permissive model whose `model_json_schema()`
returns the schema verbatim: constrained decoding (xgrammar compiles whatever `model_json_schema()`
returns) enforces the full schema, while the server itself only checks that the answer is a JSON object;
the client validates against its own pydantic model anyway.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, create_model

_SIMPLE: dict[str, type] = {"string": str, "number": float, "integer": int, "boolean": bool}
_PLAIN_KEYS = {"type", "title", "description", "default"}


class _RawSchema(BaseModel):
    """Base of models built from arbitrary JSON schemas: any object validates; the schema is kept."""

    model_config = ConfigDict(extra="allow")
    source_schema: ClassVar[dict[str, Any]] = {}

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        return copy.deepcopy(cls.source_schema)


def schema_model(schema: dict[str, Any], name: str = "Answer") -> type[BaseModel]:
    """A pydantic model for a JSON object schema (see the module docstring for the two cases)."""
    if schema.get("type", "object") != "object":
        raise ValueError("arts serve accepts JSON-object schemas only (type: object)")
    fields = _flat_fields(schema)
    if fields is not None:
        try:
            return create_model(name, __config__=ConfigDict(extra="forbid"), **fields)
        except (TypeError, ValueError, NameError):
            pass  # e.g. a property name pydantic cannot take as a field: keep the schema verbatim
    return type(name, (_RawSchema,), {"source_schema": copy.deepcopy(schema), "__module__": __name__})


def _flat_fields(schema: dict[str, Any]) -> dict[str, Any] | None:
    """pydantic field definitions when every property is a plain scalar or a scalar enum, else None."""
    props = schema.get("properties")
    if not isinstance(props, dict) or not props:
        return None
    required = set(schema.get("required", []))
    fields: dict[str, Any] = {}
    for key, prop in props.items():
        prop = _deref(prop, schema)
        enum = prop.get("enum")
        if not key.isidentifier() or key.startswith(("_", "model_")):
            return None
        if isinstance(enum, list) and enum and all(isinstance(v, str | int | float | bool) for v in enum):
            kind: Any = Literal[tuple(enum)]
        elif prop.get("type") in _SIMPLE and set(prop) <= _PLAIN_KEYS:
            kind = _SIMPLE[prop["type"]]
        else:
            return None
        fields[key] = (kind, ...) if key in required else (kind | None, prop.get("default"))
    return fields


def _deref(prop: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """Resolve a local `#/$defs/X` reference (pydantic writes enums that way)."""
    ref = prop.get("$ref", "")
    if ref.startswith("#/$defs/"):
        return root.get("$defs", {}).get(ref.removeprefix("#/$defs/"), prop)
    return prop
