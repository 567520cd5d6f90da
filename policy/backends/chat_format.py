"""Chat requests in the OpenAI format: prompts as chats, `response_format`, request arguments, and the
schema written into the prompt for servers that take no `response_format`. Shared by the `openai` and
`vllm` backends; no network here."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from arts.policy.backends.spelling import without_phrases
from arts.policy.base import Completion, Message, Prompt, Sampling
from arts.policy.parsing import parse_json_object


def as_messages(prompt: Prompt) -> list[Message]:
    """A bare string becomes one user message; a message list is taken as it is."""
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)


def prompt_batch(prompts: Prompt | list[Prompt]) -> list[list[Message]]:
    """One prompt (a string, or a list of message dicts) or a list of prompts → a list of chats."""
    if isinstance(prompts, str) or (prompts and isinstance(prompts[0], dict)):
        return [as_messages(prompts)]  # type: ignore[arg-type]
    return [as_messages(p) for p in prompts]  # type: ignore[union-attr]


def json_schema_format(schema: type[BaseModel]) -> dict[str, Any]:
    """The OpenAI `response_format` for a pydantic model (strict JSON-schema mode)."""
    return {
        "type": "json_schema",
        "json_schema": {
            "name": schema.__name__,
            "schema": without_phrases(schema.model_json_schema()),
            "strict": True,
        },
    }


def request_kwargs(model: str, messages: list[Message], n: int, sampling: Sampling) -> dict[str, Any]:
    """Chat-completions arguments; unset options are left out rather than sent as null."""
    kwargs: dict[str, Any] = {"model": model, "messages": messages, "temperature": sampling.temperature}
    kwargs |= {"top_p": sampling.top_p, "max_tokens": sampling.max_tokens}
    if sampling.stop:
        kwargs["stop"] = list(sampling.stop)
    if sampling.seed is not None:
        kwargs["seed"] = sampling.seed
    if n > 1:
        kwargs["n"] = n
    return kwargs


def finish(completion: Completion, schema: type[BaseModel] | None) -> Completion:
    """Fill `parsed`/`error` from the text when a schema was asked for."""
    if schema is not None:
        completion.parsed, completion.error = parse_json_object(completion.text, schema)
    return completion


def schema_prompt(messages: list[Message], schema: type[BaseModel]) -> list[Message]:
    """The chat with the schema appended to its last user turn, for servers without `response_format`.
    (Appended, not a new message: many chat templates insist on alternating roles, system first.)"""
    spec = json.dumps(schema.model_json_schema())
    note = f"\n\nAnswer with one JSON object, nothing else, matching this JSON schema:\n{spec}"
    out = [dict(m) for m in messages]
    if out and out[-1].get("role") == "user":
        out[-1]["content"] = f"{out[-1]['content']}{note}"
    else:
        out.append({"role": "user", "content": note.strip()})
    return out
