"""What the adapter has learned, applied to the draw: each candidate's move, adapter against base.

The external sampler draws by the probabilities the scientist states, and a 135M scientist states them
near-uniform whatever its adapter learned: a warm start that wrote the paying move in 3.4 of 4 lists (the
base: 1.2) had it drawn 0.9 times per run against 0.5 (docs/benchmark.md). What an update does move is
the probability of writing a move. Its log-ratio to the base model, log pi(move) - log pi_base(move), is
the reward the adapter implies (DPO's implicit reward, up to its scale): the KL-regularised policy that
maximises a reward r is pi_base exp(r / beta). `move_log_ratios` reads it for every candidate of the
sampled lists, on the tokens that choose the experiment (`logprobs.move_positions`: parent, axis, verb
and target), each in the context that wrote it, under the proposal grammar at the sampling temperature;
the arts round multiplies each stated probability by exp(tilt x log-ratio), capped (`ScientistConfig.tilt`).
A fresh adapter (LoRA's B = 0) gives 0 for every move, so the draw is the stated one until rewards move it.

The cost: two forwards of the prompt and the round's lists (the adapter, then the base), about what
scoring the drawn actions for an update costs.
"""

from __future__ import annotations

import math
from typing import Any


def move_log_ratios(
    backend: Any,
    adapter: str,
    prompt: list[dict[str, Any]],
    json_schema: dict[str, Any],
    lists: list[tuple[list[int], list[tuple[int, int]]]],
    temperature: float = 1.0,
) -> list[list[float] | None]:
    """Per list ((sampled tokens, each candidate's span), all sampled from `prompt` under `json_schema`),
    each candidate's summed log-ratio, adapter `adapter` over the base model, on its move tokens; None
    for a list without tokens or spans, or one the grammar rejects."""
    from arts.training.credit import base_model  # torch, only once an adapter is in force
    from arts.training.logprobs import adapter_scope, move_positions, score_targets, span_targets

    tok = backend.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    rows, targets = [], []
    moves: list[list[list[int]]] = []
    for tokens, spans in lists:
        made = span_targets(backend, json_schema, tokens, [(0, len(tokens))]) if tokens and spans else None
        rows.append(len(targets) if made else None)
        if made:
            moves.append([move_positions(tok, tokens, span) for span in spans])
            made[0].keep = sorted({i for pos in moves[-1] for i in pos})  # only these positions are scored
        targets += made or []
    if not targets:
        return [None] * len(lists)
    prompt_ids = backend.encode_prompt(prompt)
    with adapter_scope(backend.model, adapter):
        tuned = score_targets(backend.model, prompt_ids, targets, pad, temperature, only=True)
    with base_model(backend.model):
        base = score_targets(backend.model, prompt_ids, targets, pad, temperature, only=True)
    out: list[list[float] | None] = []
    for row in rows:
        at = None if row is None else moves[row]
        out.append(
            None if at is None else [math.fsum(tuned[row][i] - base[row][i] for i in pos) for pos in at]
        )
    return out


def tilted(weights: list[float], log_ratios: list[float], tilt: float, cap: float) -> list[float]:
    """Each weight times exp(tilt x log-ratio), the exponent clipped to [-cap, cap]."""
    return [w * math.exp(max(-cap, min(cap, tilt * r))) for w, r in zip(weights, log_ratios)]
