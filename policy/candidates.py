"""A proposal's candidate: one (parent, hypothesis) action the scientist offers, with its stated probability.

The scientist's answer is decoded under a grammar into these fields; the harness then normalises the
stated probabilities over the proposal (`probability`) so that the external sampler can draw by them.
Not done here: deciding which candidates may be drawn (the search's hypothesis space does).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Candidate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    parent: int
    """The node the experiment starts from."""
    hypothesis: str
    """What to change and why (one concrete change)."""
    axis: str = ""
    """The name of what the change varies."""
    region: str = ""
    """The kind of change, in one or two words."""
    probability: float = Field(0.0, ge=0.0, le=1.0)
    """The stated probability, normalised over the proposal (what the sampler draws by)."""
    stated_probability: float = 0.0
    """The probability as the model wrote it."""
    cites: list[int] = []
    """Observation ids that motivated it."""
    refines: int | None = None
    """The id of the shown hypothesis it refines (its lineage), if it names one."""
