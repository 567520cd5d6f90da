"""A bench's searches as Ray tasks (`arts bench --ray`): the worker runs the bench's own worker process on
the run folder, so a bench spreads over a cluster and a restarted driver resumes from the folder
(`search.remote` says what the cluster must share)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from arts.search.bench.worker import PARENT_VAR
from arts.search.overlap import CORES_VAR

NODE_LINE = "bench job on Ray node"
"""How the job's log (`bench.log` in its run folder) begins each attempt: where on the cluster it ran."""


def _bench_job(run_dir: str, log_file: str, threads: int) -> int:
    """One bench search on a Ray worker: the bench's worker process on the run folder; its exit code."""
    import ray

    env = dict(os.environ) | {PARENT_VAR: str(os.getpid())}  # the worker dies with this task
    env.setdefault("OMP_NUM_THREADS", str(threads))
    env[CORES_VAR] = str(threads)
    node = ray.get_runtime_context().get_node_id()
    with open(log_file, "a") as log:
        print(f"{NODE_LINE} {node} (host {socket.gethostname()}, pid {os.getpid()})", file=log, flush=True)
        return subprocess.run(
            [sys.executable, "-m", "arts.search.bench.worker", run_dir],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, check=False,
        ).returncode  # fmt: skip


class RayJob:
    """A bench search running as a Ray task, polled like a process (`poll`, `kill`)."""

    def __init__(self, ray: Any, run_dir: Path, log_file: Path, threads: int, gpus: float):
        self._ray = ray
        remote = ray.remote(num_cpus=threads, num_gpus=gpus, max_retries=0)(_bench_job)
        self._ref = remote.remote(str(run_dir), str(log_file), threads)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            ready, _ = self._ray.wait([self._ref], timeout=0)
            if ready:
                try:
                    self.returncode = self._ray.get(self._ref)
                except Exception:  # noqa: BLE001 (the worker or its node died: the run failed here)
                    self.returncode = 1
        return self.returncode

    def kill(self) -> None:
        self._ray.cancel(self._ref, force=True)

    terminate = kill

    def wait(self, timeout: float | None = None) -> int | None:
        self._ray.wait([self._ref], timeout=timeout)
        return self.poll()
