"""A scripted backend that a bench worker process can load by name (`--set scientist_model.backend=
tests.bench_backend:ScriptedBackend`): the rule-following backend of the search harness tests, with the
constructor `search.run.make_backend` calls, and a stall set from the environment (so that a test can
stop a bench while a run is under way, at a known point). Harness tests only; it says nothing about any model."""

from __future__ import annotations

import os
import time

from tests.doubles import RuleBackend


class ScriptedBackend(RuleBackend):
    def __init__(self, model: str | None = None, usage_sink=None, seed: int = 0):
        super().__init__(seed)
        self.sink = usage_sink
        self.stall_at = int(os.environ.get("ARTS_TEST_STALL_AT_EXECUTOR", "0"))
        """With N > 0: the N-th executor call never returns (the run stays under way until it is killed)."""

    def generate(self, prompts, n=1, sampling=None, schema=None, adapter=None, purpose=""):
        if purpose == "executor" and self.stall_at and self.purposes.count("executor") + 1 >= self.stall_at:
            time.sleep(3600)
        return super().generate(prompts, n, sampling, schema, adapter, purpose)


class BrokenBackend:
    """A backend whose model cannot load: the run that asks for it fails, the bench goes on."""

    def __init__(self, model: str | None = None, usage_sink=None, seed: int = 0):
        raise RuntimeError("scripted failure: this model cannot load")
