"""Evaluations and bench runs on Ray, for when one machine is not enough (`pip install 'arts[ray]'`).

`RayEvaluations` runs each evaluation as a Ray task (one CPU each) with the same sandbox
(`tasks.evaluate.run_evaluation`) on whichever node Ray schedules it: `--evaluate-on ray [--ray-address
ADDR]`; with `--workers W` a round's experiments wait on their Ray tasks together (`search.overlap`).
A task whose worker dies (a node lost, a process killed) comes back as an interrupted result: the run
records it, does not charge the evaluation, and may evaluate that program again. `arts bench --ray`
runs each search of a bench as a Ray task (`search.bench.ray_jobs`).

Both assume what a cluster of this kind shares: the task directory and the run (or bench) folder at the
same path on every node (a shared filesystem), and arts installed on every node.
Not done: shipping task files or run folders to nodes without a shared filesystem.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from arts.search.state import INTERRUPTED
from arts.tasks.base import EvalResult, Task, resolve_task
from arts.tasks.evaluate import run_evaluation


def ray_module() -> Any:
    """`ray`, or an error that says how to install it."""
    try:
        import ray
    except ImportError as e:
        raise RuntimeError(f"Ray is not installed: pip install 'arts[ray]' ({e})") from None
    return ray


def connect(address: str | None) -> Any:
    """Ray, connected to `address` (a running cluster, `auto`) or to a local instance on this machine's
    cores when None; an existing connection is kept."""
    ray = ray_module()
    if not ray.is_initialized():
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        except Exception as e:  # noqa: BLE001 (Ray raises many kinds; the user needs the one message)
            where = address or "a local instance"
            raise RuntimeError(f"cannot start or reach Ray at {where}: {e}") from None
    return ray


def _evaluate(task_root: str, files: dict[str, str], workdir: str) -> EvalResult:
    """One evaluation on a Ray worker: the task loaded from its folder, the sandbox as everywhere."""
    return run_evaluation(resolve_task(task_root), files, Path(workdir))


class RayEvaluations:
    """Evaluations as Ray tasks (see the module docstring); `fn` is what a task runs (a test swaps it)."""

    def __init__(self, address: str | None = None, fn: Callable[..., EvalResult] = _evaluate):
        ray = connect(address)
        self._ray = ray
        self._remote = ray.remote(num_cpus=1, max_retries=0)(fn)

    def __call__(self, task: Task, files: dict[str, str], workdir: Path) -> EvalResult:
        ray = self._ray
        ref = self._remote.remote(str(task.root), files, str(workdir))
        try:
            return ray.get(ref)
        except (
            ray.exceptions.WorkerCrashedError,
            ray.exceptions.NodeDiedError,
            ray.exceptions.TaskCancelledError,
        ) as e:
            why = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
            return EvalResult(valid=False, reason=f"{INTERRUPTED}: the evaluation's Ray worker died ({why})")


def interrupted(result: EvalResult) -> bool:
    """Whether an evaluation was cut off from outside the program (not charged, not a result)."""
    return not result.valid and result.reason.startswith(INTERRUPTED)
