"""What a bench runs: its config, one job per (task, method, seed), and where each job's run lives.

Every job of a bench gets the same evaluation budget, the same model and the same `--set` overrides; only
the task, the method and the seed differ. A method name is a `SearchConfig.method`, or an alias of one
plus overrides (`METHOD_ALIASES`): `arts-ttt`, arts with test-time training on, so that one bench compares
search with and without learning, and the ablations `arts-no-critic`, `arts-k1`, `arts-reflection`, ...
Each job's config is resolved here, in the bench process, before anything runs: a typo fails the bench
at once instead of failing every worker. Every job loads the same weights: where `dtype = "auto"` would
load a trained method's model in float32 and the others' in bf16 (a CPU with native bf16), every job is
pinned to float32, so that a difference between methods is not one of dtype.

A run folder is in one of three states (`folder_state`): finished (its final `summary.json` written: kept
as it is), resumable (a store and its config: continued with `resume_run`), or fresh (nothing usable:
started anew). A run also rewrites `summary.json` after every round, marked `"running": true`; only the
summary its end writes, with the reason it stopped, makes it finished.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

METHOD_ALIASES: dict[str, tuple[str, dict[str, Any]]] = {
    "arts-ttt": ("arts", {"ttt.enabled": True}),
    "arts-no-observations": ("arts", {"components.observations": False}),
    "arts-no-comparison": ("arts", {"components.comparison": False}),
    "arts-no-attribution": ("arts", {"components.attribution": False}),
    "arts-no-critic": ("arts", {"attribution.critic": False}),
    "arts-k1": ("arts", {"attribution.k": 1}),
    "arts-reflection": ("arts", {"attribution.mode": "reflection"}),
}
"""Bench method names that are a search method plus overrides: test-time training, and the ablations of
the investigation (each one part off, `--without PART` or its `--set`), so that one bench compares them."""
WARM = "-warm"
"""A method name with this suffix (`arts-warm`, `arts-ttt-warm`) is the method started from the bench's
`--adapter` (`scientist.adapter`): a warm start against the same method from the base weights."""


def method_overrides(method: str, adapter: Path | None) -> tuple[str, dict[str, Any]]:
    """The search method a bench method name runs, and its overrides (`METHOD_ALIASES`, `WARM`)."""
    name = method.removesuffix(WARM)
    base, extra = METHOD_ALIASES.get(name, (name, {}))
    if name == method:
        return base, extra
    if adapter is None:
        raise ValueError(f"{method} starts from an adapter: give --adapter PATH (`arts train` writes one)")
    if not (Path(adapter) / "adapter_config.json").is_file():
        raise ValueError(f"--adapter {adapter}: no adapter_config.json there; give a folder `arts train` wrote")
    return base, {**extra, "scientist.adapter": str(Path(adapter).resolve())}


def probe_tasks() -> list[str]:
    """The learning probes: the built-in tasks that declare a paying class of moves (`[probe]`)."""
    from arts.tasks.base import builtin_names, resolve_task

    return [name for name in builtin_names() if resolve_task(name).config.probe is not None]


def diagnosis_tasks() -> list[str]:
    """The investigations: the built-in tasks whose result is an answer graded against a hidden truth."""
    from arts.tasks.base import builtin_names, resolve_task

    return [name for name in builtin_names() if resolve_task(name).config.kind == "answer"]


SUITES: dict[str, Callable[[], list[str]]] = {"probes": probe_tasks, "diagnosis": diagnosis_tasks}
"""Names that `--tasks` expands to several tasks (a directory of the same name is the directory)."""

JOB_FILE = "bench-job.json"
"""The job a run folder belongs to (task, method, seed, overrides), written before its worker starts."""
SESSIONS_FILE = "bench-sessions.jsonl"
"""One line per worker process that ran the job: its start time, so time spent killed is not counted."""
LOG_FILE = "bench.log"
"""The worker's output (its progress lines and any traceback)."""


class BenchConfig(BaseModel):
    """An `arts bench` invocation."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    tasks: list[str] = Field(min_length=1)
    """Built-in task names or task directories, or a suite of `SUITES` (`probes`, `diagnosis`), which expands to its tasks."""
    methods: list[str] = Field(default=["arts", "arts-ttt", "greedy", "mutate"], min_length=1)
    """Search methods (`SearchConfig.method` values), plus the aliases of `METHOD_ALIASES`, each with the
    `-warm` suffix too (`WARM`)."""
    seeds: list[int] = Field(default=[0, 1, 2, 3, 4], min_length=1)
    """The seeds each (task, method) runs with."""
    evals: int = Field(30, ge=1)
    """Evaluation budget of every run (`budget.evals`): methods are compared at equal budgets."""
    out: Path
    """The bench folder: runs/, the tables, the summary and the figures."""
    jobs: int = Field(1, ge=1)
    """Runs at a time, each in its own worker process."""
    model: str | None = None
    """Scientist and executor model of every run (default: the embedded model)."""
    overrides: dict[str, Any] = {}
    """Config fields set for every run (`--set path=value`), applied before the bench's own fields."""
    bootstrap_resamples: int = Field(2000, ge=100)
    """Resamples of each bootstrap confidence interval."""
    adapter: Path | None = None
    """The adapter the `-warm` methods start from (`arts train` output, or a run's `adapters/<k>/`)."""
    ray: bool = False
    """Run each search as a Ray task (`search.remote`), `jobs` at a time, instead of a local process."""
    ray_address: str | None = None
    """The Ray cluster to join (`auto`, `ray://HOST:10001`); None starts a local one."""
    ray_cpus: int = Field(1, ge=1)
    """CPUs each search declares to Ray (its torch threads)."""
    ray_gpus: float = Field(0.0, ge=0.0)
    """GPUs (or a share of one) each search declares to Ray."""

    @field_validator("tasks", mode="before")
    @classmethod
    def _suites(cls, v: Any) -> Any:
        if not isinstance(v, list):
            return v
        # a suite's name names the suite unless it is a task folder here (a folder of runs named `probes`
        # made `--tasks probes` fail with "task.toml missing")
        return [
            t
            for x in v
            for t in (SUITES[x]() if x in SUITES and not (Path(x) / "task.toml").is_file() else [x])
        ]

    @field_validator("methods", "tasks")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError(f"listed twice: {sorted({x for x in v if v.count(x) > 1})}; give each once")
        return v

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v):
            raise ValueError(f"seeds listed twice in {v}; give each once")
        return v


@dataclass
class Job:
    """One run of the bench."""

    task: str
    method: str
    seed: int
    overrides: dict[str, Any] = field(default_factory=dict)
    """Every config field the run's config sets (the bench's, then the job's own)."""
    run_dir: Path = Path()

    @property
    def key(self) -> tuple[str, str, int]:
        return self.task, self.method, self.seed


def parse_seeds(values: list[str]) -> list[int]:
    """`--seeds 5` is a count (seeds 0-4); several values, or any with a comma (`--seeds 7,`), are the seeds."""
    items = [x for v in values for x in v.split(",") if x.strip()]
    try:
        seeds = [int(x) for x in items]
    except ValueError:
        raise ValueError(
            f"--seeds {' '.join(values)}: give a count (5) or the seeds (0 3 7, or 7,)"
        ) from None
    if len(values) == 1 and "," not in values[0]:
        if seeds[0] < 1:
            raise ValueError(f"--seeds {seeds[0]}: a count of seeds must be at least 1")
        return list(range(seeds[0]))
    return seeds


def job_name(task: str, method: str, seed: int) -> str:
    """The run folder's name: the task's own name (a task directory's last part), method and seed."""
    return f"{Path(task).name}--{method}--s{seed}"


def plan(cfg: BenchConfig) -> list[Job]:
    """Every (task, method, seed) job, each config checked; the order spreads tasks and methods over the
    bench so that an early stop leaves every combination with some seeds."""
    from arts.search.config import load_config
    from arts.search.run import method_of
    from arts.tasks.base import resolve_task

    for task in cfg.tasks:
        resolve_task(task)  # an unknown task or a broken task.toml fails here, naming the fix
    jobs, configs = [], []
    for seed in cfg.seeds:
        for task in cfg.tasks:
            for method in cfg.methods:
                base, extra = method_overrides(method, cfg.adapter)
                where = str(Path(task).resolve()) if Path(task).is_dir() else task  # workers may cd elsewhere
                ov = {**cfg.overrides, "task": where, "method": base, "seed": seed, "budget.evals": cfg.evals}
                ov.update(extra)
                if cfg.model is not None:
                    ov |= {"scientist_model.model": cfg.model, "executor_model.model": cfg.model}
                try:
                    config = load_config(None, ov)
                    method_of(config)
                except ValueError as e:
                    raise ValueError(f"bench job {task} / {method} / seed {seed}: {e}") from None
                configs.append(config)
                run_dir = cfg.out / "runs" / job_name(task, method, seed)
                jobs.append(Job(task, method, seed, ov, run_dir))
    if not cfg.ray_gpus:  # on a GPU every method loads in bf16 anyway; the driver's CPU says nothing there
        _same_weights(jobs, [c for c in configs if c.ttt.enabled])
    names = [j.run_dir.name for j in jobs]
    if len(set(names)) != len(names):
        raise ValueError("two tasks share a folder name; give each task directory a distinct name")
    return jobs


def _same_weights(jobs: list[Job], trained: list[Any]) -> None:
    """Pin every job's `auto` dtype to a trained job's where the two would differ (module docstring)."""
    from arts.search.run import resolve_dtype

    if not trained or len(trained) == len(jobs):
        return
    for role in ("scientist_model", "executor_model"):
        mc = getattr(trained[0], role)
        pinned, free = resolve_dtype(mc, trains=True).dtype, resolve_dtype(mc).dtype
        if pinned != free:
            for job in jobs:
                job.overrides[f"{role}.dtype"] = pinned


FolderState = Literal["finished", "resumable", "fresh"]


def final_summary(run_dir: Path) -> dict[str, Any] | None:
    """The summary the run's end wrote; None while it runs, or was killed, or never started."""
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError):
        return None
    done = isinstance(summary, dict) and not summary.get("running") and summary.get("stopped_because")
    return summary if done else None


def folder_state(run_dir: Path) -> FolderState:
    if final_summary(run_dir) is not None:
        return "finished"
    if (run_dir / "arts.db").exists() and (run_dir / "config.toml").exists():
        return "resumable"
    return "fresh"


def prepare(job: Job) -> FolderState:
    """Make the job's folder ready for its worker: a fresh one is emptied (a start that died before its
    store existed leaves nothing worth keeping) and given the job file."""
    state = folder_state(job.run_dir)
    if state == "fresh" and job.run_dir.exists():
        shutil.rmtree(job.run_dir)
    job.run_dir.mkdir(parents=True, exist_ok=True)
    if state != "finished":
        payload = {"task": job.task, "method": job.method, "seed": job.seed, "overrides": job.overrides}
        (job.run_dir / JOB_FILE).write_text(json.dumps(payload, indent=2))
    return state
