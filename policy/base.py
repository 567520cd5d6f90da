"""The backend contract: how the scientist and the executor talk to a model.

Every backend (transformers, vLLM, an OpenAI-compatible server) implements `Backend`. A structured call
passes a pydantic model as `schema`; each completion then carries either the validated object or a typed
failure in `error` — never an exception that reaches the search. Usage (tokens, seconds) of every call is
reported to a `UsageSink`, which the search wires to the run's store so budgets can be enforced.
This module holds types only; no model is loaded here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

Message = dict[str, str]
"""One chat message: {"role": "system"|"user"|"assistant", "content": str}."""
Prompt = str | list[Message]
"""A bare string is sent as a single user message."""


class Sampling(BaseModel):
    """Decoding settings for one call."""

    model_config = ConfigDict(extra="forbid")
    temperature: float = Field(0.8, ge=0.0)
    """0 means greedy decoding."""
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: int = Field(256, gt=0)
    """Cap on generated tokens per completion."""
    stop: list[str] = []
    """Generation ends at the first of these strings (not included in the text)."""
    seed: int | None = None
    """Seed for reproducible sampling; None draws fresh randomness."""


class Usage(BaseModel):
    """Tokens and seconds spent by one backend call (all its completions together)."""

    model_config = ConfigDict(extra="forbid")
    backend: str
    model: str
    prompt_tokens: int = 0
    cached_tokens: int = 0
    """Prompt tokens served from a cache (shared prefill, prefix cache)."""
    completion_tokens: int = 0
    wall_s: float = 0.0
    purpose: str = ""
    """Who asked: 'audit', 'propose', 'executor', ... (set by the caller through `generate(purpose=)`)."""
    adapter: str | None = None
    """The LoRA adapter the call sampled from (its name on the backend or server); None: the base model."""


class Pricing(BaseModel):
    """Optional prices in dollars per million tokens, so that a budget can be given in money."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    input_per_m: float = 0.0
    cached_per_m: float = 0.0
    output_per_m: float = 0.0

    def cost(self, usage: Usage) -> float:
        fresh = max(usage.prompt_tokens - usage.cached_tokens, 0)
        return (
            fresh * self.input_per_m
            + usage.cached_tokens * self.cached_per_m
            + usage.completion_tokens * self.output_per_m
        ) / 1e6


class Completion(BaseModel):
    """One sampled completion."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    text: str
    token_ids: list[int] = []
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_s: float = 0.0
    finish_reason: str = ""
    """'stop', 'length' or 'error'."""
    parsed: Any = None
    """With a schema: the validated pydantic object, or None when `error` says why."""
    error: str | None = None
    """With a schema: why the text did not validate (typed failure); None on success."""
    constrained: bool = False
    """Whether decoding was grammar-constrained (then `logprobs(..., schema=)` replays the same mask)."""
    logprobs: list[float] = []
    """Log-probability of each of `token_ids` when it was sampled, under the temperature-1 distribution
    after the grammar mask (temperature and top-p not applied): what `logprobs()` recomputes and GRPO
    needs. Empty where a backend cannot report them."""
    top_logprobs: list[list[tuple[int, float]]] = []
    """When asked for (`generate(top_logprobs=k)`): at each of `token_ids`, the k likeliest (token id,
    log-prob) under the distribution of `logprobs`. Empty otherwise."""

    @property
    def ok(self) -> bool:
        return self.error is None


UsageSink = Callable[[Usage], None]


@dataclass
class Request:
    """One prompt's call of `generate_each`: what `generate` takes, for that prompt alone."""

    prompt: Prompt
    n: int = 1
    sampling: Sampling | None = None
    schema: type[BaseModel] | None = None
    adapter: str | None = None
    purpose: str = ""


def generate_each(backend: Backend, requests: list[Request]) -> list[list[Completion]]:
    """The completions of several requests, each with its own schema, sampling and adapter (outer list:
    requests in order). A backend that can decode them together offers `generate_each` itself (the
    transformers backend batches them; a server's client sends them at once); any other runs them one
    after another through `generate`."""
    own = getattr(backend, "generate_each", None)
    if own is not None:
        return own(requests)
    return [backend.generate(r.prompt, r.n, r.sampling, r.schema, r.adapter, r.purpose)[0] for r in requests]


@runtime_checkable
class Backend(Protocol):
    """What every model backend offers."""

    name: str
    model_id: str

    def generate(
        self,
        prompts: Prompt | list[Prompt],
        n: int = 1,
        sampling: Sampling | None = None,
        schema: type[BaseModel] | None = None,
        adapter: str | None = None,
        purpose: str = "",
    ) -> list[list[Completion]]:
        """n completions for each prompt (outer list: prompts in order). `adapter` names a loaded LoRA
        adapter; None means the base model."""
        ...

    def logprobs(
        self,
        prompt: Prompt,
        completion: str | list[int],
        schema: type[BaseModel] | None = None,
        adapter: str | None = None,
    ) -> list[float]:
        """Per-token log-probabilities of `completion` after `prompt`. With `schema`, the grammar mask
        that constrained decoding would apply is applied here too, so the numbers match sampling."""
        ...

    def count_tokens(self, text: str) -> int:
        """Token count of `text` under this backend's tokenizer (prompt budgeting)."""
        ...


class BackendError(RuntimeError):
    """A backend that cannot serve at all (model missing, server down); the message says how to fix it."""
