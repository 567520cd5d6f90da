"""A `Backend` that talks to any OpenAI-compatible server: `arts serve`, `vllm serve`, or a hosted API.

Why: the scientist can then sample on a GPU server (vLLM, tensor parallel) or a remote API while the
search runs elsewhere, and LoRA adapters written by test-time training reach a vLLM server at run
time through `/v1/load_lora_adapter` (`load_adapter`), with nothing restarted.

Structured calls send `response_format={"type": "json_schema", ..., "strict": true}`; a schema the
server rejects there (no support at all, or a hosted API's strict-mode rules) is remembered, and then
goes into the prompt instead. Either way every answer is parsed tolerantly and validated against the
caller's pydantic model, and unparsable answers are asked for again a bounded number of times (with a
shifted seed); what still fails is a typed `Completion.error`. A server that ignores `n` is
remembered too, and the samples are then drawn by separate calls (seed + i).
Connection errors, 429 and 5xx are retried with exponential backoff; a server that stays down raises
`BackendError` saying how to start it (`openai_http`).

Several requests, each with its own schema and sampling, go out at once through `generate_each` (a
server that batches, as vLLM does, then decodes them together). Deliberately not done: streaming, tool calls, per-completion token counts for n > 1 (the API reports
one total, which is split by text length), and grammar-masked logprobs from servers other than
`arts serve` (vLLM's prompt logprobs are unmasked, so `logprobs(schema=...)` refuses there).
"""

from __future__ import annotations

import logging
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai
from pydantic import BaseModel

from arts.policy.backends.chat_format import (
    as_messages,
    finish,
    json_schema_format,
    prompt_batch,
    request_kwargs,
    schema_prompt,
)
from arts.policy.backends.openai_http import REJECTED, Http
from arts.policy.backends.registry import BACKENDS
from arts.policy.backends.spelling import without_phrases
from arts.policy.base import (
    BackendError,
    Completion,
    Message,
    Pricing,
    Prompt,
    Request,
    Sampling,
    Usage,
    UsageSink,
)
from arts.policy.parsing import schema_key

log = logging.getLogger(__name__)


@BACKENDS.register("openai")
class OpenAIBackend:
    """Chat completions against `base_url` (ending in /v1) for the served model `model`."""

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        usage_sink: UsageSink | None = None,
        max_retries: int = 3,
        timeout_s: float = 120.0,
        pricing: Pricing | None = None,
        backoff_s: float = 0.5,
        schema_retries: int = 1,
    ):
        self.base_url = base_url.rstrip("/")
        self.model_id = model
        self.usage_sink = usage_sink
        self.schema_retries = schema_retries
        self.pricing = pricing
        self.cost_usd = 0.0
        """Dollars spent so far under `pricing` (0 without it)."""
        key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self._http = Http(self.base_url, model, key, timeout_s, max_retries, backoff_s)
        self._client = self._http.client
        self._root = self.base_url.removesuffix("/v1")
        self.rejected_schemas: set[str] = set()
        """Schemas (canonical JSON) the server rejected in `response_format`: they go into the prompt."""
        self.n_supported = True
        """False once the server returned fewer than `n` choices; samples then come one call each."""
        self._tokenize_supported = True
        self._arts: bool | None = None
        self.parallel = 8
        """At most this many requests in flight at once (`generate_each`)."""

    # ---- generation -------------------------------------------------------------------------------

    def generate(
        self,
        prompts: Prompt | list[Prompt],
        n: int = 1,
        sampling: Sampling | None = None,
        schema: type[BaseModel] | None = None,
        adapter: str | None = None,
        purpose: str = "",
    ) -> list[list[Completion]]:
        sampling = sampling or Sampling()
        usage = Usage(backend=self.name, model=adapter or self.model_id, purpose=purpose, adapter=adapter)
        start = time.perf_counter()
        out = [self._answers(m, n, sampling, schema, adapter, usage) for m in prompt_batch(prompts)]
        usage.wall_s = time.perf_counter() - start
        self._spent(usage)
        return out

    def generate_each(self, requests: list[Request]) -> list[list[Completion]]:
        """Each request's completions, the requests sent at once (a thread each, up to `parallel`), so
        that a server that batches (vLLM) decodes them together; usage is reported here, request by
        request, once all have returned."""

        def one(r: Request) -> tuple[list[Completion], Usage]:
            usage = Usage(
                backend=self.name, model=r.adapter or self.model_id, purpose=r.purpose, adapter=r.adapter
            )
            start = time.perf_counter()
            messages = prompt_batch(r.prompt)[0]
            comps = self._answers(messages, r.n, r.sampling or Sampling(), r.schema, r.adapter, usage)
            usage.wall_s = time.perf_counter() - start
            return comps, usage

        with ThreadPoolExecutor(max_workers=max(min(len(requests), self.parallel), 1)) as pool:
            done = list(pool.map(one, requests))
        for _, usage in done:
            self._spent(usage)
        return [comps for comps, _ in done]

    def _answers(
        self,
        messages: list[Message],
        n: int,
        sampling: Sampling,
        schema: type[BaseModel] | None,
        adapter: str | None,
        usage: Usage,
    ) -> list[Completion]:
        """n checked completions of one chat, unparsable ones asked for again (`schema_retries`)."""
        comps = [
            finish(c, schema)
            for c in self._sample(messages, n, sampling, schema, adapter or self.model_id, usage)
        ]
        for r in range(self.schema_retries if schema else 0):
            bad = [i for i, c in enumerate(comps) if not c.ok]
            if not bad:
                break
            # A shifted seed: the same seed would only reproduce the same unparsable answer.
            seed = None if sampling.seed is None else sampling.seed + n * (r + 1)
            again_sampling = sampling.model_copy(update={"seed": seed})
            again = self._sample(messages, len(bad), again_sampling, schema, adapter or self.model_id, usage)
            for i, c in zip(bad, again, strict=True):
                comps[i] = finish(c, schema)
        return comps

    def _spent(self, usage: Usage) -> None:
        if self.pricing is not None:
            self.cost_usd += self.pricing.cost(usage)
        if self.usage_sink is not None:
            self.usage_sink(usage)

    def _sample(
        self,
        messages: list[Message],
        n: int,
        sampling: Sampling,
        schema: type[BaseModel] | None,
        model: str,
        usage: Usage,
    ) -> list[Completion]:
        """n completions of one chat, in as few calls as the server allows."""
        comps: list[Completion] = []
        while len(comps) < n:
            want = n - len(comps) if self.n_supported else 1
            seed = None if sampling.seed is None else sampling.seed + len(comps)
            got = self._chat(messages, want, sampling.model_copy(update={"seed": seed}), schema, model, usage)
            if want > 1 and len(got) < want:
                log.warning("%s ignored n=%d; drawing the samples one call each", self.base_url, want)
                self.n_supported = False
            comps.extend(got)
        return comps[:n]

    def _chat(
        self,
        messages: list[Message],
        n: int,
        sampling: Sampling,
        schema: type[BaseModel] | None,
        model: str,
        usage: Usage,
    ) -> list[Completion]:
        """One chat-completions call; with a schema the server rejects in `response_format`, the schema
        goes into the prompt (and is remembered once the plain request succeeds)."""
        kwargs = request_kwargs(model, messages, n, sampling)
        key = schema_key(schema) if schema is not None else ""
        constrained = schema is not None and key not in self.rejected_schemas
        if schema is not None and constrained:
            kwargs["response_format"] = json_schema_format(schema)
        elif schema is not None:
            kwargs["messages"] = schema_prompt(messages, schema)
        start = time.perf_counter()
        try:
            resp = self._http.call(self._client.chat.completions.create, **kwargs)
        except REJECTED as e:
            if not constrained:
                raise self._http.error(e, model) from None
            plain = kwargs | {"messages": schema_prompt(messages, schema)}  # type: ignore[arg-type]
            del plain["response_format"]
            try:  # a 400 for another reason (prompt too long, ...) fails here too
                resp = self._http.call(self._client.chat.completions.create, **plain)
            except openai.APIError as again:
                raise self._http.error(again, model) from None
            log.warning("%s rejected response_format (%s); the schema goes into the prompt", self.base_url, e)
            self.rejected_schemas.add(key)
            constrained = False
        except openai.APIError as e:
            raise self._http.error(e, model) from None
        return self._completions(resp, constrained, time.perf_counter() - start, usage)

    def _completions(self, resp: Any, constrained: bool, wall_s: float, usage: Usage) -> list[Completion]:
        u = resp.usage
        prompt = u.prompt_tokens if u else 0
        total = u.completion_tokens if u else 0
        details = getattr(u, "prompt_tokens_details", None) if u else None
        usage.prompt_tokens += prompt
        usage.cached_tokens += (getattr(details, "cached_tokens", None) or 0) if details else 0
        usage.completion_tokens += total
        texts = [c.message.content or "" for c in resp.choices]
        chars = sum(len(t) for t in texts) or 1
        return [
            Completion(
                text=text,
                prompt_tokens=prompt,
                completion_tokens=total if len(texts) == 1 else round(total * len(text) / chars),
                wall_s=wall_s,
                finish_reason=choice.finish_reason or "",
                constrained=constrained,
            )
            for choice, text in zip(resp.choices, texts, strict=True)
        ]

    # ---- adapters, tokens, logprobs ---------------------------------------------------------------

    def load_adapter(self, name: str, path: str | Path) -> None:
        """Load (or replace) the LoRA adapter `name` from `path` on the server; `generate(adapter=name)`
        then selects it. `path` must be readable by the SERVER. vLLM needs `--enable-lora` and
        `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`; each TTT step writes a new folder, which also keeps
        vLLM's prefix cache (keyed by name and path) from serving blocks of older weights."""
        body = {"lora_name": name, "lora_path": str(Path(path).resolve()), "load_inplace": True}
        try:
            self._http.post(f"{self.base_url}/load_lora_adapter", body, str)
        except openai.NotFoundError:
            raise BackendError(
                f"{self.base_url} cannot load adapters at run time; use `arts serve`, or start vLLM with "
                f"`--enable-lora` and the environment variable VLLM_ALLOW_RUNTIME_LORA_UPDATING=True"
            ) from None
        except openai.APIError as e:
            raise self._http.error(e, name) from None

    def count_tokens(self, text: str) -> int:
        """Through the server's `/tokenize` (vLLM, `arts serve`); elsewhere about 4 characters a token."""
        if self._tokenize_supported:
            body = {"model": self.model_id, "prompt": text}
            try:
                return int(self._http.post(f"{self._root}/tokenize", body, dict)["count"])
            except (openai.NotFoundError, openai.BadRequestError, KeyError):
                log.warning("%s has no /tokenize; token counts are estimated", self._root)
                self._tokenize_supported = False
            except openai.APIError as e:
                raise self._http.error(e, self.model_id) from None
        return math.ceil(len(text) / 4)

    def logprobs(
        self,
        prompt: Prompt,
        completion: str | list[int],
        schema: type[BaseModel] | None = None,
        adapter: str | None = None,
    ) -> list[float]:
        """From `arts serve` (exact, grammar mask included), or from vLLM's `prompt_logprobs` (no schema)."""
        messages, model = as_messages(prompt), adapter or self.model_id
        if self._is_arts_serve():
            body = {"model": model, "messages": messages, "completion": completion}
            body["schema"] = without_phrases(schema.model_json_schema()) if schema is not None else None
            return self._http.checked(
                lambda: self._http.post(f"{self.base_url}/arts/logprobs", body, dict)["logprobs"], model
            )
        if schema is not None:
            raise NotImplementedError(
                f"{self.base_url} returns no grammar-masked logprobs; use the transformers backend, or "
                f"serve the model with `arts serve` (vLLM's prompt logprobs are unmasked)"
            )
        try:
            return self._vllm_logprobs(messages, completion, model)
        except (openai.NotFoundError, KeyError, TypeError):
            raise NotImplementedError(
                f"{self.base_url} returns no prompt logprobs; logprobs need the transformers or vllm "
                f"backend, `arts serve`, or a vLLM server (`/tokenize` and `prompt_logprobs`)"
            ) from None

    def _vllm_logprobs(self, messages: list[Message], completion: str | list[int], model: str) -> list[float]:
        """vLLM's `/tokenize` renders the chat; `/v1/completions` scores the ids with `prompt_logprobs`."""
        tokenize = f"{self._root}/tokenize"
        body = {"model": model, "messages": messages, "add_generation_prompt": True}
        prompt_ids = self._http.checked(lambda: self._http.post(tokenize, body, dict)["tokens"], model)
        ids = completion
        if isinstance(completion, str):
            body = {"model": model, "prompt": completion, "add_special_tokens": False}
            ids = self._http.checked(lambda: self._http.post(tokenize, body, dict)["tokens"], model)
        resp = self._http.checked(
            lambda: self._http.call(
                self._client.completions.create,
                model=model,
                prompt=[*prompt_ids, *ids],
                max_tokens=1,
                temperature=0.0,
                extra_body={"prompt_logprobs": 0},
            ),
            model,
        )
        rows = (resp.choices[0].model_extra or {})["prompt_logprobs"][len(prompt_ids) :]
        # Each row maps token id (a JSON string key) to {"logprob", "rank", ...}; the scored token is in it.
        return [float(row[str(t)]["logprob"]) for row, t in zip(rows, ids, strict=True)]

    def _is_arts_serve(self) -> bool:
        """Whether the server is `arts serve`, which marks its models `owned_by: "arts"` (cached)."""
        if self._arts is None:
            models = self._http.checked(lambda: self._http.call(self._client.models.list), self.model_id)
            self._arts = any(getattr(m, "owned_by", "") == "arts" for m in models.data)
        return self._arts
