"""One structured model call: a chat prompt, a schema, one completion.

The scientist, the analyst, the investigator and the executor all ask the same way: a short chat
prompt, one completion decoded under a per-call pydantic schema, sampling set per call (temperature,
token cap, seed), an optional LoRA adapter, and a `purpose` that labels the call's usage in the run's
store. `ask` is that call. What an answer means (a typed failure, a salvaged list, a transcript entry)
stays with each caller.

`ask_n` asks for n completions of one prompt (one prefill): the scientist's N verbalized lists, from each
of which one action of a group is drawn. Deliberately not done: retries (a failed answer is a result the
search learns from), and batching several prompts (`search.batching` does that).
"""

from __future__ import annotations

import time
from typing import Protocol

from pydantic import BaseModel

from arts.policy.base import Backend, Completion, Message, Sampling


class Spent(Protocol):
    """Where a caller adds up the model time and tokens of its calls (the executor's and the
    investigator's results)."""

    model_s: float
    prompt_tokens: int
    completion_tokens: int


def chat(system: str, user: str) -> list[Message]:
    """The two-message prompt every role sends: its system line, then the user turn."""
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def ask(
    backend: Backend,
    messages: list[Message],
    schema: type[BaseModel],
    *,
    purpose: str,
    temperature: float,
    max_tokens: int,
    seed: int | None = None,
    adapter: str | None = None,
    spent: Spent | None = None,
) -> Completion:
    """One completion of `messages` under `schema`. Never raises on model output: an answer that does
    not validate comes back with `parsed` None and the reason in `error`. With `spent`, the call's wall
    time (as the caller waited for it) and its tokens are added there."""
    return ask_n(
        backend, messages, schema, 1, purpose=purpose, temperature=temperature, max_tokens=max_tokens,
        seed=seed, adapter=adapter, spent=spent,
    )[0]  # fmt: skip


def ask_n(
    backend: Backend,
    messages: list[Message],
    schema: type[BaseModel],
    n: int,
    *,
    purpose: str,
    temperature: float,
    max_tokens: int,
    seed: int | None = None,
    adapter: str | None = None,
    spent: Spent | None = None,
) -> list[Completion]:
    """n independent completions of `messages` under `schema` (as `ask`, one prefill for all)."""
    sampling = Sampling(temperature=temperature, max_tokens=max_tokens, seed=seed)
    t0 = time.perf_counter()
    out = backend.generate(messages, n=n, sampling=sampling, schema=schema, adapter=adapter, purpose=purpose)
    comps = out[0]
    if spent is not None:
        spent.model_s += time.perf_counter() - t0
        spent.prompt_tokens += sum(c.prompt_tokens for c in comps)
        spent.completion_tokens += sum(c.completion_tokens for c in comps)
    return comps
