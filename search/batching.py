"""Work of a round asked at once: which model calls join one batch and which evaluations run together.

A run has one `Batching` (held by its agents, `search.agents`). Every agent's backend is wrapped at
construction (`Batching.wrap`): outside a batch the wrapper calls the backend as it is; inside one
(`together`), a call made by one of the batch's threads joins its `search.overlap.Overlap`, and so does
an evaluation the lab starts there (`evaluate`). Nothing swaps another object's backend for a batch.

Used for: a round's experiments (`experiments`: executor calls batched, evaluations on workers, the
analyst's attribution joining where it shares the executor's model), the audits (`calls`: independent
scientist calls), and a round's analysis (attribution and comparison).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from arts.policy.base import Backend, Request
from arts.search.overlap import Overlap

Together = Callable[[list[Callable[[], Any]]], list[Any]]
"""Runs independent jobs, possibly at once; their results in order."""


class Batching:
    """The run's batches (see the module docstring): at most one open at a time."""

    def __init__(self) -> None:
        self._open: Overlap | None = None
        self.batches: list[int] = []
        """The size of every model batch the last `together` decoded (for the ledger and tests)."""

    def wrap(self, backend: Backend | None) -> Backend | None:
        return None if backend is None else Batched(backend, self)

    @contextmanager
    def together(self, backend: Backend | None, workers: int = 1) -> Iterator[Together]:
        """Jobs run in the yielded callable at once: calls to `backend` made inside them are decoded as
        one batch, and up to `workers` evaluations run together."""
        if self._open is not None:  # already inside a batch: its jobs run through it
            yield self._open.run
            return
        self._open = Overlap(backend, workers)
        try:
            yield self._open.run
        finally:
            self.batches, self._open = self._open.batches, None

    def evaluate(self, fn: Callable[[], Any]) -> Any:
        """`fn()` (one evaluation), on one of the open batch's workers when there is one."""
        return fn() if self._open is None else self._open.evaluate(fn)

    def joins(self, backend: Backend) -> bool:
        """Whether a call to `backend` made now joins the open batch: it is that backend's, and the caller
        is one of its jobs."""
        return (ov := self._open) is not None and ov.backend is backend and ov.inside()

    def generate(self, request: Request) -> list:
        """One request's completions, decoded with the open batch's other requests."""
        assert self._open is not None
        return self._open.generate(request)


class Batched:
    """An agent's backend as `Batching` sees it: `generate` may join a batch; everything else is the
    wrapped backend's."""

    def __init__(self, backend: Backend, batching: Batching):
        self._backend, self._batching = backend, batching

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)

    def generate(self, prompts, n=1, sampling=None, schema=None, adapter=None, purpose=""):
        if not self._batching.joins(self._backend):  # the backend's own call, unchanged
            return self._backend.generate(prompts, n, sampling, schema, adapter, purpose)
        if isinstance(prompts, list) and prompts and not isinstance(prompts[0], dict):
            return [self.generate(p, n, sampling, schema, adapter, purpose)[0] for p in prompts]
        return [self._batching.generate(Request(prompts, n, sampling, schema, adapter, purpose))]
