"""Grammar-constrained decoding: pydantic schema -> xgrammar grammar -> per-step token masks.

Constrained decoding keeps even a 135M model inside the schema: at every step the grammar matcher of
each sequence fills a packed bitmask of allowed tokens, and disallowed logits become -inf. The same
masks can be replayed over a finished completion (`replay_bitmasks`), so log-probabilities computed
later (for GRPO) are taken under exactly the distribution sampling used. Whitespace is compact
(`any_whitespace=False`): free whitespace lets a tiny model loop on spaces until max_tokens.

Only the transformers backend masks logits itself (vLLM and servers constrain their own decoding);
reading the answer back is `policy.parsing`. Deliberately not done: a grammar for anything but JSON
objects described by a pydantic model.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import torch
import xgrammar as xgr
from pydantic import BaseModel

from arts.policy.parsing import schema_key


class GrammarCache:
    """Compiled grammars for one tokenizer: the compiler is built once, grammars once per schema.

    `vocab_size` is the model's logits width (it may exceed the tokenizer's vocabulary); `stop_ids` are
    the tokens that end a completion, which the grammar allows exactly once the object is complete.
    """

    def __init__(self, tokenizer: Any, vocab_size: int, stop_ids: list[int]):
        info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size, stop_token_ids=stop_ids)
        self.vocab_size = vocab_size
        self._compiler = xgr.GrammarCompiler(info, max_threads=2)
        self._grammars: dict[str, xgr.CompiledGrammar] = {}

    def compile(self, schema: type[BaseModel] | dict) -> xgr.CompiledGrammar:
        """The compiled grammar of a schema class, or of a stored JSON schema (the same key either way:
        its JSON text, property order kept)."""
        key = json.dumps(schema) if isinstance(schema, dict) else schema_key(schema)
        if key not in self._grammars:
            try:
                self._grammars[key] = self._compiler.compile_json_schema(
                    key, any_whitespace=False, strict_mode=True
                )
            except RuntimeError as e:  # xgrammar's message starts with its C++ source location
                reason = re.sub(r"^\[[^\]]*\] \S+:\d+: ", "", str(e).strip())
                raise ValueError(f"the JSON schema cannot be turned into a grammar: {reason}") from None
        return self._grammars[key]

    def matchers(self, schema: type[BaseModel], n: int) -> list[xgr.GrammarMatcher]:
        grammar = self.compile(schema)
        return [xgr.GrammarMatcher(grammar) for _ in range(n)]

    def bitmask(self, rows: int) -> torch.Tensor:
        return xgr.allocate_token_bitmask(rows, self.vocab_size)

    def replay_bitmasks(
        self, schema: type[BaseModel] | dict, token_ids: list[int]
    ) -> tuple[torch.Tensor, int | None]:
        """The packed mask before each token of `token_ids`, as sampling saw it: (len, ceil(V/32)) int32.

        Also returns the index of the first token the grammar rejects (None when all are accepted);
        from there on the masks are all-ones (nothing to replay), and that token's probability is zero.
        """
        matcher = xgr.GrammarMatcher(self.compile(schema))
        masks = self.bitmask(max(len(token_ids), 1))[: len(token_ids)]
        for i, token in enumerate(token_ids):
            matcher.fill_next_token_bitmask(masks, i)
            if not matcher.accept_token(token):
                masks[i + 1 :] = -1
                return masks, i
        return masks, None


def fill_and_apply(logits: torch.Tensor, matchers: list[xgr.GrammarMatcher], bitmask: torch.Tensor) -> None:
    """Mask `logits` (rows, V) in place with each row's grammar: disallowed tokens become -inf."""
    rows = logits.shape[0]
    for i, matcher in enumerate(matchers):
        matcher.fill_next_token_bitmask(bitmask, i)
    xgr.apply_token_bitmask_inplace(logits, bitmask[:rows].to(logits.device, non_blocking=True))


def unpack_bitmask(bitmask: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Packed masks (..., ceil(V/32)) int32 -> bool (..., V), True = allowed. For masked training.

    Unpacked byte-wise (one byte per token in the intermediate, not four); needs a little-endian host.
    """
    if sys.byteorder != "little":  # pragma: no cover
        raise RuntimeError("unpack_bitmask assumes a little-endian host")
    as_bytes = bitmask.contiguous().view(torch.uint8)
    shifts = torch.arange(8, dtype=torch.uint8, device=bitmask.device)
    bits = (as_bytes.unsqueeze(-1) >> shifts) & 1
    return bits.reshape(*bitmask.shape[:-1], -1)[..., :vocab_size].bool()
