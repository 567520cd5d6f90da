"""Grammar-constrained decoding: pydantic schema -> xgrammar grammar -> per-step token masks.

Constrained decoding keeps even a 135M model inside the schema: at every step the grammar matcher of
each sequence fills a packed bitmask of allowed tokens, and disallowed logits become -inf. The same
masks can be replayed over a finished completion (`replay_bitmasks`), so log-probabilities computed
later (for GRPO) are taken under exactly the distribution sampling used. Whitespace is compact
(`any_whitespace=False`): free whitespace lets a tiny model loop on spaces until max_tokens. Inside the
fields whose values start with a known phrase (enums, offered moves) the masks also keep each phrase to
the tokenizer's own spelling (`policy.backends.spelling`), in sampling and in replay alike.

Only the transformers backend masks logits itself (vLLM and servers constrain their own decoding);
reading the answer back is `policy.parsing`. Deliberately not done: a grammar for anything but JSON
objects described by a pydantic model.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, NamedTuple

import torch
import xgrammar as xgr
from pydantic import BaseModel

from arts.policy.backends.spelling import SpelledMatcher, Spelling, by_bytes, phrases_of, schema_heat
from arts.policy.parsing import schema_key


class GrammarCache:
    """Compiled grammars for one tokenizer: the compiler is built once, grammars once per schema.

    `vocab_size` is the model's logits width (it may exceed the tokenizer's vocabulary); `stop_ids` are
    the tokens that end a completion, which the grammar allows exactly once the object is complete.
    With `spelling` (the default), matchers keep phrases to one spelling (`policy.backends.spelling`).
    """

    def __init__(self, tokenizer: Any, vocab_size: int, stop_ids: list[int], spelling: bool = True):
        info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size, stop_token_ids=stop_ids)
        self.vocab_size = vocab_size
        self._compiler = xgr.GrammarCompiler(info, max_threads=2)
        self._grammars: dict[str, xgr.CompiledGrammar] = {}
        self._vocab: list[bytes] = list(info.decoded_vocab)
        self._texts = by_bytes(self._vocab)
        self._encode = lambda text: tokenizer.encode(text, add_special_tokens=False)
        self.spelling = spelling
        self._spellings: dict[str, Spelling] = {}

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

    def spelled(self, schema: type[BaseModel] | dict) -> Spelling | None:
        """The spelling rules of a schema's phrases; None when off or when it has none."""
        if not self.spelling:
            return None
        key = json.dumps(schema) if isinstance(schema, dict) else schema_key(schema)
        if key not in self._spellings:
            width = (self.vocab_size + 31) // 32
            self._spellings[key] = Spelling(
                phrases_of(key), self._vocab, self._texts, self._encode, width, schema_heat(json.loads(key))
            )
        return self._spellings[key] or None

    def matcher(self, schema: type[BaseModel] | dict, spelled: bool = True) -> Any:
        """A fresh matcher of the schema's grammar, keeping its phrases' spelling unless `spelled` is False."""
        matcher = xgr.GrammarMatcher(self.compile(schema))
        spelling = self.spelled(schema) if spelled else None
        return SpelledMatcher(matcher, spelling, self._vocab) if spelling is not None else matcher

    def matchers(self, schema: type[BaseModel], n: int) -> list[Any]:
        return [self.matcher(schema) for _ in range(n)]

    def bitmask(self, rows: int) -> torch.Tensor:
        return xgr.allocate_token_bitmask(rows, self.vocab_size)

    def replay_bitmasks(self, schema: type[BaseModel] | dict, token_ids: list[int]) -> Replay:
        """The packed mask before each token of `token_ids`, as sampling saw it: (len, ceil(V/32)) int32;
        the index of the first token the grammar rejects (None when all are accepted; from there on the
        masks are all-ones, nothing to replay, and that token's probability is zero); and the factor on
        the temperature each token was drawn at (`SpelledMatcher.scale`).
        Tokens that misspell a phrase were sampled without the spelling rules (by another backend): they
        are replayed under the grammar alone (no factor either).
        """
        got = self._replay(self.matcher(schema), token_ids)
        if got.rejected is not None and got.misspelled:
            got = self._replay(self.matcher(schema, spelled=False), token_ids)
        return got

    def _replay(self, matcher: Any, token_ids: list[int]) -> Replay:
        masks = self.bitmask(max(len(token_ids), 1))[: len(token_ids)]
        scales = [1.0] * len(token_ids)
        for i, token in enumerate(token_ids):
            matcher.fill_next_token_bitmask(masks, i)
            scales[i] = getattr(matcher, "scale", 1.0)
            if not matcher.accept_token(token):
                masks[i + 1 :] = -1
                return Replay(masks, i, scales, getattr(matcher, "misspelled", False))
        return Replay(masks, None, scales)


class Replay(NamedTuple):
    """A completion's grammar replayed (`GrammarCache.replay_bitmasks`)."""

    masks: torch.Tensor
    rejected: int | None
    scales: list[float]
    misspelled: bool = False


def fill_and_apply(logits: torch.Tensor, matchers: list[Any], bitmask: torch.Tensor) -> None:
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
