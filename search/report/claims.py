"""A number in the model's words stands only if the store holds that value for what the words say it is.

`grounding.sanitize` keeps a number that matches any value the store measured. With hundreds of values
(every score, metric, count, second and id), most random numbers match one: 2-decimal values in [0, 1],
small integers and integer percentages passed a third to two thirds of the time. Here a number is read
with the words around it, and checked only against the values of that kind:

- a reference ("node 7", "nodes 3-5", "#7", "round 4") must name a node or round that exists;
- a count ("7 nodes", "3 of 16 experiments failed") must be the run's count of what it counts
  (`COUNTED`: failed, valid, evaluations, nodes, ...);
- a duration ("12 s", "4.5 seconds") must be one measured of a node the text is about (below) or of the
  run;
- a program setting ("STEPS 20", "TOL from 1e-3 to 5e-4") must be a number written in the program of
  the node the text is about or its parent, after a name that program sets (`NAME =`, `name=`);
- anything else is a result: it must be a value (score, raw score, metric) of the node the text is about,
  its parent, the seed, the best node, or a node the text names (a metric's value only where the text
  names the metric); a percentage may be that value or a hundredth of it, and a ratio ("1.3x") the
  ratio of two such scores.

A written number matches a value when it is that value rounded to the digits written, and within
`rel_tol` of it (so "4" is not 3.6 and "0.9" is 0.93). `scripts/grounding_leak.py` measures how many
random numbers of three kinds still pass on a run's store.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from itertools import permutations

from arts.search.report.grounding import REDACTED, Sanitized, Span, flat_numbers, numbers
from arts.search.state import SearchState

_REFERENCE = re.compile(r"(?:\bnodes?|#|\bids?)\s*(?:(?:\d+\s*(?:,|-|to|and)\s*)*)$", re.IGNORECASE)
_ROUND = re.compile(r"\brounds?\s*(?:(?:\d+\s*(?:,|-|to|and)\s*)*)$", re.IGNORECASE)
COUNTED = {
    "failed": r"fail\w*|invalid|crash\w*|broke\w*|errors?",
    "valid": r"valid|succe\w*|worked|ran",
    "evaluations": r"evaluations?|evals?",
    "hypotheses": r"hypothes[ie]s",
    "observations": r"observations?",
    "rounds": r"rounds?",
    "updates": r"updates?",
    "nodes": r"nodes?|experiments?|runs?|programs?|candidates?|children|edits?|changes?",
}
"""What a count may count, by the words around it; the first that matches decides."""
_COUNT_BEFORE = re.compile(r"(?P<what>[a-z]+)\s*[:=]?\s*(?:of|out of)?\s*$", re.IGNORECASE)
_SECONDS = re.compile(r"^\s*(?:seconds?|secs?|s)\b", re.IGNORECASE)
_SETTING = re.compile(
    r"\b([A-Za-z_][A-Za-z0-9_]*)\s*(?:=|:|to|from|is|at|of|was|becomes|->|→)?\s*"
    r"(?:[-+]?[\d.]+(?:[eE][-+]?\d+)?\s*(?:to|->|→|and)\s*)?$"
)
_WINDOW = 40
"""Characters read on each side of a number for its context."""


@dataclass
class Record:
    """What the store lets model-written text claim, by kind."""

    nodes: set[int] = field(default_factory=set)
    rounds: set[int] = field(default_factory=set)
    counts: dict[str, set[int]] = field(default_factory=dict)
    """What is counted (`COUNTED`'s keys) to the run's counts of it."""
    seconds: list[float] = field(default_factory=list)
    """The run's durations (its finish record)."""
    durations: dict[int, list[float]] = field(default_factory=dict)
    """Per node: its evaluation and execution seconds."""
    results: dict[int, list[float]] = field(default_factory=dict)
    """Per node: its score and raw score."""
    metrics: dict[int, dict[str, list[float]]] = field(default_factory=dict)
    """Per node: each metric's values, claimable where the text names the metric."""
    scores: dict[int, float] = field(default_factory=dict)
    """Per node: its raw score (for ratios)."""
    settings: dict[int, tuple[set[str], list[float]]] = field(default_factory=dict)
    """Per node: the names its program uses and the numbers it writes."""
    said: dict[int, list[tuple[float, str, str]]] = field(default_factory=dict)
    """Per node: the numbers the harness wrote about it (failure reason, a baseline's edit), each with the
    words around it there: quoted with one of them ("exit code 1"), they stand."""
    parents: dict[int, int | None] = field(default_factory=dict)
    seed: int | None = None
    best: int | None = None


def record(state: SearchState) -> Record:
    """The claimable values of a run, by kind."""
    out = Record()
    nodes = list(state.nodes.values())
    for n in nodes:
        out.nodes.add(n.id)
        out.rounds.add(n.round)
        out.parents[n.id] = n.parent
        out.results[n.id] = list(flat_numbers([n.score, n.raw_score]))
        out.metrics[n.id] = {name: list(flat_numbers(v)) for name, v in n.metrics.items()}
        # what the harness wrote about the node: its failure reason, a baseline's edit description
        out.said[n.id] = [
            (x.value, *_neighbours(t, x)) for t in (n.reason, n.hypothesis if n.rollout is None else "")
            for x in numbers(t)
        ]  # fmt: skip
        if n.raw_score is not None:
            out.scores[n.id] = n.raw_score
        out.durations[n.id] = [x for x in (n.eval_s, n.exec_s) if x]
        # the names a program sets (NAME = ..., keyword=...): not every word of its comments
        words = {w for text in n.files.values() for w in re.findall(r"\b([A-Za-z_]\w*)\s*=(?!=)", text)}
        out.settings[n.id] = (words, [x.value for text in n.files.values() for x in numbers(text)])
        if n.status == "seed":
            out.seed = n.id
    for e in state.events.values():
        if e.kind == "finish":  # the run's own durations; each node's are its own
            out.seconds += [float(v) for k, v in e.payload.items() if k.endswith("_s") or k == "seconds"
                            if isinstance(v, int | float) and not isinstance(v, bool)]  # fmt: skip
    best = state.best()
    out.best = best.id if best else None
    valid = sum(n.status == "valid" for n in nodes)
    invalid = sum(n.status == "invalid" for n in nodes)
    seeds = sum(n.status == "seed" for n in nodes)
    evals = sum(e.kind == "eval" for e in state.events.values())
    updates = sum(e.kind == "update" for e in state.events.values())
    out.counts = {
        "failed": {invalid},
        "valid": {valid, valid + seeds},
        "evaluations": {evals, valid + invalid},
        "hypotheses": {len(state.hypotheses)},
        "observations": {len(state.observations)},
        "rounds": {max(out.rounds, default=0)},
        "updates": {updates},
        "nodes": {len(nodes), len(nodes) - seeds, valid + invalid},
    }
    return out


def _half_unit(sp: Span) -> float:
    """Half a unit of the last digit written: '0.97' 0.005, '20' 0.5, '5e-4' 0.00005."""
    mantissa, _, exponent = sp.text.replace(",", "").lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 0.5 * 10.0 ** ((int(exponent) if exponent else 0) - decimals)


def _matches(sp: Span, value: float, candidates: list[float], rel_tol: float) -> bool:
    half = _half_unit(sp)
    for m in candidates:
        if value == m or (abs(value - m) <= half and abs(value - m) <= rel_tol * abs(m)):
            return True
    return False


def _about(rec: Record, node: int | None, text: str) -> set[int]:
    """The nodes a text's results may be about: its own, its parent, the seed, the best, and those it names."""
    about = {x for x in (node, rec.parents.get(node) if node is not None else None, rec.seed, rec.best)
             if x is not None}  # fmt: skip
    for m in re.finditer(r"(?:\bnodes?|#)\s*((?:\d+\s*(?:,|-|to|and)?\s*)+)", text, re.IGNORECASE):
        about |= {int(d) for d in re.findall(r"\d+", m.group(1)) if int(d) in rec.nodes}
    return about


def _neighbours(text: str, sp: Span) -> tuple[str, str]:
    """The word right before a number and the word right after it, lower case ('' where there is none)."""
    before = re.findall(r"[a-z]+", text[max(0, sp.start - _WINDOW) : sp.start].lower())
    after = re.findall(r"[a-z]+", text[sp.end : sp.end + _WINDOW].lower())
    return (before[-1] if before else "", after[0] if after else "")


def _counted(before: str, after: str) -> str | None:
    """What a whole number counts, from the words after it ("3 of 16 experiments failed": failed) or
    before it ("failures: 3"), or None when it counts nothing `COUNTED` knows."""
    words = " ".join(after.split()[:5]).lower()
    if not re.match(r"^(?:(?:of|out of)\s+\d+\s+)?(?:[a-z]+\s+){0,1}(?:" + "|".join(COUNTED.values()) + r")\b",
                    words):  # fmt: skip
        m = _COUNT_BEFORE.search(before)
        words = m.group("what").lower() if m else ""
        if not words:
            return None
    for what, pattern in COUNTED.items():
        if re.search(rf"\b(?:{pattern})\b", words):
            return what
    return None


def _names(text: str, metric: str) -> bool:
    """Whether the text names a metric (underscores read as spaces, any case)."""
    spaced = re.escape(metric).replace("_", "[ _]")
    return re.search(rf"(?<![a-z0-9]){spaced}(?![a-z0-9])", text, re.IGNORECASE) is not None


def stands(sp: Span, text: str, rec: Record, node: int | None, rel_tol: float = 0.01) -> bool:
    """Whether the number `sp` of `text` (about `node`) is one the store holds for what its words say."""
    before = text[max(0, sp.start - _WINDOW) : sp.start]
    after = text[sp.end : sp.end + _WINDOW]
    v = sp.value
    whole = v == int(v) and sp.unit == ""
    if _REFERENCE.search(before) and whole:
        return int(v) in rec.nodes
    if _ROUND.search(before) and whole:
        return int(v) in rec.rounds
    if sp.unit == "s" or _SECONDS.match(after):
        took = rec.seconds + [x for n in _about(rec, node, text) for x in rec.durations.get(n, [])]
        return _matches(sp, v, took, rel_tol)
    counted = whole and _counted(before, after)
    if counted:
        return int(v) in rec.counts.get(counted, set())
    near = _neighbours(text, sp)
    said = [x for x, *words in rec.said.get(node, []) if any(w and w in near for w in words)]
    if node is not None and _matches(sp, v, said, rel_tol):
        return True
    setting = _SETTING.search(before)
    if setting and node is not None:
        for n in (node, rec.parents.get(node)):
            words, values = rec.settings.get(n, (set(), []))
            if setting.group(1) in words and _matches(sp, v, values, rel_tol):
                return True
    about = _about(rec, node, text)
    results = [x for n in about for x in rec.results.get(n, [])]
    results += [
        x for n in about for name, xs in rec.metrics.get(n, {}).items() if _names(text, name) for x in xs
    ]
    if sp.unit == "%":
        return _matches(sp, v, results, rel_tol) or _matches(sp, v, [100 * x for x in results], rel_tol)
    if sp.unit in ("x", "\u00d7"):
        ratios = [a / b for i, j in permutations(about, 2)
                  if (a := rec.scores.get(i)) is not None and (b := rec.scores.get(j)) and math.isfinite(a / b)]  # fmt: skip
        return _matches(sp, v, ratios, rel_tol)
    return _matches(sp, v, results, rel_tol)


def sanitize_claims(text: str, rec: Record, node: int | None = None, rel_tol: float = 0.01) -> Sanitized:
    """Replace every number that does not stand (`stands`) with REDACTED."""
    pieces: list[str] = []
    redacted: list[str] = []
    last = 0
    for sp in numbers(text):
        if stands(sp, text, rec, node, rel_tol):
            continue
        pieces += [text[last : sp.start], REDACTED]
        redacted.append(sp.text)
        last = sp.end
    pieces.append(text[last:])
    return Sanitized(text="".join(pieces), redacted=redacted)


LEAK_TEMPLATES: dict[str, tuple[str, ...]] = {
    "decimal in [0, 1]": ("accuracy rose to {x}", "the score reached {x}", "node {n} scored {x}",
                          "a loss of {x} after the change"),
    "integer 1-20": ("the error fell by {x}", "{x} experiments failed", "it took {x} seconds",
                     "the best program used {x} layers"),
    "integer percentage": ("accuracy rose to {x}%", "{x}% fewer errors", "improved by {x}%",
                           "node {n} was {x}% better"),
}  # fmt: skip
"""Sentences a model writes about results, each with one number `{x}` (and `{n}`, the node it is about)."""


def leak_rates(rec: Record, samples: int = 400, seed: int = 0) -> dict[str, float]:
    """Per kind of number, the share of random numbers of that kind that stand in `LEAK_TEMPLATES`'s
    sentences, each about a random node of the run: what the grounding lets through when the model
    invents a number."""
    import random

    rng = random.Random(seed)
    draw = {
        "decimal in [0, 1]": lambda: f"{rng.randint(0, 100) / 100:.2f}",
        "integer 1-20": lambda: str(rng.randint(1, 20)),
        "integer percentage": lambda: str(rng.randint(1, 100)),
    }
    nodes = sorted(rec.nodes)
    out = {}
    for kind, templates in LEAK_TEMPLATES.items():
        passed = 0
        for i in range(samples):
            node = rng.choice(nodes)
            text = templates[i % len(templates)].format(x=draw[kind](), n=node)
            passed += not sanitize_claims(text, rec, node).redacted
        out[kind] = passed / samples
    return out
