"""Seeds of a run's model calls and draws, each a fixed function of the run's one seed and of where the call
happens, so that a run with the same seed asks the same questions with the same randomness."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Seeds:
    """Seeds of a run's model calls, each a fixed function of the run's seed and where the call happens."""

    base: int

    def plan(self) -> int:
        return self.base

    def audit(self, i: int) -> int:
        return self.base + i

    def round(self, round: int) -> int:
        """Inspection, comparison and attribution of a round."""
        return self.base + round

    def proposal(self, round: int, attempt: int) -> int:
        return self.base * 1000 + round * 10 + attempt

    def node(self, node_id: int) -> int:
        """The investigator's calls for one node."""
        return self.base * 1000 + node_id
