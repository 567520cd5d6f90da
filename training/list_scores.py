"""Reading a sampled list's distributions: what each position of a list the scientist wrote was drawn
from, under an adapter and under the base model, for measures of several positions of one list at the
cost of one scoring of it (`list_distributions`), and where a list states its candidates' probabilities
and what those are expected to be (`StatedPlan`, read by `training.watch`).

Before, the watch ran one forward over the prompt and the list per candidate and per model (14 forwards
of ~1,500 tokens for a list of five), which cost more than the update it watched.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from arts.training.credit import base_model
from arts.training.logprobs import ActionTarget, adapter_scope
from arts.training.stated import PROBABILITY

HYPOTHESIS = '"hypothesis": "'


def value_start(tokenizer: Any, tokens: list[int], candidate: int, key: str = PROBABILITY) -> int | None:
    """The index of the token that begins the value after `key` (the stated probability by default) of
    candidate `candidate` (0-based) in a sampled list, or None when no token boundary falls exactly there."""
    text, at = tokenizer.decode(tokens), -1
    for _ in range(candidate + 1):
        at = text.find(key, at + 1)
        if at < 0:
            return None
    return boundary(tokenizer, tokens, at + len(key), exact=True)


def boundary(tokenizer: Any, tokens: list[int], at: int, exact: bool = False) -> int | None:
    """The first token index whose decoded prefix reaches character `at`; with `exact`, None unless it
    ends there."""
    for i in range(len(tokens) + 1):
        n = len(tokenizer.decode(tokens[:i]))
        if n >= at:
            return None if exact and n > at else i
    return None


def list_distributions(
    backend: Any,
    adapter: str,
    prompt: list[dict[str, Any]],
    json_schema: dict[str, Any],
    rows: list[tuple[list[int], list[int]]],
    temperature: float = 1.0,
) -> tuple[list[dict[int, Any]], list[dict[int, Any]]] | None:
    """Under `adapter`, then under the base: for each row (tokens sampled after `prompt`, positions in
    them), the masked, tempered log-probs over the vocabulary at those positions (the distribution the
    token there was drawn from), under the grammar replayed over the row. One forward per model: the
    prompt runs once and its cache is shared by the rows (a measure of several positions of one list
    costs one scoring of it, not one per position). None when the grammar rejects a row."""
    import torch

    from arts.policy.backends.scoring import completion_logprobs
    from arts.training.logprobs import pack

    targets = []
    for tokens, _ in rows:
        got = backend.grammars.replay_bitmasks(json_schema, tokens)
        if got.rejected is not None:
            return None
        targets.append(ActionTarget(tokens, got.masks.clone(), scales=got.scales))
    tok = backend.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    ids, mask, allowed, scales = pack(targets, pad)
    keep = torch.zeros(ids.shape, dtype=torch.bool)
    for row, (_, at) in enumerate(rows):
        keep[row, list(at)] = True
    prompt_ids = torch.tensor(backend.encode_prompt(prompt))
    out: list[list[dict[int, Any]]] = []
    for scope in (adapter_scope(backend.model, adapter), base_model(backend.model)):
        seen: list[dict[int, Any]] = []

        with scope, torch.no_grad():
            completion_logprobs(
                backend.model, prompt_ids, ids, mask, allowed=allowed, temperature=temperature, scales=scales,
                keep=keep, distribution=_reader(rows, seen),
            )  # fmt: skip
        out.append(seen)
    return out[0], out[1]


def _reader(
    rows: list[tuple[list[int], list[int]]], seen: list[dict[int, Any]]
) -> Callable[[Any, Any], None]:
    """`completion_logprobs`' `distribution` callback that keeps each row's distributions at its positions."""

    def read(every: Any, column: Any) -> None:
        seen.extend({p: every[row, column[p]].cpu() for p in at} for row, (_, at) in enumerate(rows))

    return read


def picked(dists: dict[int, Any], tokens: list[int], positions: list[int]) -> float:
    """The summed log-prob of the sampled tokens at `positions` (`list_distributions`' row)."""
    return math.fsum(float(dists[p][tokens[p]]) for p in positions)


@dataclass
class StatedPlan:
    """Where a list's stated probabilities are read (`stated_probabilities`): the rows to score (the list
    itself first, then a "0.d" path for each value written otherwise) and, per candidate, the value's
    first position and the row that holds its "0." continuation (None: no candidate value there, or
    no "0.d" the grammar allows)."""

    tokens: list[int]
    starts: list[int | None]
    paths: list[int | None]
    rows: list[tuple[list[int], list[int]]]
    one: int
    zero: int
    dot: int
    digits: list[int]

    @classmethod
    def of(
        cls, backend: Any, json_schema: dict[str, Any], tokens: list[int], more: list[int] = ()
    ) -> StatedPlan:
        """The plan for `tokens`, the list's row also scoring the positions `more`."""
        tok = backend.tokenizer
        one, zero, dot = (tok.encode(s, add_special_tokens=False)[0] for s in ("1", "0", "."))
        digits = [tok.encode(str(d), add_special_tokens=False)[0] for d in range(10)]
        starts = [value_start(tok, tokens, c) for c in range(tok.decode(tokens).count(PROBABILITY))]
        main, rows, paths = set(more), [], []
        for s in starts:
            if s is None:
                paths.append(None)
                continue
            main.add(s)
            if tokens[s : s + 2] == [zero, dot] and s + 2 < len(tokens):
                main.update((s + 1, s + 2))
                paths.append(0)
                continue
            path = next(
                (tokens[:s] + [zero, dot, d] for d in digits
                 if backend.grammars.replay_bitmasks(json_schema, tokens[:s] + [zero, dot, d]).rejected is None),
                None,
            )  # fmt: skip
            paths.append(None if path is None else len(rows) + 1)
            if path is not None:
                rows.append((path, [s + 1, s + 2]))
        return cls(tokens, starts, paths, [(tokens, sorted(main)), *rows], one, zero, dot, digits)

    def values(
        self, tuned: list[dict[int, Any]], base: list[dict[int, Any]]
    ) -> list[tuple[float, float] | None]:
        """Per candidate, (under the adapter, under the base) its expected stated value."""
        out: list[tuple[float, float] | None] = []
        for s, path in zip(self.starts, self.paths):
            if s is None:
                out.append(None)
                continue
            both = []
            for rows in (tuned, base):
                first = rows[0][s]
                expected = math.exp(float(first[self.one]))
                if path is not None:
                    after = rows[path]
                    lead = float(first[self.zero]) + float(after[s + 1][self.dot])
                    expected += math.fsum(
                        (d / 10 + 0.05) * math.exp(lead + float(after[s + 2][digit]))
                        for d, digit in enumerate(self.digits)
                    )  # fmt: skip
                both.append(expected)
            out.append((both[0], both[1]))
        return out
