"""The run's agents: the scientist and analyst (one backend), the executor and investigator (another, or the
same one), and the adapter they sample from.

The search decides which adapter its agents use (`use_adapter`): test-time training publishes each new
checkpoint here and every later scientist call (proposal, inspection, audit) runs under it. A method that
calls no model (`mutate`) gets agents with no backend, and asking for one is an error that names the fix.

Not done here: building backends (`search.run`), or deciding what to ask them (the methods).
"""

from __future__ import annotations

from arts.policy.analysis import AnalysisConfig, Analyst
from arts.policy.base import Backend
from arts.policy.executor import Executor, ExecutorConfig
from arts.policy.investigator import Investigator, InvestigatorConfig
from arts.policy.scientist import Scientist, ScientistConfig
from arts.search.batching import Batching


class Agents:
    def __init__(
        self,
        scientist_backend: Backend | None,
        executor_backend: Backend | None,
        scientist: ScientistConfig,
        analysis: AnalysisConfig,
        executor: ExecutorConfig,
        investigator: InvestigatorConfig,
    ):
        self.scientist_backend, self.executor_backend = scientist_backend, executor_backend
        self.batching = Batching()
        """Which calls and evaluations run at once (`search.batching`): every agent's backend goes through it."""
        thinking = self.batching.wrap(scientist_backend)
        doing = thinking if executor_backend is scientist_backend else self.batching.wrap(executor_backend)
        self._scientist = Scientist(thinking, scientist) if thinking else None
        self._analyst = Analyst(thinking, analysis) if thinking else None
        self._executor = Executor(doing, executor) if doing else None
        self._investigator = Investigator(doing, investigator) if doing else None
        self.adapter: str | None = None
        """The adapter the scientist samples from (None: the base model)."""

    @property
    def has_model(self) -> bool:
        return self.scientist_backend is not None

    def use_adapter(self, name: str | None) -> None:
        """Every later scientist call samples from this adapter (None: the base model)."""
        self.adapter = name
        if self._scientist is not None:
            self._scientist.adapter = name

    def count_tokens(self, text: str) -> int:
        return self.scientist_backend.count_tokens(text) if self.scientist_backend else len(text) // 4

    @property
    def scientist(self) -> Scientist:
        return _need(self._scientist, "scientist")

    @property
    def analyst(self) -> Analyst | None:
        return self._analyst

    @property
    def executor(self) -> Executor:
        return _need(self._executor, "executor")

    @property
    def investigator(self) -> Investigator:
        return _need(self._investigator, "investigator")


def _need(agent, name: str):
    if agent is None:
        raise RuntimeError(f"this search method runs without a {name} model; choose a method that uses one")
    return agent
