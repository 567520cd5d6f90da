"""The dual search space: hypotheses on axes and regions, observations in their own regions, evidence between.

Hypotheses and observations are two separate spaces: a hypothesis is a claim an experiment can test, an
observation is a fact seen during the search that stands on its own, and an `Evidence` record relates one
to the other (support / oppose / neutral / unassessed). This module holds the rules of both spaces as pure
functions over a `SearchState`: which stored hypothesis a text already is, the status life cycle
(pending → working → retained; set aside with a cooldown → revived; archived on a pivot), when a repeated
observation is confirmed, and which evidence is current (what that evidence makes of a hypothesis is
`standing`; the map the prompt shows is `spacemap`).

Every function returns the records to add (id 0) or changed copies (same id); the caller persists them
with `Store.add` / `Store.update`. Nothing here does I/O, calls a model, or mutates the records it is given.
A hypothesis is found again by meaning (`meaning.same`: a paraphrase of a set-aside hypothesis is that
hypothesis, cooldown included); labels and observations are compared after a lexical normalisation.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field

from arts.search.investigation import meaning
from arts.search.state import (
    Evidence,
    Hypothesis,
    HypothesisStatus,
    Observation,
    ObservationSource,
    Record,
    Relation,
    SearchState,
)

R = TypeVar("R", bound=Record)


class SpaceConfig(BaseModel):
    """The hypothesis and observation spaces."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    cooldown: int = Field(2, ge=0)
    """Rounds a set-aside hypothesis waits before it may be revived."""
    prompt_tokens: int = Field(260, ge=50)
    """Share of the prompt for the map, revivable set-asides and unexplained observations."""
    cite_boost: float = Field(1.5, ge=1.0)
    """A candidate citing an observation no working hypothesis explains is drawn this much more often."""
    stop_when_stale: bool = True
    """Stop when a round adds no new hypothesis, observation or direction."""
    probe_share: float = Field(0.25, ge=0, le=1)
    """Most of the evaluation budget that probes (`probes`: measurements sought, not improvements) may
    spend; 0 turns observation search off."""


ACTIVE: tuple[HypothesisStatus, ...] = ("working", "retained", "revived")
"""Statuses of the hypotheses the search currently holds; only their support explains an observation."""
OVERLAP = 0.8
"""Two observations with the same numbers and at least this Jaccard overlap of words are the same one."""

_STOPWORDS = frozenset("a an the of for to in on at by with and or".split())
_INVARIANT = frozenset(
    "bias loss gas lens series species news focus status axis basis analysis process class less plus "
    "this its has was is as thus".split()
)
_IRREGULAR = {
    "axes": "axis",
    "indices": "index",
    "matrices": "matrix",
    "vertices": "vertex",
    "caches": "cache",
}
_WORD = re.compile(r"[^\W_]+")
_NUM = re.compile(r"\d+(?:[.,]\d+)*(?:e[-+]?\d+)?")


def _singular(word: str) -> str:
    """Naive singular: enough that 'rates'/'rate' and 'losses'/'loss' meet, not a lemmatiser."""
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if len(word) <= 3 or word in _INVARIANT or not word.isalpha():
        return word
    if word.endswith("es") and word[:-2] in _INVARIANT:
        return word[:-2]
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def normalise_label(text: str) -> str:
    """One axis written two ways is one axis: 'Learning rate', 'learning_rate', 'the learning-rates'."""
    words = _WORD.findall(text.casefold())
    kept = [w for w in words if w not in _STOPWORDS] or words  # a label of stopwords alone stays itself
    return " ".join(_singular(w) for w in kept)


def _changed(record: R, **changes: object) -> R:
    """A validated copy of `record` with `changes` applied (the original is left as it was)."""
    return type(record).model_validate({**record.model_dump(), **changes})


# -- hypotheses -----------------------------------------------------------------------------------------


def find_hypothesis(state: SearchState, text: str) -> Hypothesis | None:
    """The oldest stored hypothesis (archived ones included) with the same normalised text, else the
    oldest that is the same experiment by meaning (`meaning.same`), or None."""
    key = normalise_label(text)
    if not key:
        return None
    stored = [h for _, h in sorted(state.hypotheses.items())]
    return next((h for h in stored if normalise_label(h.text) == key), None) or next(
        (h for h in stored if meaning.same(text, h.text)), None
    )


def hypothesis_for(
    state: SearchState,
    text: str,
    axis: str,
    region: str,
    round: int,
    cites: Iterable[int] = (),
    parent: int | None = None,
) -> tuple[Hypothesis, bool]:
    """The hypothesis for `text`: the stored one if it exists (False), else a new pending record (True)."""
    found = find_hypothesis(state, text)
    if found is not None:
        return found, False
    known = [c for c in dict.fromkeys(cites) if c in state.observations]
    parent = parent if parent in state.hypotheses else None
    h = Hypothesis(text=text.strip(), axis=axis.strip(), region=region.strip(), parent=parent, cites=known)
    return _changed(h, created_round=round, updated_round=round), True


def refine(
    parent: Hypothesis, text: str, round: int, axis: str | None = None, region: str | None = None
) -> Hypothesis:
    """A new pending hypothesis that refines or repairs `parent` (lineage through `parent`)."""
    return Hypothesis(
        text=text.strip(),
        axis=parent.axis if axis is None else axis.strip(),
        region=parent.region if region is None else region.strip(),
        parent=parent.id,
        cites=list(parent.cites),
        created_round=round,
        updated_round=round,
    )


def lineage(state: SearchState, hypothesis_id: int) -> list[Hypothesis]:
    """The chain of refinements from the original hypothesis down to `hypothesis_id` (cycle-safe)."""
    chain: list[Hypothesis] = []
    seen: set[int] = set()
    hid: int | None = hypothesis_id
    while hid is not None and hid in state.hypotheses and hid not in seen:
        seen.add(hid)
        chain.append(state.hypotheses[hid])
        hid = state.hypotheses[hid].parent
    return chain[::-1]


_FROM: dict[HypothesisStatus, tuple[HypothesisStatus, ...]] = {
    "working": ("pending", "working", "retained", "revived"),
    "retained": ("working", "retained", "revived"),
    "set_aside": ("pending", "working", "retained", "revived"),
}
"""Allowed source statuses of each move; `revive` has its own rule (the cooldown)."""


def _move(h: Hypothesis, to: HypothesisStatus, round: int, **extra: object) -> Hypothesis | None:
    # A disallowed move returns None instead of raising: moves are often asked for by a model's verdict,
    # and a verdict that does not fit the life cycle is skipped, not fatal.
    if h.archived or h.status not in _FROM[to]:
        return None
    return _changed(h, status=to, updated_round=max(h.updated_round, round), **extra)


def work(h: Hypothesis, round: int) -> Hypothesis | None:
    """pending / retained / revived → working (an experiment is testing it); None when not allowed."""
    return _move(h, "working", round)


def retain(h: Hypothesis, round: int) -> Hypothesis | None:
    """working / revived → retained (it survived its tests); None when not allowed."""
    return _move(h, "retained", round)


def set_aside(h: Hypothesis, round: int, cooldown: int) -> Hypothesis | None:
    """Set aside until round `round + cooldown`; None when already set aside or archived."""
    if cooldown < 0:
        raise ValueError(f"cooldown must be >= 0 rounds, got {cooldown}")
    return _move(h, "set_aside", round, cooldown_until=round + cooldown)


def revive(h: Hypothesis, round: int) -> Hypothesis | None:
    """set aside → revived once the cooldown is over; None before it, or when archived."""
    if h.archived or h.status != "set_aside" or (h.cooldown_until is not None and round < h.cooldown_until):
        return None
    return _changed(h, status="revived", cooldown_until=None, updated_round=max(h.updated_round, round))


def archive(h: Hypothesis, round: int) -> Hypothesis | None:
    """Pivot away for good (a fatal flaw): set aside and archived, never revived; None if already archived."""
    if h.archived:
        return None
    return _changed(
        h, status="set_aside", archived=True, cooldown_until=None, updated_round=max(h.updated_round, round)
    )


def record_node(h: Hypothesis, node: int) -> Hypothesis:
    """`h` with `node` recorded among the experiments that tested it."""
    return h if node in h.nodes else _changed(h, nodes=[*h.nodes, node])


def revivable(state: SearchState, round: int) -> list[Hypothesis]:
    """Set-aside, unarchived hypotheses whose cooldown is over at `round`, oldest first."""
    return [h for _, h in sorted(state.hypotheses.items()) if revive(h, round) is not None]


# -- observations and evidence --------------------------------------------------------------------------


def _fingerprint(text: str) -> tuple[str, frozenset[str], frozenset[str]]:
    """(normalised text, numbers as written, normalised words without the numbers)."""
    folded = text.casefold()
    nums = frozenset(m.group().replace(",", "") for m in _NUM.finditer(folded))
    return normalise_label(text), nums, frozenset(normalise_label(_NUM.sub(" ", folded)).split())


def find_observation(state: SearchState, text: str) -> Observation | None:
    """The stored observation `text` repeats: equal normalised text, or the same numbers and high word overlap."""
    key, nums, words = _fingerprint(text)
    best: tuple[float, int] | None = None
    for oid, o in state.observations.items():
        okey, onums, owords = _fingerprint(o.text)
        if key and okey == key:
            score = 2.0  # an exact (normalised) repeat beats any overlap
        elif nums == onums and words and owords:
            score = len(words & owords) / len(words | owords)
            if score < OVERLAP:
                continue
        else:
            continue
        if best is None or (score, -oid) > (best[0], -best[1]):
            best = (score, oid)
    return None if best is None else state.observations[best[1]]


def observe(
    state: SearchState,
    text: str,
    source: ObservationSource,
    region: str = "",
    node: int | None = None,
    round: int = 0,
) -> tuple[Observation, bool]:
    """A new provisional observation (True), or the one it repeats (False): seen once more and confirmed
    when this sighting is independent of the first (another node, or another round); the same source
    saying it again in the same round (one comparison naming it for four hypotheses) is not a second
    sighting."""
    seen = find_observation(state, text)
    if seen is not None:
        if (seen.source, seen.node, seen.round) == (source, node, round):
            return seen, False
        return _changed(seen, times_seen=seen.times_seen + 1, provisional=False), False
    o = Observation(text=text.strip(), source=source, region=region.strip(), node=node, round=round)
    return o, True


def confirm(o: Observation) -> Observation:
    """`o` confirmed by a comparison (no second sighting needed)."""
    return o if not o.provisional else _changed(o, provisional=False)


def latest_pairs(state: SearchState) -> dict[tuple[int, int], Evidence]:
    """The latest evidence of each (observation, hypothesis) pair whose both ends exist."""
    out: dict[tuple[int, int], Evidence] = {}
    for e in state.evidence.values():
        if e.observation not in state.observations or e.hypothesis not in state.hypotheses:
            continue
        key = (e.observation, e.hypothesis)
        if key not in out or (e.round, e.id) > (out[key].round, out[key].id):
            out[key] = e
    return out


def relate(
    state: SearchState,
    observation_id: int,
    hypothesis_id: int,
    relation: Relation,
    round: int,
    note: str = "",
) -> Evidence:
    """The evidence between the pair: the existing record re-assessed, or a new one."""
    if observation_id not in state.observations or hypothesis_id not in state.hypotheses:
        raise ValueError(
            f"evidence needs a stored observation and hypothesis (got o{observation_id}, h{hypothesis_id}); "
            "restrict the answer schema to existing ids"
        )
    note = note.strip()[:300]
    existing = latest_pairs(state).get((observation_id, hypothesis_id))
    if existing is not None:
        return _changed(existing, relation=relation, round=round, note=note)
    return Evidence(
        observation=observation_id, hypothesis=hypothesis_id, relation=relation, round=round, note=note
    )
