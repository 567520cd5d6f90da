"""One spelling per phrase: the tokens a grammar-constrained sampler may write for a move, a target, a label.

A grammar admits every split of its text into tokens, and under it the embedded 135M model spelled one
move in many ways: on probe-quadrature `increase STEPS` was written 49 times in 12 spellings (incre·ase·
S·TE·PS, incre·ase· ·S·TE·PS, ...) and never as the tokenizer splits it (incre·ase· STE·PS). An update
raises the spelling it was sampled in, so its credit spread over spellings the sampler rarely repeated,
and a measure of the move had to guess which spellings to sum.

`Spelling` narrows a grammar's mask inside the fields whose values start with a known phrase (string
enums and consts, and the phrases a schema lists under `PHRASES`: the moves a directed hypothesis is
offered) and inside property names (the model wrote `c·andi·da·t·es` for `candidates`). While a field's
text is a prefix of one of its phrases, written in the tokenizer's own tokens so far, a token that keeps
it a prefix of that phrase is allowed only if it is the phrase's next token in that spelling; tokens that
leave every phrase stay allowed (a free field is only kept from misspelling a phrase; the grammar decides
the rest). So each phrase has one spelling, the tokenizer's, the one its `encode` gives: a measure or a
replay that tokenizes the phrase finds the sampled tokens.

`SpelledMatcher` applies it around an xgrammar matcher (the same calls), in sampling and in replay
(`policy.backends.grammar.GrammarCache`). A completion sampled without it (by vLLM or a server, which
constrain their own decoding, and are sent schemas `without_phrases`) may misspell a phrase; its replay
then falls back to the grammar alone, the masks it was sampled under.

One spelling also marks where a phrase is chosen: the token at which the phrases a field's text may
still become part (the targets of an axis, `increase` against `decrease`) is a choice (`Rule.choice`).
A schema may ask for that token to be drawn hotter than the rest (`HEAT`, a factor on the temperature):
exploration of what is run, without heating the stated probabilities, the parent or the free text.
Replay marks the same tokens (`SpelledMatcher.scale`), so training scores the distribution that drew
them. A heat opens a choice the model is unsure of, not one it is sure of: on probe-quadrature the
embedded model put about 5 nats more on its first-listed target than on STEPS, the one that paid, and at
a heat of 4 wrote `increase STEPS` in 4% of the slots that offered it (`scripts/choice_heat.py`).
Not handled: a phrase that is a prefix of another phrase's word ("X" and "XY" as targets), where the
longer one's tail is not narrowed.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

PHRASES = "x-phrases"
"""The JSON-schema keyword listing the phrases a string field's value starts with (xgrammar ignores it)."""


NAMES = ""
"""The key of `schema_phrases` under which the property names are listed (a name is a phrase too)."""

HEAT = "x-choice-heat"
"""The JSON-schema keyword (at the root) giving the factor the sampling temperature is multiplied by at a
phrase choice (`Rule.choice`); absent: 1, no change."""


def schema_heat(schema: dict[str, Any]) -> float:
    """The schema's `HEAT` (1.0 when it names none)."""
    return float(schema.get(HEAT, 1.0)) if isinstance(schema, dict) else 1.0


def schema_phrases(schema: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    """Field name -> the phrases its values start with, over the whole schema (every object, every
    alternative): string enum and const values, and `PHRASES`; `NAMES` -> the property names."""
    found: dict[str, set[str]] = {}

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            for key, prop in (node.get("properties") or {}).items():
                found.setdefault(NAMES, set()).add(key)
                for option in [prop, *prop.get("anyOf", [])] if isinstance(prop, dict) else []:
                    values = [*option.get("enum", []), *([option["const"]] if "const" in option else [])]
                    words = [v for v in [*values, *option.get(PHRASES, [])] if isinstance(v, str) and v]
                    found.setdefault(key, set()).update(words)
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(schema)
    return {k: tuple(sorted(v)) for k, v in found.items() if v}


def by_bytes(vocab: list[bytes]) -> dict[bytes, list[int]]:
    """Each token text's ids (a vocabulary may hold one text twice)."""
    table: dict[bytes, list[int]] = {}
    for token, piece in enumerate(vocab):
        if piece:
            table.setdefault(piece, []).append(token)
    return table


@dataclass(frozen=True)
class Rule:
    """What a field's text so far allows next: the misspelling tokens, and the mask without them."""

    banned: frozenset[int]
    packed: torch.Tensor | None
    """(ceil(V/32),) int32: every bit set but the banned tokens'; None when none is banned."""
    choice: bool = False
    """The phrases the text is a prefix of part here (two or more next tokens: a target, a verb): the
    token that chooses among them is drawn at the schema's `HEAT` times the temperature."""


class Spelling:
    """The spelling rules of one schema's phrases under one tokenizer (see the module docstring)."""

    def __init__(
        self,
        phrases: dict[str, tuple[str, ...]],
        vocab: list[bytes],
        texts: dict[bytes, list[int]],
        encode: Callable[[str], list[int]],
        width: int,
        heat: float = 1.0,
    ):
        """`vocab`: each token's bytes; `texts`: `by_bytes(vocab)`; `encode`: the tokenizer's split of a
        text; `width`: the packed mask's words; `heat`: the schema's `HEAT`."""
        self._by_bytes, self._width, self.heat = texts, width, heat
        self._phrases: dict[bytes, list[tuple[bytes, list[int], list[int]]]] = {}
        for key, words in phrases.items():
            for word in words:
                tokens = encode(word)
                ends = list(itertools.accumulate((len(vocab[t]) for t in tokens), initial=0))
                if b"".join(vocab[t] for t in tokens) == word.encode():  # else a spelling it cannot keep
                    self._phrases.setdefault(key.encode(), []).append((word.encode(), tokens, ends))
        keys = b"|".join(re.escape(k) for k in self._phrases if k) or b"(?!)"
        self._field = re.compile(rb'"(' + keys + rb')": "([^"\\]*)\Z')
        self._name = re.compile(rb'(?:\{|, )"([^"\\]*)\Z')  # compact JSON: `{"name` or `, "name`
        longest = max((len(w) for ws in self._phrases.values() for w, _, _ in ws), default=0)
        self._tail = longest + max((len(k) for k in self._phrases), default=0) + 8
        self._rules: dict[tuple[bytes, bytes], Rule | None] = {}

    def __bool__(self) -> bool:
        return bool(self._phrases)

    def rule(self, text: bytes) -> Rule | None:
        """The rule after `text` (the completion so far); None where nothing is narrowed."""
        tail = text[-self._tail :]
        m = self._field.search(tail)
        if m is not None:
            key = (m.group(1), m.group(2))
        elif NAMES.encode() in self._phrases and (m := self._name.search(tail)) is not None:
            key = (NAMES.encode(), m.group(1))
        else:
            return None
        if key not in self._rules:
            self._rules[key] = self._make(*key)
        return self._rules[key]

    def _make(self, key: bytes, written: bytes) -> Rule | None:
        banned: set[int] = set()
        canonical: set[int] = set()
        for word, tokens, ends in self._phrases[key]:
            if not word.startswith(written) or len(written) not in ends:
                continue  # not this phrase, or not written in its spelling: it sets no rule
            at = ends.index(len(written))
            if at < len(tokens):
                canonical.add(tokens[at])
            rest = word[len(written) :]
            for j in range(1, len(rest) + 1):
                banned.update(self._by_bytes.get(rest[:j], ()))
        banned -= canonical
        choice = len(canonical) > 1 and key != NAMES.encode()
        if not banned:
            return Rule(frozenset(), None, choice) if choice else None
        import numpy as np  # here: the wire helpers above are imported where torch need not be
        import torch

        bits = np.ones(self._width * 32, dtype=bool)
        bits[sorted(banned)] = False
        packed = torch.from_numpy(np.packbits(bits, bitorder="little").view(np.int32).copy())
        return Rule(frozenset(banned), packed, choice)


class SpelledMatcher:
    """An xgrammar matcher whose masks and accepted tokens also follow a `Spelling`."""

    def __init__(self, matcher: Any, spelling: Spelling, vocab: list[bytes]):
        self.matcher, self.spelling, self._vocab = matcher, spelling, vocab
        self.text = b""
        self._last: tuple[int, Rule | None] = (-1, None)
        self.misspelled = False
        """Whether a token was refused for its spelling alone (`accept_token`)."""

    def _rule(self) -> Rule | None:
        """The rule after the text so far, looked up once per token (filling and accepting both ask)."""
        if self._last[0] != len(self.text):
            self._last = (len(self.text), self.spelling.rule(self.text))
        return self._last[1]

    def fill_next_token_bitmask(self, bitmask: torch.Tensor, index: int = 0) -> bool:
        need = self.matcher.fill_next_token_bitmask(bitmask, index)
        rule = self._rule()
        if rule is not None and rule.packed is not None:
            bitmask[index] &= rule.packed.to(bitmask.device)
        return bool(need) or rule is not None

    @property
    def scale(self) -> float:
        """The factor on the temperature for the next token: the spelling's heat at a phrase choice, else 1."""
        rule = self._rule()
        return self.spelling.heat if rule is not None and rule.choice else 1.0

    def accept_token(self, token: int) -> bool:
        rule = self._rule()
        if rule is not None and token in rule.banned:
            self.misspelled = True
            return False
        if not self.matcher.accept_token(token):
            return False
        self.text += self._vocab[token]
        return True

    def __getattr__(self, name: str) -> Any:  # is_terminated, find_jump_forward_tokens, ...
        return getattr(self.matcher, name)


def without_phrases(schema: Any) -> Any:
    """A JSON schema without its `PHRASES` lists: what goes over the wire to a server (vLLM, an OpenAI
    API, `arts serve`), where a strict JSON-schema validator may refuse an unknown keyword. There the
    rule keeps only enum values and names (on `arts serve`), or nothing (elsewhere)."""
    if isinstance(schema, dict):
        return {k: without_phrases(v) for k, v in schema.items() if k not in (PHRASES, HEAT)}
    if isinstance(schema, list):
        return [without_phrases(v) for v in schema]
    return schema


def written(pieces: list[str], phrase: str) -> list[tuple[int, int]]:
    """Where a completion wrote `phrase`, given its tokens' texts: for each occurrence the token span
    [i, j) that covers it (a token shared with the text around it included)."""
    ends = list(itertools.accumulate(map(len, pieces)))
    text = "".join(pieces)
    out = []
    for m in re.finditer(re.escape(phrase), text):
        covering = [i for i, e in enumerate(ends) if e > m.start() and e - len(pieces[i]) < m.end()]
        out.append((covering[0], covering[-1] + 1))
    return out


def phrases_of(schema_text: str) -> dict[str, tuple[str, ...]]:
    """`schema_phrases` of a schema's JSON text."""
    return schema_phrases(json.loads(schema_text))
