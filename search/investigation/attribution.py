"""Failure attribution with multiple working hypotheses: competing causes, a critic, a fixed routing table.

One verdict from one call ("the idea was wrong") lets a single careless answer discard a sound idea. So a
failed or stalled experiment gets K candidate causes (`policy.analysis.Analyst.causes`), an independent
critic scores them (support and criticality) and may correct their category, and the top-ranked cause is
routed: its criticality gates the depth (SAGE): below the first gate the result is accepted; a wrong
implementation is repaired, a wrong evaluation design gets its protocol fixed; a wrong method is refined
locally, structurally or, past the last gate, pivoted away from. Without a critic (`critic = false`, or
an unusable answer) a fixed table routes the analyst's own category and severity. A verdict clamp stops a valid-but-weak result from discarding its hypothesis: when the judge says the
experiment validly measured it with enough confidence, a pivot is downgraded to a structural refinement.
Stall detection and the distinctness check on pivots are pure functions of numbers and text.

Deliberately not done here: no model prompt (policy.analysis), no storage and no acting on a decision
(the round loop does both); `Decision.model_dump()` is the plain record the store keeps.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from arts.policy.analysis import Analyst
from arts.policy.analysis_answers import Category, Cause, Critique, Judgement, Severity
from arts.search.investigation import meaning

Action = Literal["accept", "repair", "fix_protocol", "refine_local", "refine_structural", "pivot"]

ROUTES: dict[tuple[Category, Severity], Action] = {
    ("implementation", "minor"): "repair",
    ("implementation", "major"): "repair",
    ("implementation", "fatal"): "repair",
    ("design", "minor"): "fix_protocol",
    ("design", "major"): "fix_protocol",
    ("design", "fatal"): "fix_protocol",
    ("method", "minor"): "refine_local",
    ("method", "major"): "refine_structural",
    ("method", "fatal"): "pivot",
}
"""(category, severity) -> action, on the analyst's own labels: the route when no critic scored the cause
(`critic = false`, or its answer was unusable). Only a fatal method flaw discards the hypothesis."""
DEPTHS: tuple[Action, ...] = ("accept", "refine_local", "refine_structural", "pivot")
"""A method flaw's revision, deeper as the critic's criticality passes each of `AttributionConfig.gates`."""
DISCARDING: frozenset[Action] = frozenset({"pivot"})
"""Actions that give the hypothesis up; the verdict clamp turns them into `CLAMPED_TO`."""
CLAMPED_TO: Action = "refine_structural"
UNSCORED = 0.5
"""Score of a cause the critic did not score (every cause, when the critic failed: ties keep order)."""


class AttributionConfig(BaseModel):
    """How failures are attributed and when the search counts as stalled."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    k: int = Field(3, ge=1, le=5)
    """Candidate causes asked for per attribution (1: the single-hypothesis ablation)."""
    critic: bool = True
    """Score the causes with an independent critic (false: the no-critic ablation; the analyst's first
    cause is routed on its own labels)."""
    gates: list[float] = Field([0.25, 0.5, 0.8], min_length=3, max_length=3)
    """Criticality gates of a scored cause: below the first, accept the result and move on; then a local
    refinement, a structural one, and from the third on a pivot (a method flaw; a flaw of the code or the
    evaluation is repaired or its protocol fixed, unless it is below the first gate)."""
    mode: Literal["diagnosis", "reflection"] = "diagnosis"
    """diagnosis: K causes, critic, judge and routing; reflection: one free-text reflection kept in the
    memory and no routing (the reflection baseline)."""

    @field_validator("gates")
    @classmethod
    def _rising(cls, v: list[float]) -> list[float]:
        if any(not 0 <= g <= 1 for g in v) or sorted(v) != v:
            raise ValueError(
                f"gates {v}: three criticalities in [0, 1], in rising order (accept, local, structural)"
            )
        return v

    clamp_confidence: float = Field(0.6, ge=0, le=1)
    """A judge saying 'valid measurement' with at least this confidence stops a pivot."""
    window: int = Field(4, ge=2)
    """Stall detection looks at the last this-many nodes of the best-so-far curve."""
    min_slope: float = Field(0.02, ge=0)
    """Per node, as a fraction of the curve's whole span: a window rising slower than this is flat."""
    noise_ratio: float = Field(0.5, ge=0)
    """Progress counts only where the window's slope exceeds this many times its volatility. Below 1 so
    that one step of a staircase (a single improvement inside the window) is progress, not noise."""
    max_decay: float = Field(0.8, gt=0, le=1)
    """Stalled when the last window gained less than (1 - max_decay) of what the window before it did."""
    distinct_threshold: float = Field(0.5, gt=0, le=1)
    """A pivot whose similarity (`meaning.similarity`: cosine of sentence embeddings, else word overlap)
    with an archived hypothesis reaches this is not new."""
    pivot_retries: int = Field(2, ge=0)
    """How many times the loop asks again for a pivot that is distinct from the archived ones."""
    per_round: int = Field(1, ge=0)
    """At most this many failure attributions per round (each is 3 model calls)."""
    follow_ups: int = Field(1, ge=0)
    """Follow-up experiments (repairs, remeasurements, refinements) the next round runs first, at most;
    0 leaves decisions as notes in the memory (the ablation of acting on them)."""


class Trajectory(BaseModel):
    """Shape of the best-so-far curve over the last window (slope and volatility in units of its span)."""

    model_config = ConfigDict(extra="forbid")
    points: int
    """Values the curve has in all."""
    slope: float
    """Least-squares slope per node over the window, divided by the whole curve's span."""
    volatility: float
    """Standard deviation of the window's residuals around that line, divided by the span."""
    marginal_decay: float
    """1 - (last window's gain / previous window's gain), in [0, 1]; 0 where nothing can decay."""


class RankedCause(BaseModel):
    """A cause after the critic: its category as corrected, its score and its place in the analyst's list."""

    model_config = ConfigDict(extra="forbid")
    index: int
    cause: Cause
    score: float
    corrected: bool
    """Whether the critic changed the category."""
    criticality: float | None = None
    """The critic's criticality of the cause; None when no critic scored it."""


class Decision(BaseModel):
    """The routed outcome of one attribution, with every input, as plain data for the store."""

    model_config = ConfigDict(extra="forbid")
    action: Action
    """What the loop does next (after the clamp)."""
    routed: Action
    """What the table said before the clamp."""
    clamped: bool
    cause: Cause
    """The top-ranked cause (category as corrected by the critic)."""
    index: int
    """Its position in `causes`."""
    score: float
    criticality: float | None = None
    """The critic's criticality that gated the route; None: routed on the analyst's labels."""
    causes: list[Cause] = []
    """Every candidate cause, as the analyst wrote them."""
    critiques: list[Critique] = []
    judgement: Judgement | None = None
    errors: dict[str, str] = {}
    """Call name -> why its answer was unusable (a failed critic or judge does not stop the decision)."""


def trajectory(best_so_far: list[float], cfg: AttributionConfig | None = None) -> Trajectory:
    """Slope, volatility and marginal decay of a score curve (higher is better) over its last window."""
    window = (cfg or AttributionConfig()).window
    vals = [float(v) for v in best_so_far]
    span = max(vals) - min(vals) if vals else 0.0
    scale = span if span > 0 else 1.0
    tail = vals[-window:]
    if len(tail) < 2:
        return Trajectory(points=len(vals), slope=0.0, volatility=0.0, marginal_decay=0.0)
    xs = range(len(tail))
    mx, my = statistics.fmean(xs), statistics.fmean(tail)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, tail)) / sum((x - mx) ** 2 for x in xs)
    residuals = [y - (my + slope * (x - mx)) for x, y in zip(xs, tail)]
    decay = 0.0
    if len(vals) >= 2 * window - 1:  # two windows sharing their boundary point
        recent, earlier = vals[-1] - vals[-window], vals[-window] - vals[-2 * window + 1]
        if earlier > 0:
            decay = min(max(1.0 - recent / earlier, 0.0), 1.0)
        elif recent <= 0:  # no gain in either window: fully decayed, as SAGE defaults D
            decay = 1.0
    return Trajectory(
        points=len(vals),
        slope=slope / scale,
        volatility=statistics.pstdev(residuals) / scale,
        marginal_decay=decay,
    )


def criticality_levels(gates: list[float]) -> tuple[float, ...]:
    """The critic's criticality choices: the middle of each band the gates cut [0, 1] into, so each
    choice routes to one depth (accept, local, structural, pivot) and no choice sits on a gate."""
    edges = [0.0, *gates, 1.0]
    return tuple(round((a + b) / 2, 3) for a, b in zip(edges, edges[1:]))


def stalled(traj: Trajectory, cfg: AttributionConfig) -> bool:
    """Flat, noise-dominated or decaying progress over a full window; too short a curve never stalls."""
    if traj.points < cfg.window:
        return False
    return (
        traj.slope <= cfg.min_slope
        or traj.slope <= cfg.noise_ratio * traj.volatility
        or traj.marginal_decay >= cfg.max_decay
    )


SEVERITY_ORDER = {"fatal": 0, "major": 1, "minor": 2}


EVIDENCE_WEIGHT = 1.0
"""Support added to a cause of the category a decisive harness signal blames (`signals.Signals.evidence`):
more than the critic's grades can separate, so the measured fact wins over the 135M critic's guess."""


def rank(causes: list[Cause], critiques: list[Critique], blamed: Category | None = None) -> list[RankedCause]:
    """Causes by support, highest first: the critic's grade, plus `EVIDENCE_WEIGHT` for the cause the
    analyst wrote in the category a decisive signal `blamed` (which keeps that category). Ties (every cause, without a critic) go to the analyst's own
    severity, fatal first, then to the analyst's order. The critic's category wins. The causes' order is
    the grammar's (the code, the evaluation, the idea), so order alone would always pick the code."""
    by_index = {c.index: c for c in critiques if 0 <= c.index < len(causes)}
    ranked = []
    for i, cause in enumerate(causes):
        crit = by_index.get(i)
        backed = blamed is not None and cause.category == blamed  # by the evidence: the critic's relabelling
        category = blamed if backed else crit.category if crit else cause.category  # does not undo it
        bonus = EVIDENCE_WEIGHT if backed else 0.0
        ranked.append(
            RankedCause(
                index=i,
                cause=cause.model_copy(update={"category": category}),
                score=(crit.score if crit else UNSCORED) + bonus,
                corrected=category != cause.category,
                criticality=crit.criticality if crit else None,
            )
        )
    return sorted(ranked, key=lambda r: (-r.score, SEVERITY_ORDER[r.cause.severity], r.index))


def gated(category: Category, criticality: float, gates: list[float]) -> Action:
    """The action for a cause the critic scored: its criticality gates the depth (SAGE). A method flaw is
    accepted, refined locally, structurally or pivoted from; a flaw of the code is repaired and one of the
    evaluation gets its protocol fixed, unless it is below the first gate (accepted)."""
    depth = sum(criticality >= g for g in gates)
    if category == "method":
        return DEPTHS[depth]
    if depth == 0:
        return "accept"
    return "repair" if category == "implementation" else "fix_protocol"


def route(top: RankedCause, judgement: Judgement | None, cfg: AttributionConfig, depth: str = "") -> Decision:
    """The top cause's action (gated by the critic's criticality, else the table on the analyst's labels),
    clamped when a confident judge calls the measurement valid. `depth`, from a decisive signal: "accept"
    (a regression too small to act on) accepts whatever the cause; "local" (a step too far or too short)
    refines a method cause locally; "pivot" (a knob that changed nothing) pivots from a method cause, and
    no judge clamps it: what it measured is the measurement's verdict."""
    if depth == "accept":
        routed: Action = "accept"
    elif depth == "local" and top.cause.category == "method":
        routed = "refine_local"
    elif depth == "pivot" and top.cause.category == "method":
        routed = "pivot"
    elif top.criticality is not None:
        routed = gated(top.cause.category, top.criticality, cfg.gates)
    else:
        routed = ROUTES[(top.cause.category, top.cause.severity)]
    clamp = (
        depth != "pivot"
        and routed in DISCARDING
        and judgement is not None
        and judgement.valid_measurement
        and judgement.confidence >= cfg.clamp_confidence
    )
    return Decision(
        action=CLAMPED_TO if clamp else routed,
        routed=routed,
        clamped=clamp,
        cause=top.cause,
        index=top.index,
        score=top.score,
        criticality=top.criticality,
        judgement=judgement,
    )


SIGNAL_FIXES: dict[Category, str] = {
    "implementation": "fix the code where the error points",
    "design": "measure it again before judging the idea",
    "method": "the same change with a smaller step, or another knob where it changed nothing",
}


def measured_only(
    report: str, blamed: Category | None, depth: str, errors: dict[str, str]
) -> Decision | None:
    """The route of a decisive harness signal when the analyst wrote no usable cause (a 135M model's cause
    list can be cut off or malformed): the signal's own cause, routed as one the critic backed. None
    when no signal decides (nothing measured says what failed)."""
    if blamed is None and depth != "accept":
        return None
    lines = report.rpartition("signals:\n")[2].splitlines()
    seen = next((ln.lstrip("- ")[:120] for ln in lines if ln.strip()), "the harness's measurement")
    category = blamed or "method"
    cause = Cause(cause="what the harness measured about this experiment", evidence=seen.ljust(4),
                  category=category, severity="minor", fix=SIGNAL_FIXES[category])  # fmt: skip
    by_depth = {"accept": "accept", "local": "refine_local", "pivot": "pivot"}
    routed = by_depth.get(depth) or ROUTES[(category, "minor")]
    errors = {**errors, "causes": errors.get("causes", "no usable cause came back: routed on the signal")}
    return Decision(action=routed, routed=routed, clamped=False, cause=cause, index=0, score=1.0,
                    causes=[cause], errors=errors)  # fmt: skip


def distinct(text: str, archived: list[str], threshold: float) -> bool:
    """Whether `text` differs from every archived hypothesis: its similarity by meaning (`meaning`; word
    overlap without the model) is below `threshold` with each."""
    if not meaning.words(text):
        return False
    return all(meaning.similarity(text, old) < threshold for old in archived)


Together = Callable[[list[Callable[[], Any]]], list[Any]]
"""Runs independent calls, possibly at once (`search.overlap.Overlap.run`); their results in order."""


def attribute(
    analyst: Analyst,
    report: str,
    cfg: AttributionConfig,
    seed: int | None = None,
    together: Together | None = None,
    evidence: tuple[Category | None, str] = (None, ""),
) -> Decision | None:
    """(causes -> critic) beside judge -> rank -> route. None when no usable causes came back; a failed
    (or switched off) critic leaves every cause at `UNSCORED`, routed on its labels; a failed judge means
    no clamp. The judge does not read the causes: `together` may ask it while they are written.
    `evidence`: the category and depth a decisive harness signal points to (`signals.Signals.evidence`),
    weighed with the critic's support; the no-critic ablation routes on the analyst's labels alone."""
    errors: dict[str, str] = {}

    def error(name: str) -> None:
        if analyst.last is not None and analyst.last.error:  # read before another call can replace it
            errors[name] = analyst.last.error[:300]

    def diagnose() -> tuple[list[Cause], list[Critique]]:
        causes = analyst.causes(report, cfg.k, seed=seed)
        if not causes:
            return [], []
        critiques = (
            analyst.critic(report, causes, seed=seed, levels=criticality_levels(cfg.gates))
            if cfg.critic
            else []
        )
        if cfg.critic and not critiques:
            error("critic")
        return causes, critiques

    def judge() -> Judgement | None:
        judgement = analyst.judge(report, seed=seed)
        if judgement is None:
            error("judge")
        return judgement

    blamed, depth = evidence if cfg.critic else (None, "")
    if together is None:  # one after another: no judge when no cause came back
        causes, critiques = diagnose()
        if not causes:
            return measured_only(report, blamed, depth, errors)
        judgement = judge()
    else:
        (causes, critiques), judgement = together([diagnose, judge])
        if not causes:
            return measured_only(report, blamed, depth, errors)
    decision = route(rank(causes, critiques, blamed)[0], judgement, cfg, depth)
    return decision.model_copy(update={"causes": causes, "critiques": critiques, "errors": errors})
