"""Reading a model's JSON answer against a pydantic schema: strict, tolerant, and from a cut-off answer.

Every backend validates what it decoded (`validate_json`); a backend without constraints (an
OpenAI-compatible server that ignores `response_format`) parses tolerantly (`parse_json_object`: the
first {...}, trailing commas dropped); and the scientist keeps the complete items of a proposal that ran
out of tokens (`salvage_items`). A failure is a short typed message, never an exception. This module is
pure Python (json and pydantic): the grammar side, which needs torch and xgrammar, is
`policy.backends.grammar`.

Deliberately not done: no repair beyond trailing commas (a broken object is a typed failure, not a
guess).
"""

from __future__ import annotations

import json
import re

from pydantic import BaseModel, ValidationError

_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


def schema_key(schema: type[BaseModel]) -> str:
    """The JSON schema text: the cache key (per-call `create_model` classes share grammars). Keys are
    NOT sorted: property order is the order the grammar makes the model write them."""
    return json.dumps(schema.model_json_schema())


def validation_message(error: ValidationError) -> str:
    """One line per failed field: `field: message` — short enough to show to the scientist."""
    parts = [f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in error.errors()]
    return "schema validation failed: " + "; ".join(parts)


def validate_json(text: str, schema: type[BaseModel]) -> tuple[BaseModel | None, str | None]:
    """(object, None) when `text` is exactly a valid instance of `schema`, else (None, why)."""
    try:
        return schema.model_validate_json(text), None
    except ValidationError as e:
        return None, validation_message(e)


def first_json_object(text: str) -> str | None:
    """The first balanced {...} in `text` (strings and escapes respected), or None."""
    start = text.find("{")
    if start < 0:
        return None
    depth, in_string, escaped = 0, False, False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return None


def parse_json_object(text: str, schema: type[BaseModel]) -> tuple[BaseModel | None, str | None]:
    """Tolerant parse for unconstrained output: (validated object, None) or (None, typed failure).

    Takes the first {...} (prose or code fences around it are ignored) and removes trailing commas;
    nothing else is repaired.
    """
    candidate = first_json_object(text)
    if candidate is None:
        why = "truncated JSON object (no closing brace)" if "{" in text else "no JSON object in the text"
        return None, why
    try:
        data = json.loads(candidate)
    except RecursionError:
        return None, "invalid JSON: nested too deeply"
    except json.JSONDecodeError:
        try:
            data = json.loads(_TRAILING_COMMA.sub(r"\1", candidate))
        except RecursionError:
            return None, "invalid JSON: nested too deeply"
        except json.JSONDecodeError as e:
            return None, f"invalid JSON: {e.msg} at position {e.pos}"
    try:
        return schema.model_validate(data), None
    except ValidationError as e:
        return None, validation_message(e)


def salvage_items(text: str, key: str, item: type[BaseModel]) -> list[BaseModel]:
    """The complete, valid items of the list `key` in a JSON object cut off at max_tokens.

    A proposal of K candidates that runs out of tokens in the K-th still holds K-1 good ones; decoding was
    grammar-constrained, so every item before the cut is well formed. Items that fail `item` are dropped.
    """
    start = text.find(f'"{key}"')
    start = text.find("[", start) if start >= 0 else -1
    if start < 0:
        return []
    decoder, out, i = json.JSONDecoder(), [], start + 1
    while True:
        while i < len(text) and text[i] in " ,\n\t":
            i += 1
        try:
            obj, i = decoder.raw_decode(text, i)
        except (json.JSONDecodeError, RecursionError):  # RecursionError: nested too deeply
            return out
        try:
            out.append(item.model_validate(obj))
        except ValidationError:
            pass
