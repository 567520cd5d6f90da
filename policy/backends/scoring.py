"""The log-prob forward that training shares with sampling: N completions of ONE prompt scored in one
batch, the prompt run once (or read from a `prompt_state` run earlier) and its KV cache shared by the N
rows; the grammar masks and the sampling temperature applied as sampling applied them; the output head
and the softmax over the vocabulary run only at the positions asked for (`keep`), and where only the
output head is trained, the body's hidden states can be run once (`head_inputs`) and the head alone run
per step (`hidden`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache

from arts.policy.backends import decoding
from arts.policy.backends.decoding import _forward_keywords, hf_model
from arts.policy.backends.grammar import unpack_bitmask


@dataclass
class PromptState:
    """A prompt's KV cache and last logits, run once (without gradients) and read by several
    `completion_logprobs` calls under the same weights it was run with, or as the weights it stands for
    (an update's steps take the prompt as the sampling adapter read it: `GRPOConfig.prompt_grad` off)."""

    cache: DynamicCache
    last: torch.Tensor


@torch.no_grad()
def prompt_state(model: Any, prompt_ids: torch.Tensor) -> PromptState:
    """Run `prompt_ids` (P,) once under the active weights, for `completion_logprobs(prompt=...)`."""
    hf = hf_model(model)
    cache = DynamicCache(config=hf.config)
    last = decoding._forward(hf, prompt_ids.to(next(hf.parameters()).device)[None], cache, logits_to_keep=1)[
        :, -1:
    ]
    return PromptState(cache, last)


def _scored_outputs(
    hf: Any, prompt_ids: torch.Tensor, completion_ids: torch.Tensor, cols: torch.Tensor,
    keep: torch.Tensor | None, prompt: PromptState | None, prompt_grad: bool = False, body: bool = False,
) -> torch.Tensor:  # fmt: skip
    """The logits (with `body`, the body's last hidden states) of every completion at positions `cols`,
    (N, K, V or H): position j's come from the input at j - 1, position 0's from the prompt's last."""
    n, length = completion_ids.shape
    device = completion_ids.device
    run = _body if body else decoding._forward
    if prompt is None or body:
        cache = DynamicCache(config=hf.config)
        with torch.set_grad_enabled(prompt_grad and torch.is_grad_enabled()):
            last = run(hf, prompt_ids.to(device)[None], cache, 1)[:, -1:]
    else:
        cache, last = copy.deepcopy(prompt.cache), prompt.last
    parts = [last.expand(n, 1, -1)] if len(cols) and cols[0] == 0 else []
    later = cols[cols > 0] - 1
    if length > 1 and len(later):
        cache.batch_repeat_interleave(n)
        parts.append(run(hf, completion_ids[:, :-1], cache, later if keep is not None else 0))
    return torch.cat(parts, dim=1) if parts else last.new_zeros((n, 0, last.shape[-1]))


def _body(hf: Any, input_ids: torch.Tensor, cache: DynamicCache, keep: int | torch.Tensor) -> torch.Tensor:
    """The body's last hidden states of `input_ids` after `cache`, at `keep` (`_forward`'s logits_to_keep)."""
    body = hf.get_decoder()
    cache_key, _ = _forward_keywords(type(body))
    states = body(input_ids=input_ids, **{cache_key: cache, "use_cache": True}).last_hidden_state
    if isinstance(keep, int):
        return states[:, -keep:] if keep else states
    return states[:, keep]


@torch.no_grad()
def head_inputs(
    model: Any, prompt_ids: torch.Tensor, completion_ids: torch.Tensor, keep: torch.Tensor
) -> torch.Tensor:
    """The body's last hidden states (N, K, H) at the positions `keep` (N, L) scores, for
    `completion_logprobs(hidden=...)`: where only the output head is trained, the body runs once."""
    hf = hf_model(model)
    device = next(hf.parameters()).device
    cols = keep.any(0).nonzero()[:, 0].to(device)
    return _scored_outputs(hf, prompt_ids, completion_ids.to(device), cols, keep, None, body=True)


def completion_logprobs(
    model: Any,
    prompt_ids: torch.Tensor,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor | None = None,
    allowed: torch.Tensor | None = None,
    temperature: float = 1.0,
    entropy: bool = False,
    prompt_grad: bool = True,
    distribution: Callable[[torch.Tensor, torch.Tensor], None] | None = None,
    scales: torch.Tensor | None = None,
    keep: torch.Tensor | None = None,
    prompt: PromptState | None = None,
    hidden: torch.Tensor | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Per-token log-probs (N, L) of N right-padded completions of ONE prompt, with gradients.

    prompt_ids: (P,). completion_ids: (N, L). completion_mask: (N, L) bool, False on padding (those
    entries come back as 0). allowed: packed grammar masks (N, L, ceil(V/32)) from
    `GrammarCache.replay_bitmasks`, applied before the softmax exactly as sampling applied them.
    The prompt runs once and its KV cache is shared by the N completions (with `prompt`, a
    `prompt_state` run earlier stands for it and the prompt does not run). Call it under
    `torch.no_grad()` when no gradient is wanted. A token outside its mask gets -inf (and would give
    NaN gradients): leave such completions out of a training batch. With `entropy`, also the entropy
    (N, L) of each position's masked, tempered distribution (no gradients; 0 on padding). Without
    `prompt_grad` the prompt runs without gradients: the values are the same, and the gradient reaches the
    weights through the completions' positions only (the prompt's keys and values taken as given).
    `keep` (N, L) bool: only the positions some row keeps are scored (the output head and the softmax over
    the vocabulary run there alone; every other entry comes back 0), as a loss on a few tokens of long
    completions needs. `distribution`, when given, is called with the masked, tempered log-probabilities
    of every token at the scored positions (N, K, V; with gradients) and each position's column among them
    (L,; -1 where not scored), for a loss on more than the sampled tokens. `scales` (N, L), when given,
    multiplies the temperature position by position (a phrase choice drawn hotter,
    `policy.backends.spelling.HEAT`). `hidden`: the body's last hidden states at the scored positions
    (`head_inputs`, under the same `keep`); only the output head runs (where nothing else is trained).
    """
    hf = hf_model(model)
    device = next(hf.parameters()).device
    n, length = completion_ids.shape
    completion_ids = completion_ids.to(device)
    cols = torch.arange(length, device=device) if keep is None else keep.any(0).nonzero()[:, 0].to(device)
    if hidden is not None:
        logits = hf.get_output_embeddings()(hidden.to(device)).float()
    else:
        logits = _scored_outputs(hf, prompt_ids, completion_ids, cols, keep, prompt, prompt_grad).float()
    if scales is not None:
        logits = logits / (temperature * scales.to(device)[:, cols, None])
    elif temperature != 1.0:
        logits = logits / temperature
    if allowed is not None:
        ok = unpack_bitmask(allowed.to(device)[:, cols], logits.shape[-1])
        if completion_mask is not None:
            ok = ok | ~completion_mask.to(device)[:, cols, None]
        logits = logits.masked_fill(~ok, float("-inf"))
    every = torch.log_softmax(logits, dim=-1)
    if distribution is not None:
        column = torch.full((length,), -1, dtype=torch.long, device=device)
        column[cols] = torch.arange(len(cols), device=device)
        distribution(every, column)
    picked = every.gather(-1, completion_ids[:, cols, None]).squeeze(-1)
    logprobs = picked.new_zeros((n, length))
    logprobs[:, cols] = picked
    if completion_mask is not None:
        logprobs = logprobs.masked_fill(~completion_mask.to(device), 0.0)
    if not entropy:
        return logprobs
    with torch.no_grad():
        h = logprobs.new_zeros((n, length))
        h[:, cols] = -(every.exp() * every.nan_to_num(neginf=0.0)).sum(-1)  # a masked-out token adds 0
        if completion_mask is not None:
            h = h.masked_fill(~completion_mask.to(device), 0.0)
    return logprobs, h
