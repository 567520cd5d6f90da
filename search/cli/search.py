"""The `search` and `config show` commands: flags into a config, the run started or resumed, its result.

The flags themselves (short ones, one per config field, `--set`) are declared in `search.cli.flags`;
this module turns parsed flags into config overrides and hands the config to `search.run`. Library
modules are imported inside the functions, so that importing this one stays cheap (`search.cli.main`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arts.search.cli.flags import EXECUTOR_FOLLOWS, FIELD_DEST, SHORT_DEST

if TYPE_CHECKING:
    from arts.search.config import SearchConfig


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.6g}"


def set_items(items: list[str] | None) -> dict[str, Any]:
    """`--set PATH=VALUE` items as overrides; a value in TOML syntax where it parses, else the plain string."""
    from arts.search.config import parse_value
    from arts.tasks.base import TaskError

    o: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise TaskError(
                f"--set {item!r}: write it as field.path=value, e.g. --set scientist.candidates=3"
            )
        o[key] = parse_value(value)
    return o


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Config overrides from the `search` flags: the task, short flags, then field flags, then `--set`
    (last wins)."""
    given = vars(args)
    short = {
        d.removeprefix(SHORT_DEST): v for d, v in given.items() if d.startswith(SHORT_DEST) and v is not None
    }
    o: dict[str, Any] = {"task": args.task} if args.task is not None else {}
    o |= short
    for scientist, executor in EXECUTOR_FOLLOWS.items():
        if scientist in short and executor not in short:
            o[executor] = short[scientist]
    for part in args.without or []:
        o[f"components.{part}"] = False
    for dest, value in given.items():
        if dest.startswith(FIELD_DEST) and value is not None:
            o[dest.removeprefix(FIELD_DEST)] = value
    return o | set_items(args.set)


def load(config: str | None, overrides: dict[str, Any]) -> SearchConfig:
    from arts.search.config import load_config

    return load_config(Path(config) if config else None, overrides)


def _names_task(config: str | None) -> bool:
    """Whether a `--config` file names the task (so that no task argument is needed)."""
    if not config:
        return False
    from arts.search.config import tomllib
    from arts.tasks.base import TaskError

    try:
        return "task" in tomllib.loads(Path(config).read_text())
    except OSError as e:
        raise TaskError(f"--config {config}: cannot read it ({e.strerror})") from None


def _default_run_dir(cfg: SearchConfig) -> Path | None:
    """The run's folder (as `start_run` names it), or None where the task does not resolve: then
    `start_run` says why, before any folder exists."""
    from arts.tasks.base import TaskError, resolve_task

    try:
        name = resolve_task(cfg.task).name
    except TaskError:
        return None
    return Path("runs") / f"{name}-{cfg.method}-{time.strftime('%Y%m%d-%H%M%S')}"


def cmd_search(args: argparse.Namespace) -> int:
    from arts.search.console import Console, quiet_libraries
    from arts.search.report.trackers import Reporting

    quiet_libraries(args.verbose > 0)
    from arts.search.run import resume_run, start_run

    console = Console(-1 if args.quiet else args.verbose)
    unstarted: Path | None = None  # a run folder this command made for a run that failed before any node
    try:
        if args.resume:
            if conflicts := _resume_conflicts(args):
                print(
                    f"error: --resume {args.resume} continues the run with the settings in its config.toml; "
                    f"{conflicts} given here would be ignored: drop them, or start a new run with another "
                    "--run-dir",
                    file=sys.stderr,
                )
                return 2
            console.attach(Path(args.resume))
            if args.report_to:
                from arts.search.config import read_stored_config

                cfg = read_stored_config(Path(args.resume) / "config.toml")
                console.tracking = Reporting(args.report_to, Path(args.resume), cfg.model_dump(mode="json"))
            summary = resume_run(Path(args.resume), log=console)
        else:
            given = overrides(args)
            if "task" not in given and not _names_task(args.config):
                print("error: give a task (built-in name or directory) or --resume DIR", file=sys.stderr)
                return 2
            cfg = load(args.config, given)
            run_dir = Path(args.run_dir) if args.run_dir else _default_run_dir(cfg)
            if run_dir and not (run_dir / "arts.db").exists():  # else start_run refuses: keep its log clean
                console.attach(run_dir)
                if args.report_to:
                    console.tracking = Reporting(args.report_to, run_dir, cfg.model_dump(mode="json"))
            fresh = run_dir is not None and not run_dir.exists()
            try:
                summary = start_run(cfg, run_dir, log=console)
            except Exception:
                unstarted = run_dir if fresh else None
                raise
        if console.tracking is not None:
            console.tracking.finish()
        return _result(summary, console)
    finally:
        console.close()
        if unstarted is not None:
            _discard_unstarted(unstarted)


def _resume_conflicts(args: argparse.Namespace) -> str:
    """What a `--resume` command also asks for that the resumed run would not do ("" when nothing)."""
    given = [f"the task {args.task!r}"] if args.task is not None else []
    given += [path for path in overrides(args) if path != "task"]
    given += [f"--{flag.replace('_', '-')}" for flag in ("config", "run_dir") if getattr(args, flag)]
    return ", ".join(given)


def _discard_unstarted(run_dir: Path) -> None:
    """Remove the folder of a run that failed before it evaluated anything (a bad backend, a missing model),
    so that it blocks no rerun with the same --run-dir; a run with a node stays, to be resumed."""
    import shutil

    from arts.search.state import Node
    from arts.search.store import Store

    if any((run_dir / "nodes").glob("*")):
        return
    try:
        with Store.open_readonly(run_dir) as store:
            if store.count(Node):
                return
    except Exception:  # no store, or one never committed: nothing in it to lose
        pass
    shutil.rmtree(run_dir, ignore_errors=True)


def _result(summary: dict, console: Any) -> int:
    """Print a finished run's one-line result; 1 where every node was invalid."""
    best = summary["best"]
    console.result(
        f"best {_fmt(best['score'])} (node {best['node']}, test {_fmt(best['test_score'])}) vs seed "
        f"{_fmt(summary['baseline'])}; {summary['valid_nodes']}/{summary['nodes']} valid nodes; "
        f"stopped: {summary['stopped_because']}"
    )
    if summary.get("all_invalid"):
        print(
            f"error: every one of the {summary['nodes']} nodes was invalid; read their reasons in the "
            "run's report.html, and try the seed program with `arts eval TASK`",
            file=sys.stderr,
        )
        return 1
    return 0
