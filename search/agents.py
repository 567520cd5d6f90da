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
        self._scientist = Scientist(scientist_backend, scientist) if scientist_backend else None
        self._analyst = Analyst(scientist_backend, analysis) if scientist_backend else None
        self._executor = Executor(executor_backend, executor) if executor_backend else None
        self._investigator = Investigator(executor_backend, investigator) if executor_backend else None
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
