"""Where each candidate of a verbalized proposal lies in its sampled tokens.

Test-time training learns from the tokens that were sampled (DESIGN: "Training learns from the tokens
that were sampled, under the adapter and grammar mask that sampled them"). A proposal is one completion
holding K candidates; the drawn candidate's own tokens, conditioned on the prompt and the candidates
before it, are the action that GRPO trains. This module finds them: the character span of each complete
list item, then the tokens that cover it. A token that straddles two items (`}, {`) belongs to both.
Not done here: scoring or training (`training.logprobs`).
"""

from __future__ import annotations

import json
from collections.abc import Callable


def item_spans(text: str, key: str = "candidates") -> list[tuple[int, int]]:
    """Character spans of the complete items of the JSON list under `key` (a cut-off item is left out)."""
    start = text.find(f'"{key}"')
    start = text.find("[", start) if start >= 0 else -1
    if start < 0:
        return []
    decoder, pos, out = json.JSONDecoder(), start + 1, []
    while True:
        while pos < len(text) and text[pos] in " \n\r\t,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            return out
        try:
            _, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            return out
        out.append((pos, end))
        pos = end


def token_spans(
    token_ids: list[int], decode: Callable[[list[int]], str], chars: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    """For each character span, the [start, end) token indices whose text overlaps it."""
    ends, out = [len(decode(token_ids[: i + 1])) for i in range(len(token_ids))], []
    starts = [0, *ends[:-1]]
    for a, b in chars:
        covering = [i for i in range(len(token_ids)) if starts[i] < b and ends[i] > a]
        if covering:
            out.append((covering[0], covering[-1] + 1))
    return out


def candidate_token_spans(
    text: str, token_ids: list[int], decode: Callable[[list[int]], str]
) -> list[tuple[int, int]]:
    """The token span of each complete candidate of a proposal, in list order; [] when the text is not the
    decoding of `token_ids` (a backend that reports no tokens)."""
    if not token_ids or not decode(token_ids).startswith(text[: max(len(text) - 1, 0)]):
        return []
    return token_spans(token_ids, decode, item_spans(text))
