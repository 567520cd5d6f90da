"""OpenAI's wire format for chat answers: whole responses, token log-probs, and event streams.

Why a module of its own: `arts serve` (`policy.backends.serve`) holds the routes and what they check;
this holds what the openai client parses, so that the shapes are in one place and a route stays short.

A stream is fed token by token where the backend's `generate` takes `on_tokens` (the transformers
backend does): decoding runs in a worker thread and every decoded token becomes a chunk at once, so the
first text arrives after the prefill and one step, not after the whole answer. A backend without it is
streamed when its answer is done, in word-sized chunks. Streamed text is released in whole characters
(a token may end inside a UTF-8 sequence) and never past a stop string: the last characters that a
stop string could still begin with wait for the next token.

A token's log-prob entry carries its own bytes (joined, a choice's tokens give its content even where
a character spans tokens) and their text, U+FFFD where the token holds part of a character. The stop
token is counted (as `completion_tokens` counts it) and shows as nothing.
"""

from __future__ import annotations

import json
import queue
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from arts.policy.base import Completion

Decode = Callable[[list[int]], str]
"""Token ids to text (special tokens left out)."""
TokenBytes = Callable[[int], bytes]
"""A token id's own bytes (b"" for special tokens)."""
Generate = Callable[[Any], list[Completion]]
"""Runs the request: called with an `on_tokens` sink (or None), returns one prompt's completions."""


class ApiError(Exception):
    """An error answered in OpenAI's shape: {"error": {"message", "type", "code"}}."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "code": self.status}}


class StreamClosed(Exception):
    """Raised inside decoding when the client of a stream has gone, so the worker stops early."""


class TextStream:
    """One choice's text as its tokens arrive (see the module docstring)."""

    def __init__(self, decode: Decode, stop: list[str]):
        self.decode, self.stop = decode, stop
        self.hold = max((len(s) for s in stop), default=1) - 1
        self.ids: list[int] = []
        self.text = ""
        self.sent = 0  # characters of `text` already sent
        self.prefix = self.read = 0  # ids[prefix:read] were decoded last time, as context for the next
        self.cut = False

    def push(self, ids: list[int]) -> str:
        """The text that can be sent now that `ids` have arrived ("" while a character is incomplete)."""
        self.ids.extend(ids)
        before = self.decode(self.ids[self.prefix : self.read])
        after = self.decode(self.ids[self.prefix :])
        if len(after) > len(before) and not after.endswith("\ufffd"):
            self.text += after[len(before) :]
            self.prefix, self.read = self.read, len(self.ids)
        if self.cut:
            return ""
        hits = [i for i in (self.text.find(s) for s in self.stop) if i >= 0]
        end = min(hits) if hits else len(self.text) - self.hold
        self.cut = bool(hits)
        piece = self.text[self.sent : max(end, self.sent)]
        self.sent += len(piece)
        return piece

    def finish(self, final: str) -> str:
        """What of the completion's final text has not been sent."""
        piece = final[self.sent :]
        self.sent = len(final)
        return piece


def token_entries(
    piece: TokenBytes, token_ids: list[int], logprobs: list[float], top: list[list[tuple[int, float]]]
) -> list[dict[str, Any]]:
    """OpenAI's `logprobs.content` of these tokens: token, logprob, bytes and the top alternatives."""

    def entry(token: int, logprob: float) -> dict[str, Any]:
        raw = piece(token)
        return {"token": raw.decode(errors="replace"), "logprob": logprob, "bytes": list(raw)}

    tops = top or [[] for _ in token_ids]
    return [
        {**entry(t, lp), "top_logprobs": [entry(a, b) for a, b in alts]}
        for t, lp, alts in zip(token_ids, logprobs, tops, strict=True)
    ]


def usage_of(comps: list[Completion]) -> dict[str, Any]:
    prompt = comps[0].prompt_tokens if comps else 0
    completion = sum(c.completion_tokens for c in comps)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def chat_response(model: str, comps: list[Completion], logprobs: TokenBytes | None = None) -> dict[str, Any]:
    """A whole chat completion; with `logprobs` (each token's bytes), each choice's log-probs."""
    choices = []
    for i, c in enumerate(comps):
        choice: dict[str, Any] = {
            "index": i,
            "message": {"role": "assistant", "content": c.text},
            "finish_reason": c.finish_reason or "stop",
        }
        if logprobs is not None:
            content = token_entries(logprobs, c.token_ids, c.logprobs, c.top_logprobs)
            choice["logprobs"] = {"content": content, "refusal": None}
        choices.append(choice)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": usage_of(comps) | {"prompt_tokens_details": {"cached_tokens": 0}},
    }


def stream_events(
    model: str,
    generate: Generate,
    n: int,
    include_usage: bool,
    *,
    decode: Decode,
    stop: list[str],
    live: bool,
    logprobs: TokenBytes | None = None,
) -> Iterator[str]:
    """Server-sent events of one chat completion: the role at once, then the text as it is decoded
    (`live`) or when the answer is done, a `finish_reason` chunk per choice, usage if asked, [DONE]."""
    head = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}  # fmt: skip

    def event(choices: list[dict[str, Any]], **extra: Any) -> str:
        return f"data: {json.dumps({**head, 'choices': choices, **extra})}\n\n"

    def chunk(i: int, text: str, entries: list[dict[str, Any]] | None) -> str:
        choice: dict[str, Any] = {"index": i, "delta": {"content": text}, "finish_reason": None}
        if entries is not None:
            choice["logprobs"] = {"content": entries, "refusal": None}
        return event([choice])

    yield event([{"index": i, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
                 for i in range(n)])  # fmt: skip
    texts = [TextStream(decode, stop) for _ in range(n)]
    items: queue.Queue[tuple[Any, ...]] = queue.Queue()
    closed = threading.Event()

    def on_tokens(i: int, sample: Any, new: int) -> None:
        if closed.is_set():
            raise StreamClosed
        top = sample.top[-new:] if sample.top else []
        items.put(("tokens", i, sample.token_ids[-new:], sample.logprobs[-new:], top))

    def work() -> None:
        try:
            items.put(("done", generate(on_tokens if live else None)))
        except StreamClosed:
            pass
        except ApiError as e:
            items.put(("error", e))
        except Exception as e:  # the status line is sent: an error can only go in the stream
            items.put(("error", ApiError(500, f"internal error: {type(e).__name__}: {e}", "server_error")))

    threading.Thread(target=work, name="arts-serve-stream", daemon=True).start()
    try:
        while (item := items.get())[0] == "tokens":
            _, i, ids, lps, top = item
            piece = texts[i].push(ids)
            entries = token_entries(logprobs, ids, lps, top) if logprobs is not None else None
            if piece or entries:
                yield chunk(i, piece, entries)
        if item[0] == "error":  # as OpenAI's streams carry one
            yield f"data: {json.dumps(item[1].body())}\n\n"
            return
        comps: list[Completion] = item[1]
        for i, c in enumerate(comps):
            rest = texts[i].finish(c.text)
            entries = None
            if logprobs is not None and not live:
                entries = token_entries(logprobs, c.token_ids, c.logprobs, c.top_logprobs)
            for piece in re.findall(r"\s*\S+|\s+", rest) or ([""] if entries else []):
                yield chunk(i, piece, entries)
                entries = None
            yield event([{"index": i, "delta": {}, "finish_reason": c.finish_reason or "stop"}])
        if include_usage:
            yield event([], usage=usage_of(comps))
        yield "data: [DONE]\n\n"
    finally:
        closed.set()
