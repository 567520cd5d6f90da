"""The meter: every budget of a run and every reason it stops, in one place.

A run stops when a budget is spent (evaluations, rounds, tokens, dollars, wall time), when a part of the
search declares that nothing is left to do (`halt`), or when too many rounds in a row spend no evaluation.
Each of these used to be decided where it arose; here each is a named reason, and `stop_reason()` is the
only question the loop asks. Counters are rebuilt from the store's events on resume, so a resumed run
spends exactly what is left.

Not done here: writing the events it counts (the lab and the backends' usage sink do, through the ledger).
"""

from __future__ import annotations

import time

from pydantic import BaseModel, ConfigDict, Field

from arts.policy.base import Usage
from arts.search.state import Event

EXECUTOR_PURPOSES = ("executor", "investigate", "answer")
"""Model calls made by the executor (program edits, or a diagnosis's investigation and answer)."""
OPTIMIZE_ROUND_CAP = 100
"""The round cap of an optimize task when `budget.rounds` is unset: a backstop, as the evaluation budget
and `budget.idle_rounds` end such a run first."""
ANSWER_ROUND_CAP = 8
"""The round cap of an answer task when `budget.rounds` is unset: it spends no evaluations, so the rounds
are its budget."""


class BudgetConfig(BaseModel):
    """A run stops as soon as any budget is spent."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    evals: int = Field(20, ge=1)
    """Sandboxed evaluations (every executor validate call counts)."""
    rounds: int | None = Field(None, ge=1)
    """Search rounds; None: OPTIMIZE_ROUND_CAP (100) on an optimize task, ANSWER_ROUND_CAP (8) on an answer
    task (which spends no evaluations)."""
    tokens: int | None = Field(None, ge=1)
    """Model tokens, prompt plus completion, scientist and executor together."""
    wall_s: float | None = Field(None, gt=0)
    """Wall-clock seconds."""
    dollars: float | None = Field(None, gt=0)
    """Model spending, priced by each model's `pricing` (models without a price cost nothing)."""
    idle_rounds: int = Field(3, ge=1)
    """An optimize run ends after this many rounds in a row without an evaluation. Measured with the 135M
    default on friedman: once a constant's menu had run, most of 90 rounds proposed refused moves (an hour
    for 20 evaluations)."""

    def round_cap(self, kind: str) -> int:
        if self.rounds is not None:
            return self.rounds
        return OPTIMIZE_ROUND_CAP if kind == "optimize" else ANSWER_ROUND_CAP


class BudgetSpent(Exception):
    """Raised inside an experiment when the evaluation budget runs out mid-way."""


class Meter:
    """Counts what a run spends and says why it must stop."""

    def __init__(self, budget: BudgetConfig, kind: str, events: list[Event], wall_s: float = 0.0):
        self.budget, self.kind = budget, kind
        self.t0 = time.time() - wall_s
        self.tokens = {"prompt": 0, "completion": 0}
        self.dollars = 0.0
        self.evals = 0
        for e in events:
            if e.kind == "usage":
                self.tokens["prompt"] += e.payload.get("prompt_tokens", 0)
                self.tokens["completion"] += e.payload.get("completion_tokens", 0)
                self.dollars += e.payload.get("dollars", 0.0)
            elif e.kind == "eval" and not e.payload.get("interrupted"):
                self.evals += 1
        self.timing = {"scientist_s": 0.0, "executor_s": 0.0, "eval_s": 0.0}
        self.halted: str | None = None
        self.idle = 0

    # -- spending ------------------------------------------------------------------------------------------
    def usage(self, usage: Usage, dollars: float) -> None:
        self.tokens["prompt"] += usage.prompt_tokens
        self.tokens["completion"] += usage.completion_tokens
        self.dollars += dollars
        key = "executor_s" if usage.purpose in EXECUTOR_PURPOSES else "scientist_s"
        self.timing[key] += usage.wall_s

    def take_eval(self) -> None:
        """Claim one evaluation; raises BudgetSpent when none is left."""
        if self.evals >= self.budget.evals:
            raise BudgetSpent
        self.evals += 1

    def refund_eval(self) -> None:
        """Give back an evaluation claimed by `take_eval` that was cut off from outside the program."""
        self.evals = max(self.evals - 1, 0)

    def eval_done(self, wall_s: float) -> None:
        self.timing["eval_s"] += wall_s

    def halt(self, reason: str) -> None:
        """A part of the search says the run cannot go on (the first reason given is kept)."""
        if self.halted is None:
            self.halted = reason

    def round_done(self, evaluated: bool) -> None:
        """Count rounds in a row that spent no evaluation (optimize tasks only: diagnoses spend none)."""
        self.idle = 0 if evaluated or self.kind != "optimize" else self.idle + 1
        if self.idle >= self.budget.idle_rounds:
            self.halt(
                f"{self.idle} rounds in a row spent no evaluation: their proposals or edits were unusable,"
                " or programs already run"
            )

    # -- reading -------------------------------------------------------------------------------------------
    @property
    def total_tokens(self) -> int:
        return sum(self.tokens.values())

    @property
    def wall_s(self) -> float:
        return time.time() - self.t0

    def stop_reason(self, round: int, within_round: bool = False) -> str | None:
        """Why the run must stop now; inside a round the round cap does not cut the round short."""
        b = self.budget
        if self.halted is not None:
            return self.halted
        if self.evals >= b.evals:
            return f"evaluation budget spent ({self.evals}/{b.evals})"
        cap = b.round_cap(self.kind)
        if not within_round and round >= cap:
            return f"round cap reached ({cap})"
        if b.tokens is not None and self.total_tokens >= b.tokens:
            return f"token budget spent ({self.total_tokens}/{b.tokens})"
        if b.dollars is not None and self.dollars >= b.dollars:
            return f"dollar budget spent (${self.dollars:.4f}/${b.dollars:g})"
        if b.wall_s is not None and self.wall_s >= b.wall_s:
            return f"wall-clock budget spent ({b.wall_s:g}s)"
        return None
