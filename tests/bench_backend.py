"""A scripted backend that a bench worker process can load by name (`--set scientist_model.backend=
tests.bench_backend:ScriptedBackend`): the rule-following backend of the search harness tests, with the
constructor `search.run.make_backend` calls, and a delay per call from the environment (so that a test
can stop a bench while a run is under way). Harness tests only; it says nothing about any model."""

from __future__ import annotations

import os

from tests.test_search import RuleBackend


class ScriptedBackend(RuleBackend):
    def __init__(self, model: str | None = None, usage_sink=None, seed: int = 0):
        super().__init__(seed, delay=float(os.environ.get("ARTS_TEST_BACKEND_DELAY", "0")))
        self.sink = usage_sink


class BrokenBackend:
    """A backend whose model cannot load: the run that asks for it fails, the bench goes on."""

    def __init__(self, model: str | None = None, usage_sink=None, seed: int = 0):
        raise RuntimeError("scripted failure: this model cannot load")
