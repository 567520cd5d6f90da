"""The decoding loop (the log-prob forward that training shares with it: `policy.backends.scoring`).

`sample_group` draws N completions of ONE prompt from ONE prefill: the prompt runs once, the N first
tokens are drawn from its last logits, its KV cache is then copied along the batch axis (only for the
rows still going), and the N sequences decode together with our own sampler (temperature, top-p, stop
tokens and strings, a seeded generator; greedy at temperature 0). Rows that finish are dropped from the
batch and the cache, so the others do not pay for them. With a grammar, each row's matcher masks its
logits before sampling. This beat `num_return_sequences` and separate calls on CPU
(scripts/bench_backends.py).

Every sampled token's log-probability is recorded under the temperature-1 distribution AFTER the grammar
mask (before temperature and top-p): that is the policy GRPO optimises, and what
`scoring.completion_logprobs` recomputes with gradients (training re-tokenizes the action text; it never
reuses these), sharing one prompt forward's KV cache across the N completions too. Text the grammar forces (JSON keys, separators) is not
sampled token by token: with one row left, xgrammar's jump-forward tokens join the next forward pass.

Deliberately not done: batching different prompts together (that needs padding and position handling;
on CPU it gains little, and vLLM is the fast path on GPUs), speculative decoding, repetition penalties.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import xgrammar as xgr
from transformers import DynamicCache

from arts.policy.backends.grammar import fill_and_apply
from arts.policy.backends.prefixes import Prefixes, start
from arts.policy.base import Sampling


@dataclass
class Sample:
    """One decoded sequence: its tokens, their recorded log-probs, and why it ended."""

    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish_reason: str = "length"
    """'stop' (stop token, stop string, or the grammar completed), 'length' or 'error'."""
    error: str | None = None
    cached: int = 0
    """Prompt tokens whose cache an earlier prompt's gave (`prefixes`), not run for this sample."""
    top: list[list[tuple[int, float]]] = field(default_factory=list)
    """With `top_logprobs=k`: at each position the k likeliest (token, log-prob) under the distribution
    `logprobs` uses (tokens the grammar masks out are left out, so there may be fewer)."""


TokenSink = Callable[[int, Sample, int], None]
"""Called as tokens are decoded with (sample index, the sample, how many tokens it just gained)."""


def hf_model(model: Any) -> Any:
    """The transformers model under a peft wrapper (LoRA layers are injected in place, so calling it
    directly runs the active adapter)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


@functools.cache
def _forward_keywords(model_class: type) -> tuple[str, bool]:
    # transformers 5 renamed `past_key_values` to `cache`; both take the same Cache object.
    params = inspect.signature(model_class.forward).parameters
    return ("cache" if "cache" in params else "past_key_values"), "logits_to_keep" in params


def _forward(
    model: Any, input_ids: torch.Tensor, cache: DynamicCache, logits_to_keep: int = 0
) -> torch.Tensor:
    """Logits of `input_ids` after what `cache` holds; the cache grows in place."""
    cache_key, has_keep = _forward_keywords(type(model))
    kwargs: dict[str, Any] = {cache_key: cache, "use_cache": True}
    if has_keep:
        kwargs["logits_to_keep"] = logits_to_keep
    return model(input_ids=input_ids, **kwargs).logits


def choose_tokens(
    logits: torch.Tensor,
    temperature: float,
    top_p: float,
    generator: torch.Generator | None,
    scales: list[float] | None = None,
) -> torch.Tensor:
    """One token per row: argmax at temperature 0, else a draw from softmax(logits / T) cut to top-p;
    `scales` (one per row) multiply T row by row (a phrase choice drawn hotter)."""
    if temperature == 0:
        return logits.argmax(-1)
    if scales is not None and any(s != 1.0 for s in scales):
        heat = torch.tensor(scales, dtype=logits.dtype, device=logits.device)[:, None]
        probs = torch.softmax(logits / (temperature * heat), dim=-1)
    else:
        probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        outside = sorted_probs.cumsum(-1) - sorted_probs > top_p  # the most likely token always stays
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs.masked_fill(outside, 0.0))
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def _finish(
    sample: Sample,
    token: int,
    matcher: xgr.GrammarMatcher | None,
    stop_ids: set[int],
    stop_hit: Callable[[list[int]], bool] | None,
    max_tokens: int,
) -> bool:
    """Whether `sample` ended with `token` (its finish_reason set when it did): a stop, or 'length'
    once it holds `max_tokens` tokens, forced ones included (as OpenAI's `max_tokens` counts them)."""
    if matcher is not None:
        if not matcher.accept_token(token):
            sample.finish_reason, sample.error = "error", f"grammar rejected token {token}"
            return True
        done = matcher.is_terminated()
    else:
        done = token in stop_ids or (stop_hit is not None and stop_hit(sample.token_ids))
    if done:
        sample.finish_reason = "stop"
    return done or len(sample.token_ids) >= max_tokens


def _record(
    samples: list[Sample],
    active: list[int],
    tokens: list[int],
    logprobs: list[float],
    matchers: list[xgr.GrammarMatcher] | None,
    stop_ids: set[int],
    stop_hit: Callable[[list[int]], bool] | None,
    max_tokens: int,
    tops: list[list[tuple[int, float]]] | None = None,
    on_tokens: TokenSink | None = None,
) -> list[int]:
    """Append each active row's token and log-prob; the batch rows that go on decoding."""
    keep = []
    for row, (i, token, logprob) in enumerate(zip(active, tokens, logprobs, strict=True)):
        samples[i].token_ids.append(token)
        samples[i].logprobs.append(logprob)
        if tops is not None:
            samples[i].top.append(tops[row])
        matcher = matchers[i] if matchers is not None else None
        if not _finish(samples[i], token, matcher, stop_ids, stop_hit, max_tokens):
            keep.append(row)
        if on_tokens is not None:
            on_tokens(i, samples[i], 1)
    return keep


def _top(every: torch.Tensor, k: int) -> list[list[tuple[int, float]]]:
    """The k likeliest (token, log-prob) of each row of log-probs, masked-out (-inf) ones left out."""
    values, ids = every.topk(min(k, every.shape[-1]), dim=-1)
    return [
        [(t, v) for t, v in zip(row_ids, row_values, strict=True) if v != float("-inf")]
        for row_ids, row_values in zip(ids.tolist(), values.tolist(), strict=True)
    ]


@torch.inference_mode()
def sample_group(
    model: Any,
    prompt_ids: list[int],
    n: int,
    sampling: Sampling,
    *,
    stop_ids: set[int],
    generator: torch.Generator | None = None,
    matchers: list[xgr.GrammarMatcher] | None = None,
    bitmask: torch.Tensor | None = None,
    stop_hit: Callable[[list[int]], bool] | None = None,
    jump_forward: bool = True,
    kept: Prefixes | None = None,
    top_logprobs: int = 0,
    on_tokens: TokenSink | None = None,
) -> list[Sample]:
    """N completions of one prompt from a shared prefill (see the module docstring); with `kept`, the
    prompt starts from the kept call sharing the most first tokens with it, and is kept (`prefixes`).
    A completion holds at most `sampling.max_tokens` tokens, forced ones included.
    `top_logprobs=k` records each position's k likeliest tokens (`Sample.top`); `on_tokens` hears of
    each row's tokens as they are decoded (streaming), after they are recorded.

    With `matchers` (one per row, plus a bitmask of at least n rows) decoding is grammar-constrained
    and ends when the grammar terminates; `stop_hit(token_ids)` reports a stop string in a row's text.
    With `jump_forward` and one row left, what the grammar forces next (keys, separators, the rest of
    an enum value) is appended at once and run in the same forward as the sampled token.
    """
    model = hf_model(model)
    device = next(model.parameters()).device
    begun = start(model, prompt_ids, kept.sources) if kept is not None else None
    cache = begun if begun is not None else DynamicCache(config=model.config)
    reused = cache.get_seq_length()
    prompt = torch.tensor([prompt_ids[reused:]], device=device)
    logits = _forward(model, prompt, cache, logits_to_keep=1)[:, -1].float().expand(n, -1).clone()
    if kept is not None:
        kept.keep(model, prompt_ids, cache)
    samples = [Sample() for _ in range(n)]
    samples[0].cached = reused
    active = list(range(n))  # row r of the batch is sample active[r]
    expanded = False  # the prompt's cache is copied only for the rows that outlive their first token
    for step in range(sampling.max_tokens):
        if matchers is not None and bitmask is not None:
            fill_and_apply(logits, [matchers[i] for i in active], bitmask)
        scales = [getattr(matchers[i], "scale", 1.0) for i in active] if matchers is not None else None
        chosen = choose_tokens(logits, sampling.temperature, sampling.top_p, generator, scales)
        every = torch.log_softmax(logits, dim=-1)
        logprobs = every.gather(1, chosen[:, None]).squeeze(1)
        tops = _top(every, top_logprobs) if top_logprobs else None
        keep = _record(
            samples, active, chosen.tolist(), logprobs.tolist(), matchers, stop_ids, stop_hit,
            sampling.max_tokens, tops, on_tokens,
        )  # fmt: skip
        if not keep or step == sampling.max_tokens - 1:
            break
        if len(keep) < len(active):
            rows = torch.tensor(keep, device=device)
            chosen = chosen[rows]
            active = [active[r] for r in keep]
            if expanded:
                cache.batch_select_indices(rows)
        if not expanded and len(active) > 1:
            cache.batch_repeat_interleave(len(active))
        expanded = True
        ids = chosen[:, None]
        forced = []
        if jump_forward and matchers is not None and len(active) == 1:
            sample = samples[active[0]]
            forced, masks = _forced(
                matchers[active[0]], sampling.max_tokens - len(sample.token_ids) - 1, logits
            )
            ids = torch.cat([ids, torch.tensor([forced], dtype=ids.dtype, device=device)], dim=1)
        out = _forward(model, ids, cache, logits_to_keep=ids.shape[1]).float()
        if forced:
            rows = out[0, :-1].clone()
            xgr.apply_token_bitmask_inplace(rows, masks.to(rows.device))
            every = torch.log_softmax(rows, dim=-1)
            sample.token_ids.extend(forced)
            sample.logprobs.extend(every.gather(1, ids[0, 1:, None]).squeeze(1).tolist())
            if top_logprobs:
                sample.top.extend(_top(every, top_logprobs))
            if on_tokens is not None:
                on_tokens(active[0], sample, len(forced))
        logits = out[:, -1]
    return samples


def _forced(matcher: xgr.GrammarMatcher, limit: int, logits: torch.Tensor) -> tuple[list[int], torch.Tensor]:
    """The tokens the grammar forces next (at most `limit`), accepted by `matcher`, and the grammar's
    mask before each: their log-probs are recorded under the mask like sampled ones (another
    tokenization of the forced text may be allowed too, so a forced token's log-prob need not be 0)."""
    tokens = matcher.find_jump_forward_tokens()[: max(limit, 0)]
    masks = xgr.allocate_token_bitmask(max(len(tokens), 1), logits.shape[-1])
    forced: list[int] = []
    for token in tokens:
        matcher.fill_next_token_bitmask(masks, len(forced))
        if not matcher.accept_token(token):
            break
        forced.append(token)
    return forced, masks[: len(forced)]
