"""A round's experiments at once: their model calls decoded as one batch, their evaluations on workers.

One after another, a round of N experiments waits on the model for experiment 1, then on its
evaluation, then on the model for experiment 2, and so on; the model idles while the sandbox runs and
the other way round. `Overlap.run` gives each experiment a thread instead, under one rule: the harness
runs one thread at a time (a lock around everything that reads or writes the search state, the store
and the console), and a thread lets go of it only while it waits on the model or on an evaluation.
So the state is never touched by two threads, and what overlaps is exactly what should:
- model calls: a thread's call joins the pending batch; the batch is decoded (`generate_each`: one
  batch on the transformers backend, concurrent requests to a server) as soon as every experiment that
  is not evaluating is waiting on the model, so N executors ask together and none waits for an
  evaluation to finish before the others are answered;
- evaluations: up to `workers` run at once, each in its own sandboxed process, while the model answers
  the other experiments.
Nodes are created before the threads start (ids in pick order), results are committed as they arrive,
and a program another experiment is evaluating counts as already run (`search.lab`). After a batch,
the threads take the harness back in the order of their requests, so calls that overlap without
evaluations (a round's analysis) write the store in the same order every run. Not reproduced: the
exact order of a round's commits, which depends on how long each evaluation takes.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from arts.policy.base import Backend, Completion, Request, generate_each

T = TypeVar("T")


CORES_VAR = "ARTS_CORES"
"""The cores this process's share of the machine holds, where a parent divides it (`arts bench --jobs J`
gives each of its J searches the machine's cores / J)."""


def default_workers() -> int:
    """Evaluations at once when none is configured: the cores this process may use (`CORES_VAR`)."""
    if (share := os.environ.get(CORES_VAR, "")).isdigit() and int(share) > 0:
        return int(share)
    return max(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 1)


@dataclass
class _Slot:
    request: Request
    done: bool = False
    result: list[Completion] = field(default_factory=list)
    error: BaseException | None = None


class Overlap:
    """Runs callables at once under the harness lock (see the module docstring)."""

    def __init__(self, backend: Backend, workers: int):
        self.backend, self.workers = backend, max(workers, 1)
        self.harness = threading.Lock()
        self._cv = threading.Condition()
        self._live = self._evaluating = 0
        self._pending: list[_Slot] = []
        self._busy = False
        self._slots = threading.Semaphore(self.workers)
        self._threads: set[int] = set()
        self._let_go: dict[int, threading.Event] = {}  # thread -> set once it first lets go
        self._usages: deque = deque()  # usage records of decoded batches, until a thread holds the harness
        self._turns: deque[_Slot] = deque()  # the latest batch's requests whose threads wait for the harness
        self._sink: Callable | None = None
        self.batches: list[int] = []
        """The size of every batch decoded (for tests and the progress line)."""

    def inside(self) -> bool:
        """Whether the calling thread is one of the experiments `run` started."""
        return threading.get_ident() in self._threads

    def run(self, jobs: list[Callable[[], T]]) -> list[T]:
        """Run `jobs` at once, each in a thread holding the harness lock except while it waits on the
        model or an evaluation; their results in order. The first exception of a job is raised once all
        have ended (the others run to their end: each commits its own node). Called from one of its own
        threads, the jobs run as that thread's children while it waits for them (it lets the harness go,
        and it no longer counts among those a batch waits for)."""
        if len(jobs) <= 1:
            return [job() for job in jobs]
        results: list[Any] = [None] * len(jobs)
        errors: list[BaseException] = []
        nested = self.inside()

        def body(i: int, job: Callable[[], T], let_go: threading.Event) -> None:
            self._threads.add(threading.get_ident())
            self._let_go[threading.get_ident()] = let_go
            self.harness.acquire()
            try:
                results[i] = job()
            except BaseException as e:  # re-raised by `run`, after every job has ended
                errors.append(e)
            finally:
                self.harness.release()
                let_go.set()
                with self._cv:
                    self._live -= 1
                    self._cv.notify_all()
                self._threads.discard(threading.get_ident())
                self._let_go.pop(threading.get_ident(), None)

        threads = []
        if nested:  # the caller waits for its children: it is one live thread less, they are len(jobs) more
            self.harness.release()  # it counts as let go once they have (below): the order stays the picks'
        with self._cv:
            self._live = self._live + len(jobs) - 1 if nested else len(jobs)
        # a batch is decoded outside the harness: its usage records wait for a thread that holds it
        if not nested:
            self._sink = getattr(self.backend, "usage_sink", None)
            if self._sink is not None:
                self.backend.usage_sink = self._usages.append
        for i, job in enumerate(jobs):  # one at a time until each first lets go: their order is the picks'
            let_go = threading.Event()
            t = threading.Thread(target=body, args=(i, job, let_go), name=f"experiment-{i + 1}", daemon=True)
            t.start()
            threads.append(t)
            let_go.wait()
        if nested:
            self._let_go[threading.get_ident()].set()
        for t in threads:
            t.join()
        if nested:
            with self._cv:
                self._live += 1
            self.harness.acquire()
            self._flush()
        elif self._sink is not None:
            self.backend.usage_sink = self._sink
            self._flush()
        if errors:
            raise errors[0]
        return results

    # -- what a thread waits on ------------------------------------------------------------------------
    @contextmanager
    def _away(self, evaluating: bool, slot: _Slot | None = None) -> Iterator[None]:
        """The harness lock let go for the block (an evaluation counted as such); a model call's thread
        takes it back in its turn: the order of its request in the batch (`_turns`)."""
        self.harness.release()
        self._let_go[threading.get_ident()].set()
        if evaluating:
            with self._cv:
                self._evaluating += 1
                self._cv.notify_all()
        try:
            yield
        finally:
            if evaluating:
                with self._cv:
                    self._evaluating -= 1
            if slot is not None:
                with self._cv:
                    while slot in self._turns and self._turns[0] is not slot:
                        self._cv.wait()
            self.harness.acquire()
            if slot is not None:
                with self._cv:
                    if slot in self._turns:
                        self._turns.remove(slot)
                    self._cv.notify_all()
            self._flush()

    def _flush(self) -> None:
        """Pass the buffered usage records on (called holding the harness, or after every thread ended)."""
        while self._usages and self._sink is not None:
            self._sink(self._usages.popleft())

    def evaluate(self, fn: Callable[[], T]) -> T:
        """`fn()` (an evaluation) on one of the workers, the harness let go meanwhile; direct outside `run`."""
        if not self.inside():
            return fn()
        with self._away(evaluating=True), self._slots:
            return fn()

    def generate(self, request: Request) -> list[Completion]:
        """The completions of one request: joined to the pending batch from inside `run`, which is
        decoded once every experiment not evaluating waits on the model; direct outside `run`."""
        if not self.inside():
            return generate_each(self.backend, [request])[0]
        slot = _Slot(request)
        with self._away(evaluating=False, slot=slot):
            with self._cv:
                self._pending.append(slot)
                self._cv.notify_all()
            self._wait(slot)
        if slot.error is not None:
            raise slot.error
        return slot.result

    def _ready(self) -> bool:
        return not self._busy and bool(self._pending) and len(self._pending) + self._evaluating >= self._live

    def _wait(self, slot: _Slot) -> None:
        while True:
            with self._cv:
                while not slot.done and not self._ready():
                    self._cv.wait()
                if slot.done:
                    return
                batch, self._pending = self._pending, []
                self._busy = True
            try:
                results: list[list[Completion]] | BaseException = generate_each(
                    self.backend, [s.request for s in batch]
                )
            except BaseException as e:  # each waiting experiment gets the error of its call
                results = e
            with self._cv:
                self._turns = deque(batch)  # the threads take the harness back in the batch's order
                for i, s in enumerate(batch):
                    s.done = True
                    if isinstance(results, BaseException):
                        s.error = results
                    else:
                        s.result = results[i]
                self.batches.append(len(batch))
                self._busy = False
                self._cv.notify_all()
