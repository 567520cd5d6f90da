"""Structured answers: pydantic schema -> xgrammar grammar -> per-step token masks; and tolerant parsing.

Constrained decoding keeps even a 135M model inside the schema: at every step the grammar matcher of
each sequence fills a packed bitmask of allowed tokens, and disallowed logits become -inf. The same
masks can be replayed over a finished completion (`replay_bitmasks`), so log-probabilities computed
later (for GRPO) are taken under exactly the distribution sampling used. Whitespace is compact
(`any_whitespace=False`): free whitespace lets a tiny model loop on spaces until max_tokens.

`parse_json_object` serves backends without constraints (an OpenAI-compatible server that ignores
`response_format`): it extracts the first {...}, drops trailing commas, and validates.

Deliberately not done: no repair beyond trailing commas (a broken object is a typed failure, not a
guess), and no grammar for anything but JSON objects described by a pydantic model.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import torch
import xgrammar as xgr
from pydantic import BaseModel, ValidationError

_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


def schema_key(schema: type[BaseModel]) -> str:
    """The JSON schema text: the cache key (per-call `create_model` classes share grammars). Keys are
    NOT sorted: property order is the order the grammar makes the model write them."""
    return json.dumps(schema.model_json_schema())


class GrammarCache:
    """Compiled grammars for one tokenizer: the compiler is built once, grammars once per schema.

    `vocab_size` is the model's logits width (it may exceed the tokenizer's vocabulary); `stop_ids` are
    the tokens that end a completion, which the grammar allows exactly once the object is complete.
    """

    def __init__(self, tokenizer: Any, vocab_size: int, stop_ids: list[int]):
        info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size, stop_token_ids=stop_ids)
        self.vocab_size = vocab_size
        self._compiler = xgr.GrammarCompiler(info, max_threads=2)
        self._grammars: dict[str, xgr.CompiledGrammar] = {}

    def compile(self, schema: type[BaseModel]) -> xgr.CompiledGrammar:
        key = schema_key(schema)
        if key not in self._grammars:
            self._grammars[key] = self._compiler.compile_json_schema(
                key, any_whitespace=False, strict_mode=True
            )
        return self._grammars[key]

    def matchers(self, schema: type[BaseModel], n: int) -> list[xgr.GrammarMatcher]:
        grammar = self.compile(schema)
        return [xgr.GrammarMatcher(grammar) for _ in range(n)]

    def bitmask(self, rows: int) -> torch.Tensor:
        return xgr.allocate_token_bitmask(rows, self.vocab_size)

    def replay_bitmasks(
        self, schema: type[BaseModel], token_ids: list[int]
    ) -> tuple[torch.Tensor, int | None]:
        """The packed mask before each token of `token_ids`, as sampling saw it: (len, ceil(V/32)) int32.

        Also returns the index of the first token the grammar rejects (None when all are accepted);
        from there on the masks are all-ones (nothing to replay), and that token's probability is zero.
        """
        matcher = xgr.GrammarMatcher(self.compile(schema))
        masks = self.bitmask(max(len(token_ids), 1))[: len(token_ids)]
        for i, token in enumerate(token_ids):
            matcher.fill_next_token_bitmask(masks, i)
            if not matcher.accept_token(token):
                masks[i + 1 :] = -1
                return masks, i
        return masks, None


def fill_and_apply(logits: torch.Tensor, matchers: list[xgr.GrammarMatcher], bitmask: torch.Tensor) -> None:
    """Mask `logits` (rows, V) in place with each row's grammar: disallowed tokens become -inf."""
    rows = logits.shape[0]
    for i, matcher in enumerate(matchers):
        matcher.fill_next_token_bitmask(bitmask, i)
    xgr.apply_token_bitmask_inplace(logits, bitmask[:rows].to(logits.device, non_blocking=True))


def unpack_bitmask(bitmask: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Packed masks (..., ceil(V/32)) int32 -> bool (..., V), True = allowed. For masked training.

    Unpacked byte-wise (one byte per token in the intermediate, not four); needs a little-endian host.
    """
    if sys.byteorder != "little":  # pragma: no cover
        raise RuntimeError("unpack_bitmask assumes a little-endian host")
    as_bytes = bitmask.contiguous().view(torch.uint8)
    shifts = torch.arange(8, dtype=torch.uint8, device=bitmask.device)
    bits = (as_bytes.unsqueeze(-1) >> shifts) & 1
    return bits.reshape(*bitmask.shape[:-1], -1)[..., :vocab_size].bool()


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
    except json.JSONDecodeError:
        try:
            data = json.loads(_TRAILING_COMMA.sub(r"\1", candidate))
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
        except json.JSONDecodeError:
            return out
        try:
            out.append(item.model_validate(obj))
        except ValidationError:
            pass
