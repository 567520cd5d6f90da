"""What the draw weighs a drawn candidate by, as something GRPO can train (`GRPOConfig.weight_coef`).

A verbalized list states a probability for each candidate and the draw follows it, so once the harness
lays out which targets a list offers, the stated probability is the scientist's lever on what is run.
Token GRPO on its digits reinforces whatever digits were written, which moves the weight no way in
particular. Here the weight is its expected value under the model, read as the watch reads it
(`training.watch.stated_probabilities`) from the distribution at the value's first token ("0" or "1") and
at its first decimal digit, both already in the update's forward; the loss is -A log E, so a candidate's
weight rises with a positive advantage and falls with a negative one.
"""

from __future__ import annotations

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


def stated_token_ids(tokenizer: Any) -> tuple[int, int, list[int]]:
    """The tokens "1", "0" and the ten digits, with which a stated probability begins (`weight_loss`)."""
    one, zero = (tokenizer.encode(s, add_special_tokens=False)[0] for s in ("1", "0"))
    return one, zero, [tokenizer.encode(str(d), add_special_tokens=False)[0] for d in range(10)]


def weight_loss(
    every: torch.Tensor, targets: list[ActionTarget], advantages: list[float], ids: tuple[int, int, list[int]]
) -> torch.Tensor:
    """-mean over the targets with a stated probability of A log E: E = P("1") + P("0") x (the expected
    first decimal over its digits, plus 0.05; 0.5 where the value was written "1", whose decimals were
    never in reach), each from the distribution at its position."""
    import torch

    one, zero, digits = ids
    values = torch.tensor([d / 10 + 0.05 for d in range(10)], dtype=every.dtype, device=every.device)
    terms = []
    for row, (t, a) in enumerate(zip(targets, advantages)):
        if t.stated_at is None or a == 0:
            continue
        first, digit = t.stated_at
        lead = every[row, first].exp()
        tail = (every[row, digit, digits].exp() * values).sum() if digit is not None else 0.5
        expected = lead[one] + lead[zero] * tail
        terms.append(-a * torch.log(expected.clamp_min(1e-12)))
    return torch.stack(terms).mean() if terms else every.new_zeros(())
