"""Prompt tokens run once: a prompt that begins like another reuses that one's KV cache for the shared part.

Two places repeat a long beginning. Within one batch (`rows.decode_rows`), N executors of one parent
share the task line and the program, so all but the hypothesis (742 of 753 tokens measured). Across
calls, a round's proposal prompt is its inspection prompt (the same system prompt and rendered state,
about 1100 tokens) plus the inspected reports and the question. `Prefixes` keeps the prompt caches of
the latest calls (copies cut to the prompt, within a byte budget) and starts a new prompt from the one
sharing the most first tokens; only the rest runs. Attention over a reused cache sums in another order
than one whole forward, so log-probs may differ in the last bits, never more (`tests/test_rows.py`).

Only calls without an adapter are kept: the base weights never change (training moves LoRA weights,
in place), so a kept cache is never stale; an adapter's cache would be after its next update.
"""

from __future__ import annotations

from typing import Any

from transformers import DynamicCache

SHARED_MIN = 16
"""A prompt reuses another's cache only when they share at least this many first tokens."""


def common(a: list[int], b: list[int]) -> int:
    """The length of the prefix `a` and `b` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def first(model: Any, cache: DynamicCache, length: int) -> DynamicCache:
    """A new cache of the first `length` positions of `cache` (copied: `cache` may grow on)."""
    out = DynamicCache(config=model.config)
    for i, layer in enumerate(cache.layers):
        out.update(layer.keys[:, :, :length].clone(), layer.values[:, :, :length].clone(), i)
    return out


def _nbytes(cache: DynamicCache) -> int:
    return sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers)


def start(model: Any, ids: list[int], sources: list[tuple[list[int], DynamicCache]]) -> DynamicCache | None:
    """A copy of the cache of the source sharing the most first tokens with `ids`, cut to them (at most
    all but the last token of `ids`, whose logits the caller needs); None below `SHARED_MIN`."""
    shared, cache = max(((common(s, ids), c) for s, c in sources), default=(0, None), key=lambda x: x[0])
    shared = min(shared, len(ids) - 1)
    return first(model, cache, shared) if cache is not None and shared >= SHARED_MIN else None


class Prefixes:
    """The prompt caches of the latest calls without an adapter, newest last, within `budget` bytes."""

    def __init__(self, budget: int = 512 * 2**20):
        self.budget = budget
        self._kept: list[tuple[list[int], DynamicCache, int]] = []

    @property
    def sources(self) -> list[tuple[list[int], DynamicCache]]:
        return [(ids, cache) for ids, cache, _ in self._kept]

    def keep(self, model: Any, ids: list[int], cache: DynamicCache) -> None:
        """Keep a copy of the first len(ids) positions of `cache` (the prompt's); the oldest go first
        when over the budget."""
        if self.budget <= 0 or len(ids) < SHARED_MIN:
            return
        self._kept = [k for k in self._kept if k[0] != ids]
        copy = first(model, cache, len(ids))
        self._kept.append((list(ids), copy, _nbytes(copy)))
        while self._kept and sum(k[2] for k in self._kept) > self.budget:
            self._kept.pop(0)

    def clear(self) -> None:
        self._kept = []
