"""What a chat-completions request asks of `arts serve`, checked before any decoding.

Why a module of its own: the route (`policy.backends.serve`) should read as what it does; the fields
the server honours, the 400s for what it cannot honour (each naming the field and what to give), and
what a backend offers beyond the `Backend` protocol (token streaming, top log-probs, token bytes) are
decided here. Fields of OpenAI's request that are not listed are ignored, as vLLM ignores them.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from arts.policy.backends.chat_wire import ApiError, Decode, TokenBytes
from arts.policy.backends.schemas import schema_model
from arts.policy.base import Backend, Message, Sampling


class ChatRequest(BaseModel):
    """The part of OpenAI's chat-completions request that arts serve honours (others are ignored)."""

    model_config = ConfigDict(extra="ignore")
    model: str
    messages: list[dict[str, Any]]
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    stop: str | list[str] | None = None
    seed: int | None = None
    response_format: dict[str, Any] | None = None
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=20)


def text_of(content: Any) -> str:
    """Message content as text: a string, or the text parts of an OpenAI content list."""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


def to_messages(raw: list[dict[str, Any]]) -> list[Message]:
    return [{"role": str(m.get("role", "user")), "content": text_of(m.get("content"))} for m in raw]


def sampling_of(req: ChatRequest) -> Sampling:
    """The request's decoding settings; a 400 naming each field out of range."""
    if not 1 <= req.n <= 64:
        raise ApiError(400, f"n: {req.n} is out of range; give {FIXES['n']}")
    stop = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
    max_tokens = req.max_completion_tokens or req.max_tokens or Sampling().max_tokens
    try:
        return Sampling(
            temperature=req.temperature, top_p=req.top_p, max_tokens=max_tokens, stop=stop, seed=req.seed
        )
    except ValidationError as e:
        raise ApiError(400, field_problems(e.errors())) from None


def request_schema(fmt: dict[str, Any] | None, backend: Backend | None = None) -> type[BaseModel] | None:
    """The schema model of `response_format`, its grammar compiled now where `backend` masks its own
    decoding (a schema without a grammar is the request's fault: a 400, not a failure mid-answer)."""
    schema = _schema(fmt)
    grammars = getattr(backend, "grammars", None)
    if schema is not None and grammars is not None:
        try:
            grammars.compile(schema)
        except ValueError as e:
            raise ApiError(400, f"response_format: {e}") from None
    return schema


def _schema(fmt: dict[str, Any] | None) -> type[BaseModel] | None:
    if not fmt or fmt.get("type") == "text":
        return None
    if fmt.get("type") == "json_object":
        return schema_model({"type": "object"}, "JsonObject")
    if fmt.get("type") != "json_schema" or "schema" not in fmt.get("json_schema", {}):
        raise ApiError(
            400,
            'response_format: give {"type": "json_schema", "json_schema": {"schema": {...}}}, '
            '{"type": "json_object"} or {"type": "text"}',
        )
    spec = fmt["json_schema"]
    try:
        return schema_model(spec["schema"], str(spec.get("name") or "Answer"))
    except ValueError as e:
        raise ApiError(400, f"response_format: {e}") from None


FIXES = {
    "model": "a served model's name (GET /v1/models lists them)",
    "messages": 'a list of {"role": ..., "content": ...} objects',
    "temperature": "a number from 0 (greedy) up",
    "top_p": "a number above 0 and at most 1",
    "max_tokens": "a whole number from 1 up",
    "max_completion_tokens": "a whole number from 1 up",
    "n": "a whole number from 1 to 64",
    "logprobs": "true or false",
    "top_logprobs": "a whole number from 0 to 20, with logprobs: true",
    "stop": "a string or a list of strings",
    "seed": "a whole number",
}
"""What to give for each request field, appended to a message about it."""


def field_problems(errors: Any) -> str:
    """Pydantic's errors as one line per field: the field, what is wrong, what to give (no URLs)."""
    lines = []
    for err in errors:
        loc = [str(x) for x in err.get("loc", ()) if x != "body"]
        if err.get("type") == "json_invalid":
            lines.append(f"body: not valid JSON ({err.get('ctx', {}).get('error', 'cannot parse')})")
            continue
        field = ".".join(loc) or "body"
        fix = FIXES.get(loc[0]) if loc else None
        lines.append(f"{field}: {err.get('msg')}" + (f"; give {fix}" if fix else ""))
    return "\n".join(dict.fromkeys(lines))


def takes(fn: Any, name: str) -> bool:
    """Whether `fn` has a parameter `name` (what a backend's `generate` offers beyond the protocol)."""
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def logprob_request(backend: Backend, req: ChatRequest) -> int | None:
    """The `top_logprobs` to ask the backend for (0: the sampled tokens' only), None without
    `logprobs`; a 400 where the request or the backend cannot have them."""
    if not req.logprobs:
        if req.top_logprobs:
            raise ApiError(400, "top_logprobs: needs logprobs: true in the same request")
        return None
    if not (takes(backend.generate, "top_logprobs") and hasattr(backend, "tokenizer")):
        raise ApiError(
            400,
            f"logprobs: the {backend.name} backend behind this server does not record log-probs on chat "
            "answers; send logprobs: false, or score a completion with POST /v1/arts/logprobs",
        )
    return req.top_logprobs or 0


def token_decoder(backend: Backend) -> Decode:
    """Token ids to text as answers show it (special tokens left out)."""
    tokenizer = getattr(backend, "tokenizer", None)
    if tokenizer is None:
        return lambda ids: ""
    return lambda ids: tokenizer.decode(ids, skip_special_tokens=True)


@functools.cache
def _vocab_bytes(tokenizer: Any) -> tuple[list[bytes], frozenset[int]]:
    import xgrammar as xgr

    vocab = xgr.TokenizerInfo.from_huggingface(tokenizer).decoded_vocab  # raw bytes, any tokenizer kind
    return vocab, frozenset(tokenizer.all_special_ids)


def token_bytes(backend: Backend) -> TokenBytes:
    """Each token's own bytes, special tokens (the stop token) empty: a choice's log-prob entries
    join into its content and count its `completion_tokens`."""
    vocab, special = _vocab_bytes(backend.tokenizer)  # type: ignore[attr-defined]
    return lambda token: b"" if token in special or token >= len(vocab) else vocab[token]
