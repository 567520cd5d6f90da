"""Starting and resuming a run: the run directory, the resolved config, the backends, then the loop.

The scientist and the executor are configured separately; when both name the same backend and model,
one loaded model serves both (no second copy in memory).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from arts.policy.base import Backend, Usage
from arts.search.config import ModelConfig, SearchConfig, to_toml
from arts.search.loop import Search
from arts.search.store import Store
from arts.tasks.base import resolve_task

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def make_backend(mc: ModelConfig, sink, seed: int) -> Backend:
    from arts.policy.backends.registry import backend_class

    cls = backend_class(mc.backend)
    if mc.backend == "openai":
        if not mc.base_url:
            raise ValueError("the openai backend needs a server: pass --base-url http://HOST:PORT/v1")
        return cls(base_url=mc.base_url, model=mc.model or "default", usage_sink=sink)
    return cls(model=mc.model, usage_sink=sink, seed=seed)


def build_search(cfg: SearchConfig, store: Store, log=print) -> Search:
    task = resolve_task(cfg.task)
    holder: dict[str, Search] = {}

    def sink(u: Usage) -> None:
        if "s" in holder:
            holder["s"].on_usage(u)

    scientist = executor = None
    if cfg.method != "mutate":
        scientist = make_backend(cfg.scientist_model, sink, cfg.seed)
        executor = (
            scientist
            if cfg.executor_model == cfg.scientist_model
            else make_backend(cfg.executor_model, sink, cfg.seed)
        )
    search = Search(cfg, task, store, scientist, executor, log=log)
    holder["s"] = search
    if cfg.ttt:
        from arts.training.ttt import TestTimeTraining

        if cfg.scientist_model.backend == "transformers":
            trainer, serving = scientist, None
        else:  # a served scientist: train a local copy of its weights, serve each checkpoint
            local = ModelConfig(model=cfg.trainer_model or cfg.scientist_model.model)
            trainer, serving = make_backend(local, lambda u: None, cfg.seed), scientist
        search.ttt = TestTimeTraining(trainer, cfg.grpo, cfg.reward, store.run_dir, serving=serving)
        search.ttt.resume(search)
    return search


def start_run(cfg: SearchConfig, run_dir: Path | None = None, log=print) -> dict:
    task = resolve_task(cfg.task)  # fail on a bad task before creating anything
    cfg = cfg.model_copy(update={"task": str(task.root) if task.root.parent.name != "builtin" else task.name})
    run_dir = run_dir or Path("runs") / f"{task.name}-{cfg.method}-{time.strftime('%Y%m%d-%H%M%S')}"
    if (run_dir / "arts.db").exists():
        raise ValueError(
            f"{run_dir} already holds a run; continue it with --resume {run_dir} or choose another --run-dir"
        )
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.toml").write_text(to_toml(cfg))
    log(f"run: {run_dir}  task {task.name}  method {cfg.method}")
    with Store.open(run_dir) as store:
        return build_search(cfg, store, log).run()


def resume_run(run_dir: Path, log=print) -> dict:
    path = run_dir / "config.toml"
    if not (run_dir / "arts.db").exists() or not path.exists():
        raise ValueError(
            f"{run_dir} holds no run (no arts.db/config.toml); start one with `arts search TASK --run-dir {run_dir}`"
        )
    cfg = SearchConfig.model_validate(tomllib.loads(path.read_text()))
    log(f"resume: {run_dir}")
    with Store.open(run_dir, create=False) as store:
        return build_search(cfg, store, log).run()
