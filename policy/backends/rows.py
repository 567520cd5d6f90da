"""Different prompts decoded as one batch: each row its own prompt, grammar, sampling and generator.

`decode_rows` is what several executors asking the model at once need (`sample_group` shares ONE
prompt among its rows). Each prompt is prefilled as a call of its own would, except that the first tokens
it shares with an earlier prompt of the batch (N executors on one parent share the task line and the
program) or with a kept call are not run again (`prefixes`). The prompt caches are then left-padded to
one length and joined along the batch axis, and the rows decode together. Every step each row appends its sampled token plus, with a grammar, the tokens
its grammar forces next (jump-forward, as `sample_group` does for a lone row), so rows advance by
different numbers of tokens: the step's input is right-padded, and an attention mask marks every
padded slot of the cache as absent, while position ids count each row's real tokens only. A row thus
sees exactly the tokens and positions it would see alone; only the order of floating-point sums
differs, and greedy decoding gives the same tokens (`tests/test_rows.py`).

Each row draws from its own generator, so a seeded row samples what it would sample alone. A row ends
at a stop, when its grammar completes, or once it holds `max_tokens` tokens, forced ones included (as
`sample_group` and OpenAI's `max_tokens` count them). Rows that finish leave the batch and the cache. Log-probs are recorded as `sample_group` records them (under the
grammar mask, before temperature and top-p).
Not done: N samples of one prompt sharing a prefill inside a batch (a row per sample; `sample_group`
remains the way for that), a cache of other kinds than `DynamicCache`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import xgrammar as xgr
from transformers import DynamicCache

from arts.policy.backends.decoding import Sample, _forced, _forward_keywords, choose_tokens, hf_model
from arts.policy.backends.grammar import fill_and_apply
from arts.policy.backends.prefixes import Prefixes, start
from arts.policy.base import Sampling


@dataclass
class Row:
    """One sequence to decode: its prompt, settings and (optionally) its grammar matcher."""

    prompt_ids: list[int]
    sampling: Sampling
    generator: torch.Generator | None = None
    matcher: xgr.GrammarMatcher | None = None
    stop_hit: Callable[[list[int]], bool] | None = None
    sample: Sample = field(default_factory=Sample)


def _prefill(
    model: Any, prompt_ids: list[int], cache: DynamicCache | None = None
) -> tuple[torch.Tensor, DynamicCache]:
    """The last logits of a prompt, and its cache; given `cache` (its first tokens' cache), only the
    rest of the prompt runs."""
    device = next(model.parameters()).device
    cache = cache if cache is not None else DynamicCache(config=model.config)
    key, has_keep = _forward_keywords(type(model))
    kwargs: dict[str, Any] = {key: cache, "use_cache": True}
    if has_keep:
        kwargs["logits_to_keep"] = 1
    ids = torch.tensor([prompt_ids[cache.get_seq_length() :]], device=device)
    logits = model(input_ids=ids, **kwargs).logits
    return logits[0, -1].float(), cache


def _prefills(
    model: Any, prompts: list[list[int]], kept: Prefixes | None
) -> list[tuple[torch.Tensor, DynamicCache, int]]:
    """Each prompt's last logits, cache and how many of its tokens it reused: a prompt starts from the
    earlier prompt of the batch or the kept call (`kept`) that shares the most first tokens with it
    (`prefixes`), and is kept in turn."""
    out: list[tuple[torch.Tensor, DynamicCache, int]] = []
    for i, ids in enumerate(prompts):
        sources = [(prompts[j], out[j][1]) for j in range(i)] + (kept.sources if kept else [])
        begun = start(model, ids, sources)
        logits, cache = _prefill(model, ids, begun)
        if kept is not None:
            kept.keep(model, ids, cache)
        out.append((logits, cache, begun.get_seq_length() if begun is not None else 0))
    return out


def _joined(model: Any, caches: list[DynamicCache]) -> tuple[DynamicCache, torch.Tensor]:
    """One cache of the rows' prompt caches, each left-padded to the longest, and its attention mask
    (rows, length): 0 on the padding."""
    lengths = [c.get_seq_length() for c in caches]
    longest = max(lengths)
    joined = DynamicCache(config=model.config)
    for layer in range(len(caches[0].layers)):
        keys, values = [], []
        for cache, n in zip(caches, lengths, strict=True):
            k, v = cache.layers[layer].keys, cache.layers[layer].values
            pad = (0, 0, longest - n, 0)  # (head dim, sequence): left
            keys.append(torch.nn.functional.pad(k, pad))
            values.append(torch.nn.functional.pad(v, pad))
        joined.update(torch.cat(keys), torch.cat(values), layer)
    device = caches[0].layers[0].keys.device
    mask = torch.zeros(len(caches), longest, dtype=torch.long, device=device)
    for r, n in enumerate(lengths):
        mask[r, longest - n :] = 1
    return joined, mask


def _choose(row: Row, logits: torch.Tensor) -> tuple[int, float]:
    """The row's token from its logits (already masked), and its log-prob."""
    s = row.sampling
    scale = [getattr(row.matcher, "scale", 1.0)] if row.matcher is not None else None
    token = int(choose_tokens(logits[None], s.temperature, s.top_p, row.generator, scale)[0])
    return token, float(torch.log_softmax(logits, dim=-1)[token])


def _ended(row: Row, token: int, stop_ids: set[int]) -> bool:
    """Whether `row` ended with `token` (as `decoding._finish` decides for a row of a group)."""
    sample = row.sample
    if row.matcher is not None:
        if not row.matcher.accept_token(token):
            sample.finish_reason, sample.error = "error", f"grammar rejected token {token}"
            return True
        done = row.matcher.is_terminated()
    else:
        done = token in stop_ids or (row.stop_hit is not None and row.stop_hit(sample.token_ids))
    if done:
        sample.finish_reason = "stop"
    return done


@torch.inference_mode()
def decode_rows(
    model: Any,
    rows: list[Row],
    *,
    stop_ids: set[int],
    bitmask: torch.Tensor | None,
    jump_forward: bool = True,
    kept: Prefixes | None = None,
) -> list[Sample]:
    """Decode every row to its end as one batch (see the module docstring); `bitmask` holds at least
    one row per entry of `rows`; `kept`: the prompt caches of earlier calls to start from, and keep
    these in (`prefixes`). Returns the rows' samples, in order."""
    model = hf_model(model)
    if not rows:
        return []
    device = next(model.parameters()).device
    firsts, caches, reused = zip(*_prefills(model, [r.prompt_ids for r in rows], kept), strict=True)
    for row, n in zip(rows, reused, strict=True):
        row.sample.cached = n
    cache, mask = _joined(model, list(caches))
    positions = [len(r.prompt_ids) for r in rows]  # the next real position of each row
    logits = torch.stack(firsts)
    active = list(range(len(rows)))  # batch row b is rows[active[b]]
    key, _ = _forward_keywords(type(model))
    while active:
        grammared = [b for b, i in enumerate(active) if rows[i].matcher is not None]
        if grammared:
            sub = logits[grammared]
            fill_and_apply(sub, [rows[active[b]].matcher for b in grammared], bitmask)
            logits[grammared] = sub
        inputs: list[list[int]] = []
        masks: list[torch.Tensor | None] = []
        keep: list[int] = []
        for b, i in enumerate(active):
            row, sample = rows[i], rows[i].sample
            token, logprob = _choose(row, logits[b])
            sample.token_ids.append(token)
            sample.logprobs.append(logprob)
            if _ended(row, token, stop_ids) or len(sample.token_ids) >= row.sampling.max_tokens:
                continue
            forced, allowed = [], None
            if jump_forward and row.matcher is not None:
                limit = row.sampling.max_tokens - len(sample.token_ids) - 1
                forced, allowed = _forced(row.matcher, limit, logits[b : b + 1])
            keep.append(b)
            inputs.append([token, *forced])
            masks.append(allowed)
        if not keep:
            break
        if len(keep) < len(active):
            index = torch.tensor(keep, device=device)
            cache.batch_select_indices(index)
            mask = mask[index]
            active = [active[b] for b in keep]
        width = max(len(x) for x in inputs)
        ids = torch.zeros(len(active), width, dtype=torch.long, device=device)
        step_mask = torch.zeros(len(active), width, dtype=torch.long, device=device)
        pos = torch.zeros(len(active), width, dtype=torch.long, device=device)
        for b, x in enumerate(inputs):
            start = positions[active[b]]
            ids[b, : len(x)] = torch.tensor(x, device=device)
            step_mask[b, : len(x)] = 1
            pos[b] = torch.arange(start, start + width, device=device).clamp(max=start + len(x) - 1)
            positions[active[b]] = start + len(x)
        mask = torch.cat([mask, step_mask], dim=1)
        out = model(
            input_ids=ids, attention_mask=mask, position_ids=pos, **{key: cache, "use_cache": True}
        ).logits.float()
        nexts, done = [], []
        for b, x in enumerate(inputs):
            row = rows[active[b]]
            if len(x) > 1:  # the forced tokens, recorded under their grammar masks
                forced_logits = out[b, : len(x) - 1].clone()
                xgr.apply_token_bitmask_inplace(forced_logits, masks[b].to(forced_logits.device))
                lp = torch.log_softmax(forced_logits, dim=-1).gather(
                    1, torch.tensor(x[1:], device=device)[:, None]
                )
                row.sample.token_ids.extend(x[1:])
                row.sample.logprobs.extend(lp.squeeze(1).tolist())
            if len(x) > 1 and len(row.sample.token_ids) >= row.sampling.max_tokens:
                done.append(b)
            nexts.append(out[b, len(x) - 1])
        logits = torch.stack(nexts)
        if done:
            left = [b for b in range(len(active)) if b not in done]
            if not left:
                break
            index = torch.tensor(left, device=device)
            cache.batch_select_indices(index)
            mask, logits = mask[index], logits[index]
            active = [active[b] for b in left]
    return [r.sample for r in rows]
