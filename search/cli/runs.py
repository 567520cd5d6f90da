"""The `arts` sub-commands on runs: `report`, `runs`, `status`, `export`, `rollouts export`, `train`, and
`serve` (a model, normally with a run's adapter).

Beside `search.cli.main` (the parser) and `search.cli.search` (the search). Every one reads a run through
`Store.open_readonly`: a search running in that folder keeps its lock and is never blocked by them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from arts.search.config import SearchConfig


def cmd_report(args: argparse.Namespace) -> int:
    from arts.search.cli.follow import is_locked
    from arts.search.report.html import run_status, write_report
    from arts.search.store import Store

    run_dir = Path(args.run_dir)
    with Store.open_readonly(run_dir) as store:
        state = store.load_state()
    status = "running" if is_locked(run_dir) else run_status(state)
    status = "killed" if status == "in progress" else status  # no process holds it: it ended unfinished
    print(write_report(run_dir, state, Path(args.out) if args.out else None, status))
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    from arts.search.cli.follow import list_runs, runs_table

    root = Path(args.dir)
    views = list_runs(root)
    if not views:
        print(f"no runs in {root}/ (a run is a folder holding arts.db)", file=sys.stderr)
        return 1
    print(runs_table(views))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from arts.search.cli.follow import read_run, status_text

    print(status_text(read_run(Path(args.run_dir), recent=args.nodes)))
    return 0


def _load_run(run_dir: str) -> tuple[Any, SearchConfig | None, str | None]:
    """(stored state, resolved config, scientist model spec) of a run, for the training commands."""
    from arts.search.config import read_stored_config
    from arts.search.store import Store

    path = Path(run_dir)
    cfg = read_stored_config(path / "config.toml") if (path / "config.toml").is_file() else None
    with Store.open_readonly(path) as store:  # a running search keeps writing; reading needs no lock
        return store.load_state(), cfg, (cfg.scientist_model.model if cfg else None)


def cmd_export(args: argparse.Namespace) -> int:
    from arts.search.exports import run_info
    from arts.training.export import export

    state, cfg, _ = _load_run(args.run_dir)
    info = run_info(state, cfg, Path(args.run_dir)).model_copy(update={"base_model": args.base_model})
    print(export(Path(args.run_dir), Path(args.out), args.checkpoint, args.merge, info, args.force))
    return 0


def cmd_rollouts_export(args: argparse.Namespace) -> int:
    from arts.search.exports import rollout_rows
    from arts.training.offline import export_rollouts

    state, cfg, _ = _load_run(args.run_dir)
    records = rollout_rows(state, args.run_dir, cfg)
    computed = sum(r["reward_source"] == "computed" for r in records)
    note = f" ({computed} rewarded at export by the run's reward config)" if computed else ""
    print(f"{export_rollouts(records, Path(args.out), args.format)}: {len(records)} rewarded rollouts{note}")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from arts.search.exports import rollout_rows
    from arts.training.offline import OfflineConfig, train

    runs = [(d, *_load_run(d)) for d in args.runs]
    if args.method == "grpo":  # the runs' groups through the test-time update
        from arts.search.exports import train_grpo_from

        print(train_grpo_from(runs, Path(args.out), args.model, args.steps))
        return 0
    records = [row for d, state, cfg, _ in runs for row in rollout_rows(state, d, cfg)]
    print(train(records, Path(args.out), OfflineConfig(method=args.method, steps=args.steps), args.model))
    return 0


def cmd_credit(args: argparse.Namespace) -> int:
    import json

    from arts.search.config import ModelConfig
    from arts.search.learning import credit_check
    from arts.search.run import make_backend
    from arts.training.checkpoint import checkpoint_path, read_state

    state, cfg, model = _load_run(args.run_dir)
    if not any(r.adapter for r in state.rollouts.values()):
        raise ValueError(f"{args.run_dir} has no rollouts sampled under a TTT adapter; run it with --ttt")
    local = args.model or (cfg.ttt.trainer_model if cfg else None) or model
    backend = make_backend(ModelConfig(model=local), lambda u: None, 0)
    zero = checkpoint_path(Path(args.run_dir), 0)
    saved = read_state(zero) if zero.is_dir() else {}
    # the temperature the run's log-probs were taken at (runs from before it was recorded: 1)
    check = credit_check(
        state, backend, warm="warm_start" in saved, temperature=saved.get("temperature", 1.0)
    )
    (Path(args.run_dir) / "credit.json").write_text(json.dumps(check.model_dump(), indent=2))
    print(check.line())
    return 0


def serve_flags(parser: argparse.ArgumentParser) -> None:
    from arts.policy.backends.serve import add_arguments

    add_arguments(parser)


def cmd_serve(args: argparse.Namespace) -> int:
    from arts.search.console import quiet_libraries

    quiet_libraries(args.log_level == "debug")  # a server's log is its request lines, not loading bars
    from arts.policy.backends.serve import serve

    serve(args)
    return 0
