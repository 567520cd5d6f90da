"""What the draw weighs a drawn candidate by, as something GRPO can train (`GRPOConfig.weight_coef`).

A verbalized list states a probability for each candidate and the draw follows it, so once the harness
lays out which targets a list offers, the stated probability is the scientist's lever on what is run.
Token GRPO on its digits reinforces whatever digits were written, which moves the weight no way in
particular. Here the weight is its expected value under the model, read as the watch reads it
(`training.watch.stated_probabilities`) from the distribution at the value's first token ("0" or "1") and
at its first decimal digit, both already in the update's forward; the loss is -A log E, so a candidate's
weight rises with a positive advantage and falls with a negative one.

The draw does not follow E but E's share of its list's sum, and a LoRA step that raises one candidate's
digits raises every candidate's (the same tokens, after much the same context): the absolute form moved the
paying candidate's share by x0.1-1.1 in replays of probe-quadrature (docs/benchmark.md). With the whole
list in the forward (`GRPOConfig.weight_share`), the loss is -A log(E_i / sum_j E_j), the draw's own
log-probability (REINFORCE on the draw): only what tells candidates apart gets a gradient.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from arts.training.logprobs import ActionTarget


PROBABILITY = '"probability": '
"""The key before a candidate's stated probability, as the grammar writes it."""


def stated_positions(
    tokenizer: Any, tokens: list[int], span: tuple[int, int]
) -> tuple[int, int | None] | None:
    """Where the candidate `tokens[span]` states its probability: the position of the value's first token
    ("0" or "1"), and of the first decimal digit when the value was written "0.d..." (else None); None when
    the value does not start on a token boundary or is not written that way."""
    start, end = span
    ids = tokens[start:end]
    text = tokenizer.decode(ids)
    at = text.find(PROBABILITY)
    if at < 0:
        return None
    at += len(PROBABILITY)
    first = next((i for i in range(len(ids) + 1) if len(tokenizer.decode(ids[:i])) >= at), None)
    if first is None or first >= len(ids) or len(tokenizer.decode(ids[:first])) != at:
        return None
    head = [tokenizer.decode([t]) for t in ids[first : first + 3]]
    if not head or head[0] not in ("0", "1"):
        return None
    digit = (
        first + 2 if head[0] == "0" and head[1:2] == ["."] and len(head) == 3 and head[2].isdigit() else None
    )
    return start + first, None if digit is None else start + digit


def list_stated_positions(tokenizer: Any, tokens: list[int]) -> list[tuple[int, int | None]] | None:
    """`stated_positions` of every candidate of the sampled list `tokens`, in order; None when one of them
    cannot be read (its share of the list is then unknown)."""
    text = tokenizer.decode(tokens)
    keys = [m.start() for m in re.finditer(re.escape(PROBABILITY), text)]
    prefix = [len(tokenizer.decode(tokens[:i])) for i in range(len(tokens) + 1)]
    out = []
    for at in keys:
        start = max(i for i, n in enumerate(prefix) if n <= at)
        got = stated_positions(tokenizer, tokens, (start, len(tokens)))
        if got is None:
            return None
        out.append(got)
    return out or None


def stated_token_ids(tokenizer: Any) -> tuple[int, int, list[int]]:
    """The tokens "1", "0" and the ten digits, with which a stated probability begins (`weight_loss`)."""
    one, zero = (tokenizer.encode(s, add_special_tokens=False)[0] for s in ("1", "0"))
    return one, zero, [tokenizer.encode(str(d), add_special_tokens=False)[0] for d in range(10)]


def weight_loss(
    every: torch.Tensor,
    targets: list[ActionTarget],
    advantages: list[float],
    ids: tuple[int, int, list[int]],
    column: torch.Tensor | None = None,
) -> torch.Tensor:
    """-mean over the targets with a stated probability of A log E, or of A log(E / the list's sum of E)
    where the target knows where its list states each (`ActionTarget.stated_list`). E = P("1") + P("0") x
    (the expected first decimal over its digits, plus 0.05; 0.5 where the value was written "1", whose
    decimals were never in reach), each from the distribution at its position: `every` (N, L, V), or with
    `column` (L,) the columns of `every` (N, K, V) that hold each position (`completion_logprobs`'s keep)."""
    import torch

    one, zero, digits = ids
    values = torch.tensor([d / 10 + 0.05 for d in range(10)], dtype=every.dtype, device=every.device)
    # the twelve tokens read, taken out of the vocabulary once: each later pick from the (N, K, V) tensor
    # itself would cost its backward a zero tensor of that whole size (23 of 31 s per step, measured)
    every = every[..., [one, zero, *digits]]
    one, zero, digits = 0, 1, list(range(2, 12))

    def expected(row: int, at: tuple[int, int | None]) -> torch.Tensor:
        first, digit = at if column is None else (int(column[i]) if i is not None else None for i in at)
        lead = every[row, first].exp()
        tail = (every[row, digit, digits].exp() * values).sum() if digit is not None else 0.5
        return lead[one] + lead[zero] * tail

    terms = []
    for row, (t, a) in enumerate(zip(targets, advantages)):
        if t.stated_at is None or a == 0:
            continue
        value = expected(row, t.stated_at)
        if t.stated_list:
            value = value / torch.stack([expected(row, at) for at in t.stated_list]).sum()
        terms.append(-a * torch.log(value.clamp_min(1e-12)))
    return torch.stack(terms).mean() if terms else every.new_zeros(())
