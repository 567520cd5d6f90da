"""Running a bench: every job in a worker process, `jobs` at a time, then the report.

A bench is resumable by construction: all its state is in its folder. Running the same command again
keeps finished runs (their final `summary.json` exists, or, without their folder, a finished row in the
folder's tables: `tables`), continues runs that have a store, and starts the rest; so a bench killed at any
moment loses at most the experiments in flight. The tables and the report are rewritten after every run. Two benches on one folder would
run the same jobs twice, so the bench holds an exclusive lock on `DIR/bench.lock`; and the settings that
make runs comparable (budget, model, overrides) are kept in `DIR/bench.json` and must match on resume.

With `ray` (`arts bench --ray`) each job runs as a Ray task instead (`search.bench.ray_jobs.RayJob`): Ray places
it on a node with the CPUs (and GPU share) it declares, so a bench spreads over a cluster; the folder
must be one the nodes share. Not done here: retrying a failed run within one invocation (the next
invocation retries it, since it has no summary).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from arts.search.bench.plan import LOG_FILE, BenchConfig, Job, final_summary, folder_state, plan, prepare
from arts.search.bench.ray_jobs import RayJob
from arts.search.bench.results import RunResult, read_run
from arts.search.bench.tables import RUNS, kept_results
from arts.search.bench.worker import PARENT_VAR
from arts.search.overlap import CORES_VAR
from arts.search.remote import connect

COMPARABLE = ("evals", "model", "overrides")
"""Settings every run of one bench folder must share."""


@dataclass
class Running:
    job: Job
    proc: subprocess.Popen | RayJob
    started: float


def _lock(out: Path) -> int:
    fd = os.open(out / "bench.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ValueError(
            f"another `arts bench` is running on {out}; wait for it or use another --out"
        ) from None
    return fd


def _check_same_settings(cfg: BenchConfig) -> None:
    path = cfg.out / "bench.json"
    now = json.loads(cfg.model_dump_json())
    runs = cfg.out / "runs"
    if path.exists() and runs.is_dir() and any(runs.iterdir()):
        before = json.loads(path.read_text())
        changed = [k for k in COMPARABLE if before.get(k) != now.get(k)]
        if changed:
            was = ", ".join(f"{k}={before.get(k)!r}" for k in changed)
            raise ValueError(
                f"{cfg.out} holds a bench run with {was}; its runs would not be comparable with these. "
                "Use the same settings to continue it, or another --out"
            )
    path.write_text(json.dumps(now, indent=2))


def _tail(path: Path, lines: int = 12) -> str:
    if not path.exists():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _launch(job: Job, threads: int) -> subprocess.Popen:
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(threads))  # J workers share the cores instead of each taking all
    env[CORES_VAR] = str(threads)  # and so do their evaluations (`search.overlap.default_workers`)
    env[PARENT_VAR] = str(os.getpid())
    with (job.run_dir / LOG_FILE).open("a") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "arts.search.bench.worker", str(job.run_dir)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )


def _done_line(job: Job, rc: int, seconds: float) -> str:
    head = f"{Path(job.task).name} / {job.method} / seed {job.seed}"
    s = final_summary(job.run_dir)
    if rc != 0 or s is None:
        return f"{head}: FAILED (exit {rc}); see {job.run_dir / LOG_FILE}"
    best = s["best"]["score"]
    best = f"{best:.6g}" if isinstance(best, (int, float)) else "-"
    return f"{head}: best {best}  {s['evals']} evals  {seconds:.0f}s"


def run_jobs(
    jobs: list[Job],
    parallel: int,
    log: Callable[[str], None],
    on_done: Callable[[], None] = lambda: None,
    launch: Callable[[Job, int], subprocess.Popen | RayJob] | None = None,
) -> dict[tuple, str]:
    """Run the jobs, `parallel` at a time, calling `on_done` after each; returns the failures: job key ->
    the tail of its log. `launch(job, threads)` starts one (default: a worker process here)."""
    threads = max(1, (os.cpu_count() or 1) // parallel)
    launch = launch or _launch
    queue, running, failed = list(jobs), [], {}
    done = 0
    try:
        while queue or running:
            while queue and len(running) < parallel:
                job = queue.pop(0)
                running.append(Running(job, launch(job, threads), time.time()))
            time.sleep(0.2)
            for r in [r for r in running if r.proc.poll() is not None]:
                running.remove(r)
                done += 1
                rc = r.proc.returncode
                if rc != 0 or final_summary(r.job.run_dir) is None:
                    failed[r.job.key] = _tail(r.job.run_dir / LOG_FILE)
                log(f"[{done}/{len(jobs)}] {_done_line(r.job, rc, time.time() - r.started)}")
                on_done()
    finally:  # interrupted: stop the workers (their runs resume next time)
        for r in running:
            r.proc.terminate()
        for r in running:
            try:
                r.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                r.proc.kill()
    return failed


def ray_launcher(cfg: BenchConfig) -> Callable[[Job, int], RayJob]:
    """Jobs as Ray tasks on the cluster at `cfg.ray_address` (a local one when None), each declaring
    `ray_cpus` CPUs and `ray_gpus` GPUs."""
    ray = connect(cfg.ray_address)

    def launch(job: Job, threads: int) -> RayJob:
        return RayJob(ray, job.run_dir, job.run_dir / LOG_FILE, cfg.ray_cpus, cfg.ray_gpus)

    return launch


def results_of(
    jobs: list[Job], table: dict[tuple, RunResult], tasks: dict, failed: dict[tuple, str] | None
) -> list[RunResult]:
    """Every run's results; while the bench runs (failed is None), only the finished ones."""
    out = []
    for j in jobs:
        if j.key in table:
            out.append(table[j.key])
        elif failed is not None or final_summary(j.run_dir) is not None:
            out.append(read_run(j, tasks[j.task].name, (failed or {}).get(j.key, "")))
    return out


def run_bench(cfg: BenchConfig, log: Callable[[str], None] = print, run: bool = True) -> list[RunResult]:
    """Run (or continue) the bench in `cfg.out` and write its report; returns every run's results. With
    `run` false nothing runs: the report of the runs finished so far (`arts bench --report`)."""
    from arts.search.bench.report import write_report
    from arts.tasks.base import resolve_task

    cfg.out.mkdir(parents=True, exist_ok=True)
    fd = _lock(cfg.out)
    try:
        jobs = plan(cfg)  # first: a bench with a bad setting leaves no trace
        _check_same_settings(cfg)
        tasks = {t: resolve_task(t) for t in cfg.tasks}
        kept = kept_results(cfg.out)  # finished runs whose folders this machine does not have
        table = {
            j.key: kept[key]
            for j in jobs
            if (key := (tasks[j.task].name, j.method, j.seed)) in kept and folder_state(j.run_dir) == "fresh"
        }
        if not run:
            done = results_of(jobs, table, tasks, None)
            write_report(cfg, tasks, done, log, pending=len(jobs) - len(done))
            return done
        todo = [j for j in jobs if j.key not in table and prepare(j) != "finished"]
        log(
            f"bench: {len(jobs)} runs ({len(cfg.tasks)} tasks x {len(cfg.methods)} methods x "
            f"{len(cfg.seeds)} seeds), {len(jobs) - len(todo)} already finished"
            f"{f' ({len(table)} kept from {RUNS})' if table else ''}; {cfg.evals} evals each"
        )
        pinned = jobs[0].overrides.get("scientist_model.dtype") if jobs else None
        if pinned and not any(k.endswith(".dtype") for k in cfg.overrides):  # the plan's pin, not --set's
            log(f"weights: every method in {pinned}, the dtype of the methods that train")

        def interim() -> None:  # the tables and the report stay current: a killed bench loses no result
            done = results_of(jobs, table, tasks, None)
            write_report(cfg, tasks, done, lambda line: None, pending=len(jobs) - len(done))

        failed = run_jobs(todo, cfg.jobs, log, on_done=interim, launch=ray_launcher(cfg) if cfg.ray else None)
        final = results_of(jobs, table, tasks, failed)
        write_report(cfg, tasks, final, log)
        return final
    finally:
        os.close(fd)
