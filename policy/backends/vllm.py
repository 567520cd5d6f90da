"""The in-process vLLM backend: fast batched sampling on a GPU, LoRA adapters swapped per request.

Why: on a GPU, vLLM samples the scientist's N actions per round far faster than transformers, with a
prefix cache shared by the N samples of a prompt, structured outputs through its own xgrammar
backend, and LoRA adapters chosen per request — so the adapter written after each TTT update is used
by the next round with nothing restarted.

Adapters: `load_adapter(name, path)` (the method name every backend and `arts serve` share) gives
every new adapter FOLDER a new LoRA id and a unique lora_name (`name@id`). vLLM caches adapter weights
by id and keys its prefix cache by name and path, so a reused id would keep serving the old weights.
The same folder loaded again is a no-op (TTT writes each update into a new `adapters/<step>/` folder
and never rewrites one). Older adapters leave vLLM's LRU cache (`max_loras`) as new ones arrive.

Environment: vLLM 0.33 pins torch 2.14 and transformers < 5.21, while arts is developed against torch
2.13 / transformers 5.24. Use this backend only in an environment with vLLM's own pins
(`pip install 'arts[vllm]'` there); the recommended arrangement is `vllm serve` in its own environment,
reached through `OpenAIBackend` (see the README). `vllm` is imported inside the constructor and the
helpers, never at import time, so this module imports everywhere.

The vLLM arguments and objects are built by the pure functions `engine_args`, `sampling_params`,
`lora_request` and `logprob_params`, which tests/test_vllm_backend.py checks against vLLM's real
classes on a CPU (scripts/check_vllm_backend.sh).

Deliberately not done: grammar-masked logprobs (vLLM's prompt logprobs are unmasked, so
`logprobs(schema=...)` raises NotImplementedError; the GRPO update runs on the transformers backend),
multi-GPU settings beyond what `engine_kwargs` passes to `vllm.LLM`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from arts.policy.backends.chat_format import as_messages, prompt_batch
from arts.policy.backends.registry import BACKENDS
from arts.policy.backends.spelling import without_phrases
from arts.policy.base import BackendError, Completion, Prompt, Request, Sampling, Usage, UsageSink
from arts.policy.parsing import validate_json

INSTALL_HINT = (
    "the vllm backend needs vLLM on a CUDA machine: `pip install 'arts[vllm]'` in an environment with "
    "vLLM's own pins (vLLM 0.33 pins torch 2.14 and transformers<5.21, unlike arts' default "
    "environment). Recommended instead: run `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve MODEL "
    "--enable-lora --max-lora-rank 16` in its own environment and use the openai backend with "
    "--base-url http://HOST:8000/v1"
)


def engine_args(
    model_path: str, seed: int, max_lora_rank: int, max_loras: int, gpu_memory_utilization: float
) -> dict[str, Any]:
    """`vllm.LLM` keyword arguments (all `vllm.EngineArgs` fields): LoRA and prefix caching on."""
    return {
        "model": model_path,
        "enable_lora": True,
        "max_lora_rank": max_lora_rank,
        "max_loras": max_loras,
        "enable_prefix_caching": True,
        "seed": seed,
        "gpu_memory_utilization": gpu_memory_utilization,
    }


def sampling_params(sampling: Sampling, n: int, schema: type[BaseModel] | None) -> Any:
    """vLLM `SamplingParams` for n samples; with a schema, JSON-schema structured outputs."""
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    structured = (
        StructuredOutputsParams(json=without_phrases(schema.model_json_schema()))
        if schema is not None
        else None
    )
    return SamplingParams(
        n=n,
        temperature=sampling.temperature,
        top_p=sampling.top_p,
        max_tokens=sampling.max_tokens,
        stop=list(sampling.stop),
        seed=sampling.seed,
        structured_outputs=structured,
    )


def lora_request(name: str, int_id: int, path: str | Path) -> Any:
    """A vLLM `LoRARequest` whose name is unique per id (vLLM compares requests by name)."""
    from vllm.lora.request import LoRARequest

    return LoRARequest(lora_name=f"{name}@{int_id}", lora_int_id=int_id, lora_path=str(Path(path).resolve()))


def logprob_params() -> Any:
    """Parameters that score a prompt: the log-probability of each of its tokens, one token generated."""
    from vllm import SamplingParams

    return SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)


def completion_logprobs(prompt_logprobs: Any, start: int, ids: list[int]) -> list[float]:
    """The scored tokens' log-probabilities from vLLM's prompt logprobs, from position `start` on.
    Each position maps token id → `Logprob`; the prompt's own token is always among them."""
    return [float(prompt_logprobs[start + i][t].logprob) for i, t in enumerate(ids)]


def to_completions(output: Any, schema: type[BaseModel] | None, wall_s: float) -> list[Completion]:
    """`Completion`s from one vLLM `RequestOutput` (its n samples). Constrained text is exact JSON, so it
    is validated strictly; a sample cut at max_tokens is a typed failure."""
    prompt = len(output.prompt_token_ids or [])
    out = []
    for o in output.outputs:
        c = Completion(
            text=o.text,
            token_ids=list(o.token_ids),
            prompt_tokens=prompt,
            completion_tokens=len(o.token_ids),
            wall_s=wall_s,
            finish_reason=o.finish_reason or "",
            constrained=schema is not None,
        )
        if schema is not None and c.finish_reason == "length":
            c.error = f"truncated at max_tokens ({len(o.token_ids)} tokens): the JSON object is incomplete"
        elif schema is not None:
            c.parsed, c.error = validate_json(c.text, schema)
        out.append(c)
    return out


@BACKENDS.register("vllm")
class VLLMBackend:
    """`vllm.LLM` with LoRA and prefix caching enabled; one engine for the whole run."""

    name = "vllm"

    def __init__(
        self,
        model: str | None = None,
        usage_sink: UsageSink | None = None,
        seed: int = 0,
        max_lora_rank: int = 16,
        max_loras: int = 4,
        gpu_memory_utilization: float = 0.85,
        **engine_kwargs: Any,
    ):
        try:
            import vllm
        except ImportError as e:
            raise BackendError(f"{INSTALL_HINT} (import failed: {e})") from None
        from arts.policy.backends.weights import DEFAULT_MODEL, resolve_model

        self.model_id = model or DEFAULT_MODEL
        self.usage_sink = usage_sink
        args = engine_args(str(resolve_model(model)), seed, max_lora_rank, max_loras, gpu_memory_utilization)
        self._llm = vllm.LLM(**(args | engine_kwargs))
        self._tokenizer = self._llm.get_tokenizer()
        self._adapters: dict[str, Any] = {}
        self._next_id = 1

    def load_adapter(self, name: str, path: str | Path) -> None:
        """Use adapter folder `path` for `generate(adapter=name)`; a new folder gets a new LoRA id."""
        if not (Path(path) / "adapter_config.json").is_file():
            raise BackendError(f"{path} is no LoRA adapter folder (adapter_config.json is missing)")
        current = self._adapters.get(name)
        if current is not None and current.lora_path == str(Path(path).resolve()):
            return
        self._adapters[name] = lora_request(name, self._next_id, path)
        self._next_id += 1

    def _lora(self, adapter: str | None) -> Any:
        if adapter is None:
            return None
        if adapter not in self._adapters:
            raise BackendError(
                f"adapter {adapter!r} is not loaded; call load_adapter({adapter!r}, folder) first"
            )
        return self._adapters[adapter]

    def generate(
        self,
        prompts: Prompt | list[Prompt],
        n: int = 1,
        sampling: Sampling | None = None,
        schema: type[BaseModel] | None = None,
        adapter: str | None = None,
        purpose: str = "",
    ) -> list[list[Completion]]:
        params = sampling_params(sampling or Sampling(), n, schema)
        start = time.perf_counter()
        outputs = self._llm.chat(
            prompt_batch(prompts), params, use_tqdm=False, lora_request=self._lora(adapter)
        )
        wall_s = time.perf_counter() - start
        result = [to_completions(o, schema, wall_s) for o in outputs]
        self._report(outputs, result, wall_s, adapter, purpose)
        return result

    def generate_each(self, requests: list[Request]) -> list[list[Completion]]:
        """Each request's completions; the requests of one adapter go to the engine as one `chat` call
        with a `SamplingParams` each (its own schema, n, seed), which vLLM schedules as one batch."""
        out: list[list[Completion]] = [[] for _ in requests]
        for adapter in dict.fromkeys(r.adapter for r in requests):
            mine = [i for i, r in enumerate(requests) if r.adapter == adapter]
            params = [
                sampling_params(requests[i].sampling or Sampling(), requests[i].n, requests[i].schema)
                for i in mine
            ]
            start = time.perf_counter()
            outputs = self._llm.chat(
                [as_messages(requests[i].prompt) for i in mine],
                params,
                use_tqdm=False,
                lora_request=self._lora(adapter),
            )
            wall_s = time.perf_counter() - start
            for i, o in zip(mine, outputs, strict=True):
                out[i] = to_completions(o, requests[i].schema, wall_s)
                self._report([o], [out[i]], wall_s / len(mine), adapter, requests[i].purpose)
        return out

    def _report(
        self,
        outputs: list[Any],
        result: list[list[Completion]],
        wall_s: float,
        adapter: str | None,
        purpose: str,
    ) -> None:
        if self.usage_sink is None:
            return
        usage = Usage(
            backend=self.name, model=adapter or self.model_id, wall_s=wall_s, purpose=purpose, adapter=adapter
        )
        usage.prompt_tokens = sum(len(o.prompt_token_ids or []) for o in outputs)
        usage.cached_tokens = sum(o.num_cached_tokens or 0 for o in outputs)
        usage.completion_tokens = sum(c.completion_tokens for comps in result for c in comps)
        self.usage_sink(usage)

    def logprobs(
        self,
        prompt: Prompt,
        completion: str | list[int],
        schema: type[BaseModel] | None = None,
        adapter: str | None = None,
    ) -> list[float]:
        if schema is not None:
            raise NotImplementedError(
                "the vllm backend returns no grammar-masked logprobs; use the transformers backend "
                "(which replays the xgrammar mask) for logprobs of constrained answers"
            )
        text = self._tokenizer.apply_chat_template(
            as_messages(prompt), add_generation_prompt=True, tokenize=False
        )
        prompt_ids = list(self._tokenizer.encode(text, add_special_tokens=False))
        ids = (
            completion
            if isinstance(completion, list)
            else self._tokenizer.encode(completion, add_special_tokens=False)
        )
        [out] = self._llm.generate(
            [{"prompt_token_ids": prompt_ids + list(ids)}],
            logprob_params(),
            use_tqdm=False,
            lora_request=self._lora(adapter),
        )
        return completion_logprobs(out.prompt_logprobs, len(prompt_ids), list(ids))

    def count_tokens(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False))
