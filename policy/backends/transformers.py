"""The default backend: a transformers causal LM in this process, with LoRA adapters and grammar masks.

It runs the embedded SmolLM2-135M on a laptop CPU, so every feature works end to end without a GPU.
N samples of a prompt share one prefill (`policy.backends.decoding.sample_group`); with a schema, xgrammar
masks every step and the answer is validated against the pydantic model — a failure is a typed
`error` on the completion, never an exception. Each completion carries the log-prob of each sampled
token under the masked temperature-1 distribution, and `logprobs(..., schema=)` replays the same
masks, so the two agree (GRPO needs exactly that). LoRA adapters are attached, swapped and disabled
on the loaded base without reloading it; `.model` and `.tokenizer` are what training works on.

Different prompts, each with its own schema and sampling, decode as one batch through `generate_each`
(`policy.backends.rows`); `generate` runs its prompts one after another, each sharing its prefill
among its N samples. Deliberately not done: thread safety (one caller at a time;
`policy.backends.serve` holds a lock), and any download (see `policy.backends.weights`).
"""

from __future__ import annotations

import time
from typing import Any

import torch
from pydantic import BaseModel

from arts.policy.backends.adapters import LoraAdapters
from arts.policy.backends.decoding import Sample, TokenSink, sample_group
from arts.policy.backends.grammar import GrammarCache
from arts.policy.backends.prefixes import Prefixes
from arts.policy.backends.registry import BACKENDS
from arts.policy.backends.rows import Row, decode_rows
from arts.policy.backends.scoring import completion_logprobs
from arts.policy.backends.weights import DEFAULT_MODEL, resolve_model
from arts.policy.base import BackendError, Completion, Prompt, Request, Sampling, Usage, UsageSink
from arts.policy.parsing import validate_json


def pick_device(device: str) -> torch.device:
    return torch.device(("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device)


def pick_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """bf16 on CUDA; float32 on CPU, the one that keeps sampled and rescored log-probs within 1e-4.

    Measured (SmolLM2-135M, torch 2.13, 2-core CPU): without native bf16 matmul (1 thread, 585-token
    prompt) float32 prefill 3.9-4.9 s and a 4-row decode step 240-250 ms, bf16 21 s and 410-430 ms; with
    avx512_bf16 (2 threads, `scripts/bench_decode.py`) bf16 prefilled 2.7x and decoded 1.2-1.6x faster.
    bf16 moves log-probs by up to 0.3-1.2 nats, flips 2-2.5% of greedy tokens; a search picks it where native.
    """
    if dtype != "auto":
        return getattr(torch, dtype)
    return torch.bfloat16 if device.type == "cuda" and torch.cuda.is_bf16_supported() else torch.float32


def _as_batch(prompts: Prompt | list[Prompt]) -> list[Prompt]:
    """A str or a message list is ONE prompt; a list of those is a batch."""
    if isinstance(prompts, str) or (prompts and isinstance(prompts[0], dict)):
        return [prompts]  # type: ignore[list-item]
    return list(prompts)  # type: ignore[arg-type]


@BACKENDS.register("transformers")
class TransformersBackend(LoraAdapters):
    """A transformers model as a `Backend` (see the module docstring)."""

    name = "transformers"

    def __init__(
        self,
        model: str | None = None,
        device: str = "auto",
        dtype: str = "auto",
        usage_sink: UsageSink | None = None,
        seed: int = 0,
    ):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.model_id = model or DEFAULT_MODEL
        self.path = resolve_model(model)
        self.device = pick_device(device)
        self.dtype = pick_dtype(dtype, self.device)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(self.path)
            base = AutoModelForCausalLM.from_pretrained(self.path, dtype=self.dtype)
        except (OSError, ValueError) as e:
            raise BackendError(f"cannot load the model at {self.path}: {e}") from None
        self._base = base.to(self.device).eval()
        self._peft: Any = None
        self.usage_sink = usage_sink
        self._rng = torch.Generator(device=self.device).manual_seed(seed)
        eos = self._base.generation_config.eos_token_id
        eos_ids = eos if isinstance(eos, list) else [eos]
        self.stop_ids = {int(t) for t in [*eos_ids, self.tokenizer.eos_token_id] if t is not None}
        self._grammars: GrammarCache | None = None
        self.jump_forward = True
        """Append the text a grammar forces without sampling it token by token (scripts/bench_backends.py)."""
        self.prefixes = Prefixes()
        """Latest prompt caches without an adapter, to start similar prompts from (budget 0: off)."""
        self.labels: dict[str, str] = {}
        """What usage records name an adapter by, where its name alone does not say which weights sampled:
        a trained adapter, updated in place, is labelled with its checkpoint (`adapters/<k>`)."""

    @property
    def model(self) -> Any:
        """The model training works on: the peft model once an adapter exists, else the base."""
        return self._peft if self._peft is not None else self._base

    @property
    def grammars(self) -> GrammarCache:
        """Grammar compiler and cache for this tokenizer, built on first use (about half a second)."""
        if self._grammars is None:
            vocab = self._base.get_output_embeddings().weight.shape[0]
            self._grammars = GrammarCache(self.tokenizer, vocab, sorted(self.stop_ids))
        return self._grammars

    # ---- tokens ---------------------------------------------------------------------------------

    def encode_prompt(self, prompt: Prompt) -> list[int]:
        """Token ids of `prompt` rendered by the tokenizer's own chat template, ready for the answer."""
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        if not self.tokenizer.chat_template:
            if isinstance(prompt, str):
                return self.tokenizer.encode(prompt, add_special_tokens=False)
            raise BackendError(f"{self.path} has no chat template; use an instruct model for chat prompts.")
        text = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return self.tokenizer.encode(text, add_special_tokens=False)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    # ---- sampling -------------------------------------------------------------------------------

    def generate(
        self,
        prompts: Prompt | list[Prompt],
        n: int = 1,
        sampling: Sampling | None = None,
        schema: type[BaseModel] | None = None,
        adapter: str | None = None,
        purpose: str = "",
        *,
        top_logprobs: int = 0,
        on_tokens: TokenSink | None = None,
    ) -> list[list[Completion]]:
        """n completions per prompt; one prefill per prompt. A `sampling.seed` fixes the whole call's
        randomness (prompts draw from one generator, in order); None continues the backend's own
        generator (seeded at construction). With a schema, stop strings are ignored: the grammar ends it.
        `top_logprobs=k` fills each completion's `top_logprobs`; `on_tokens(sample index, sample, new)`
        hears of tokens as they are decoded (prompts decode one after another)."""
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n}")
        sampling = sampling or Sampling()
        generator = self._rng if sampling.seed is None else self._seeded(sampling.seed)
        usage = self._usage(purpose, adapter)
        start = time.perf_counter()
        out: list[list[Completion]] = []
        with self._adapter(adapter):
            for prompt in _as_batch(prompts):
                ids = self.encode_prompt(prompt)
                self._check_length(len(ids), sampling.max_tokens)
                t0 = time.perf_counter()
                samples = self._sample(ids, n, sampling, schema, generator, adapter, top_logprobs, on_tokens)
                wall = time.perf_counter() - t0
                out.append([self._completion(s, len(ids), wall, sampling, schema) for s in samples])
                usage.prompt_tokens += n * len(ids)
                usage.cached_tokens += (n - 1) * len(ids) + samples[0].cached
                usage.completion_tokens += sum(len(s.token_ids) for s in samples)
        usage.wall_s = time.perf_counter() - start
        self._report(usage)
        return out

    def generate_each(self, requests: list[Request]) -> list[list[Completion]]:
        """The completions of each request (outer list: requests in order), the requests of one adapter
        decoded as one batch (`decode_rows`), a row per sample. A seeded request draws from its own
        generator, so with n = 1 it gets what `generate` would give it alone."""
        out: list[list[Completion]] = [[] for _ in requests]
        for adapter in dict.fromkeys(r.adapter for r in requests):
            mine = [i for i, r in enumerate(requests) if r.adapter == adapter]
            with self._adapter(adapter):
                for i, completions in zip(
                    mine, self._decode_together([requests[i] for i in mine], adapter), strict=True
                ):
                    out[i] = completions
        return out

    def _decode_together(self, requests: list[Request], adapter: str | None) -> list[list[Completion]]:
        rows: list[Row] = []
        owners: list[int] = []
        for k, r in enumerate(requests):
            if r.n < 1:
                raise ValueError(f"n must be at least 1, got {r.n}")
            sampling = r.sampling or Sampling()
            ids = self.encode_prompt(r.prompt)
            self._check_length(len(ids), sampling.max_tokens)
            generator = self._rng if sampling.seed is None else self._seeded(sampling.seed)
            for matcher in self.grammars.matchers(r.schema, r.n) if r.schema else [None] * r.n:
                stop = self._stop_hit(sampling) if r.schema is None else None
                rows.append(Row(ids, sampling, generator, matcher, stop))
                owners.append(k)
        start = time.perf_counter()
        bitmask = self.grammars.bitmask(len(rows)) if any(r.schema for r in requests) else None
        kept = self.prefixes if adapter is None else None
        samples = decode_rows(
            self._base, rows, stop_ids=self.stop_ids, bitmask=bitmask, jump_forward=self.jump_forward, kept=kept
        )  # fmt: skip
        wall = (time.perf_counter() - start) / max(len(rows), 1)  # the batch's time, shared by its rows
        out: list[list[Completion]] = [[] for _ in requests]
        cached = [0] * len(requests)
        for k, row, sample in zip(owners, rows, samples, strict=True):
            r = requests[k]
            out[k].append(self._completion(sample, len(row.prompt_ids), wall, row.sampling, r.schema))
            cached[k] += sample.cached
        for r, completions, reused in zip(requests, out, cached, strict=True):
            usage = self._usage(r.purpose, r.adapter)
            usage.prompt_tokens = sum(c.prompt_tokens for c in completions)
            usage.cached_tokens = reused
            usage.completion_tokens = sum(c.completion_tokens for c in completions)
            usage.wall_s = sum(c.wall_s for c in completions)
            self._report(usage)
        return out

    def _stop_hit(self, sampling: Sampling):
        """A check for the stop strings in a row's decoded text; None without any."""
        if not sampling.stop:
            return None

        def stop_hit(token_ids: list[int]) -> bool:
            text = self.tokenizer.decode(token_ids, skip_special_tokens=True)
            return any(s in text for s in sampling.stop)

        return stop_hit

    def _seeded(self, seed: int) -> torch.Generator:
        return torch.Generator(device=self.device).manual_seed(seed)

    def _check_length(self, prompt_tokens: int, max_tokens: int) -> None:
        limit = getattr(self._base.config, "max_position_embeddings", None)
        if limit is not None and prompt_tokens + max_tokens > limit:
            raise ValueError(
                f"prompt ({prompt_tokens} tokens) + max_tokens ({max_tokens}) exceeds the model's context "
                f"of {limit} tokens; shorten the prompt or lower max_tokens."
            )

    def _sample(
        self,
        ids: list[int],
        n: int,
        sampling: Sampling,
        schema: type[BaseModel] | None,
        generator: torch.Generator,
        adapter: str | None = None,
        top_logprobs: int = 0,
        on_tokens: TokenSink | None = None,
    ) -> list[Sample]:
        matchers = bitmask = stop_hit = None
        if schema is not None:
            matchers, bitmask = self.grammars.matchers(schema, n), self.grammars.bitmask(n)
        else:
            stop_hit = self._stop_hit(sampling)
        return sample_group(
            self._base, ids, n, sampling, stop_ids=self.stop_ids, generator=generator,
            matchers=matchers, bitmask=bitmask, stop_hit=stop_hit, jump_forward=self.jump_forward,
            kept=self.prefixes if adapter is None else None, top_logprobs=top_logprobs, on_tokens=on_tokens,
        )  # fmt: skip

    def _completion(
        self,
        sample: Sample,
        prompt_tokens: int,
        wall: float,
        sampling: Sampling,
        schema: type[BaseModel] | None,
    ) -> Completion:
        """Text (stop tokens and strings cut off), then with a schema the parsed object or a typed error."""
        text = self.tokenizer.decode(sample.token_ids, skip_special_tokens=True)
        if schema is None and sampling.stop:
            cuts = [i for i in (text.find(s) for s in sampling.stop) if i >= 0]
            text = text[: min(cuts)] if cuts else text
        parsed, error = None, sample.error
        if schema is not None and error is None:
            if sample.finish_reason == "length":
                error = (
                    f"truncated at max_tokens ({sampling.max_tokens} tokens): the JSON object is incomplete"
                )
            else:
                parsed, error = validate_json(text, schema)
        return Completion(
            text=text, token_ids=sample.token_ids, logprobs=sample.logprobs, prompt_tokens=prompt_tokens,
            completion_tokens=len(sample.token_ids), wall_s=wall, finish_reason=sample.finish_reason,
            top_logprobs=sample.top,
            parsed=parsed, error=error, constrained=schema is not None,
        )  # fmt: skip

    # ---- scoring --------------------------------------------------------------------------------

    def logprobs(
        self,
        prompt: Prompt,
        completion: str | list[int],
        schema: type[BaseModel] | None = None,
        adapter: str | None = None,
    ) -> list[float]:
        """Per-token log-probs under the temperature-1 distribution (temperature and top-p are NOT
        applied), after the replayed grammar mask when `schema` is given — the numbers `generate`
        recorded in `Completion.logprobs`. A token the grammar rejects scores -inf."""
        start = time.perf_counter()
        ids = self.encode_prompt(prompt)
        tokens = (
            self.tokenizer.encode(completion, add_special_tokens=False)
            if isinstance(completion, str)
            else completion
        )
        if not tokens:
            return []
        allowed = self.grammar_masks(schema, [list(tokens)]) if schema is not None else None
        with self._adapter(adapter), torch.no_grad():
            values = completion_logprobs(
                self._base, torch.tensor(ids), torch.tensor([list(tokens)]), allowed=allowed
            )
        usage = self._usage("logprobs", adapter)
        usage.prompt_tokens, usage.wall_s = len(ids) + len(tokens), time.perf_counter() - start
        self._report(usage)
        return values[0].tolist()

    def grammar_masks(self, schema: type[BaseModel], completions: list[list[int]]) -> torch.Tensor:
        """Packed grammar masks (N, L, ceil(V/32)) replayed over N completions, right-padded with
        all-allowed rows: the `allowed` argument of `policy.backends.scoring.completion_logprobs`."""
        length = max((len(c) for c in completions), default=0)
        width = self.grammars.bitmask(1).shape[-1]
        masks = torch.full((len(completions), length, width), -1, dtype=torch.int32)
        for row, tokens in enumerate(completions):
            masks[row, : len(tokens)] = self.grammars.replay_bitmasks(schema, tokens).masks
        return masks

    def _usage(self, purpose: str, adapter: str | None) -> Usage:
        label = self.labels.get(adapter, adapter) if adapter is not None else None
        return Usage(backend=self.name, model=label or self.model_id, purpose=purpose, adapter=label)

    def _report(self, usage: Usage) -> None:
        if self.usage_sink is not None:
            self.usage_sink(usage)
