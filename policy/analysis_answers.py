"""What the analysis calls answer about an experiment's result: competing causes, the critic's scores, a
judgement, a reflection, and the joint comparison's verdicts.

These are the answer models of `policy.analysis` (and the types `search.investigation.attribution` routes
on), kept apart from the prompts that ask for them. Their field order is part of the grammar: a model
writes the fields in this order, so each text a label classifies comes before the label. Per call,
`policy.analysis` narrows the id fields to `Literal`s of the ids it shows. The task plan, asked once per
search about the statement rather than a result, stays there.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

Category = Literal["implementation", "design", "method"]
"""implementation: the code is wrong; design: the evaluation or protocol is wrong; method: the idea is."""
Severity = Literal["minor", "major", "fatal"]
Stance = Literal["support", "oppose", "neutral"]

_FORBID = ConfigDict(extra="forbid")


class Cause(BaseModel):
    """One candidate explanation of a failed or stalled experiment. The grammar writes the fields in this
    order: the cause and its evidence first, the labels only after the text they classify (the 135M
    default wrote junk when asked to quote the evidence before stating the cause)."""

    model_config = _FORBID
    cause: str = Field(min_length=4, max_length=120)
    """What went wrong."""
    evidence: str = Field(min_length=4, max_length=120)
    """What in the logs, curves or results the cause rests on."""
    category: Category
    severity: Severity
    fix: str = Field(min_length=4, max_length=120)
    """What to do about it."""


class Critique(BaseModel):
    """The critic's score of one cause, and the category it believes is right."""

    model_config = _FORBID
    index: int
    """Position of the cause in the list scored (per call a `Literal` of 0..k-1)."""
    score: float = Field(ge=0, le=1)
    """How well the cause explains the evidence."""
    category: Category
    criticality: float = Field(ge=0, le=1)
    """How much the cause, if true, undermines the idea tested: 0 harmless, 1 fatal to it. Gates how deep
    the revision goes (`search.investigation.attribution.route`)."""


class Judgement(BaseModel):
    """Whether a result is a valid measurement of its hypothesis, even if the result is weak."""

    model_config = _FORBID
    reason: str = Field(min_length=4, max_length=120)
    """Written first, so the verdict is conditioned on it."""
    valid_measurement: bool
    confidence: float = Field(ge=0, le=1)


class Reflection(BaseModel):
    """One free-text reflection on a failed or stalled experiment (the reflection baseline)."""

    model_config = _FORBID
    reflection: str = Field(min_length=8, max_length=200)
    """What went wrong and what to do differently next time."""


class HypothesisVerdict(BaseModel):
    """The observation a comparison yields and how it bears on one hypothesis."""

    model_config = _FORBID
    hypothesis: int
    """Hypothesis id (per call a `Literal` of the ids compared)."""
    observation: str = Field(min_length=4, max_length=140)
    """Written before the verdict, so the verdict is conditioned on it."""
    verdict: Stance


class Comparison(BaseModel):
    """One joint comparison over the working hypotheses. The verdicts come first: written after a list
    of flawed ids, the 135M default called every experiment flawed."""

    model_config = _FORBID
    verdicts: list[HypothesisVerdict] = []
    """At most one per hypothesis (duplicates are dropped, first kept)."""
    predictions: list[Annotated[str, Field(min_length=4, max_length=120)]] = Field([], max_length=2)
    """Predictions that would tell the hypotheses apart."""
    flawed: list[int] = []
    """Hypotheses whose experiment was flawed (a bug or a broken protocol, not a refutation)."""
