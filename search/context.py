"""The run context: the parts a round works with, each with one job, and the seeds derived in one place.

- `ledger`: the only writer of records (store first, then the in-memory state);
- `meter`: every budget and every reason to stop;
- `lab`: one action in, one evaluated node out;
- `agents`: the scientist, analyst, executor and investigator, and the adapter they sample from;
- `learning`: test-time training, when on (`search.learning`);
- `seeds`: every seed a model call or draw uses, derived from the run's one seed;
- `rng`: the round's random generator, seeded from the run's seed and the round number, so a resumed run
  (which starts a new round) never replays the draws of the rounds before the kill.
A method's round receives this context and hands each step only the parts it uses.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from arts.search.agents import Agents
from arts.search.config import SearchConfig
from arts.search.lab import Lab
from arts.search.ledger import Ledger
from arts.search.meter import Meter
from arts.search.seeds import Seeds
from arts.search.state import SearchState
from arts.tasks.base import Task

if TYPE_CHECKING:
    from arts.search.learning import Learning


@dataclass
class Run:
    cfg: SearchConfig
    task: Task
    ledger: Ledger
    meter: Meter
    lab: Lab
    agents: Agents
    log: Callable[[str], None]
    seeds: Seeds = field(init=False)
    learning: Learning | None = None
    _rng: tuple[int, random.Random] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.seeds = Seeds(self.cfg.seed)

    @property
    def rng(self) -> random.Random:
        """The generator of the current round: the same draws for the same seed and round, and a round
        number is never reused (resume starts the next one), so no draw repeats after a kill."""
        if self._rng is None or self._rng[0] != self.round:
            self._rng = (self.round, random.Random(f"{self.cfg.seed}/round/{self.round}"))
        return self._rng[1]

    @property
    def state(self) -> SearchState:
        return self.ledger.state

    @property
    def round(self) -> int:
        return int(self.ledger.meta("round", 0))

    def phase(self, name: str) -> None:
        """Name the step the round is in (propose, execute 2/4, ...) for a console that shows it live;
        a plain log callable ignores it."""
        if (show := getattr(self.log, "phase", None)) is not None:
            show(name, self.round)

    def said(self, text: str) -> None:
        """Log the model's own free text, which a console shows only when asked (`-v`)."""
        (getattr(self.log, "said", None) or self.log)(text)

    def stop_reason(self, within_round: bool = False) -> str | None:
        return self.meter.stop_reason(self.round, within_round)

    @property
    def metric(self) -> str:
        m = self.task.config.metric
        return m.name if m else "result"
