"""The `arts` command: one entry point, one sub-command per job.

Sub-commands parse their own flags and hand a config to library code; nothing here computes results.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from arts.policy.base import BackendError
from arts.search.config import load_config, parse_value
from arts.search.store import StoreError
from arts.tasks.base import TaskError, builtin_names, load_task, resolve_task


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.6g}"


def cmd_tasks_list(args: argparse.Namespace) -> int:
    rows = [("name", "kind", "metric", "direction", "baseline", "best known")]
    for name in builtin_names():
        c = resolve_task(name).config
        m = c.metric
        rows.append(
            (
                name,
                c.kind,
                m.name if m else "-",
                m.direction if m else "-",
                _fmt(m.baseline if m else None),
                _fmt(m.best_known if m else None),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())
    return 0


def cmd_tasks_show(args: argparse.Namespace) -> int:
    task = resolve_task(args.name)
    c = task.config
    print(f"# {c.name}  ({c.kind})\n")
    print(task.statement.strip(), "\n")
    print(f"editable: {', '.join(c.editable)}{'  (seedless: no seed program)' if task.seedless else ''}")
    print(f"material: {', '.join(str(p) for p in task.material_files()) or '-'}")
    print(f"hidden:   {', '.join(c.hidden) or '-'}")
    if c.metric:
        m = c.metric
        print(
            f"metric:   {m.name} ({m.direction}); baseline {_fmt(m.baseline)}; best known {_fmt(m.best_known)}"
        )
        for ref in m.references:
            print(f"  ref: {ref}")
    if c.evaluate:
        print(
            f"evaluate: {' '.join(c.evaluate.command)}  (timeout {c.evaluate.timeout_s:g}s, {c.evaluate.memory_mb} MiB)"
        )
    if c.test:
        print(f"test:     {' '.join(c.test.command)}")
    print(f"location: {task.root}")
    return 0


def cmd_tasks_check(args: argparse.Namespace) -> int:
    try:
        task = load_task(args.dir)
    except TaskError as e:
        print(e, file=sys.stderr)
        return 1
    if not task.seedless:
        seed = f"seed: {', '.join(task.seed_files())}"
    elif task.config.kind == "answer":
        seed = f"no seed answer (the investigator writes {', '.join(task.config.editable)})"
    else:
        seed = "seedless (first nodes are drafts)"
    print(f"{task.root / 'task.toml'}: ok — {task.name} ({task.config.kind}), {seed}")
    return 0


def _read_overlay(task_files: list[str], overlay: Path) -> dict[str, str]:
    files = {}
    for rel in task_files:
        p = overlay / rel
        if p.is_file():
            files[rel] = p.read_text()
    if not files:
        raise TaskError(f"--files {overlay}: holds none of the editable files {task_files}; put them there")
    return files


def cmd_eval(args: argparse.Namespace) -> int:
    from arts.tasks.evaluate import run_evaluation

    task = resolve_task(args.task)
    files = task.seed_files()
    if args.files:
        files.update(_read_overlay(task.config.editable, Path(args.files)))
    if not files:
        print(f"{task.name} is seedless: give the program with --files DIR", file=sys.stderr)
        return 2
    split = "test" if args.test else "evaluate"
    if split == "evaluate" and task.config.evaluate is None:
        print(
            f"{task.name} is an 'answer' task: it has no validation score; use --test to grade",
            file=sys.stderr,
        )
        return 2
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="arts-eval-") as tmp:
        res = run_evaluation(task, files, Path(tmp) / "work", split=split)
    out = {"task": task.name, "split": split, **res.model_dump(exclude={"stdout_tail", "stderr_tail"})}
    out["total_s"] = round(time.perf_counter() - t0, 3)
    if args.json:
        print(json.dumps(out))
    else:
        metric = task.config.metric.name if task.config.metric else "score"
        state = "valid" if res.valid else f"INVALID: {res.reason}"
        print(f"{task.name}: {metric} = {_fmt(res.score)}  [{state}]  ({res.wall_s:.2f}s)")
        if res.message:
            print(f"  {res.message}")
    return 0 if res.valid else 1


def _overrides(args: argparse.Namespace) -> dict:
    o: dict = {}
    for flag, path in (
        ("task", "task"),
        ("method", "method"),
        ("group", "group"),
        ("seed", "seed"),
        ("evals", "budget.evals"),
        ("rounds", "budget.rounds"),
        ("tokens", "budget.tokens"),
        ("wall", "budget.wall_s"),
        ("k", "scientist.candidates"),
        ("audits", "scientist.audits"),
        ("drafts", "drafts"),
        ("model", "scientist_model.model"),
        ("backend", "scientist_model.backend"),
        ("base_url", "scientist_model.base_url"),
        ("executor_model", "executor_model.model"),
        ("executor_backend", "executor_model.backend"),
        ("executor_base_url", "executor_model.base_url"),
        ("ttt", "ttt"),
        ("update_every", "grpo.update_every"),
        ("lora_rank", "grpo.lora_rank"),
        ("lr", "grpo.lr"),
    ):
        value = getattr(args, flag, None)
        if value is not None:
            o[path] = value
    if args.model is not None and args.executor_model is None:
        o.setdefault("executor_model.model", args.model)
    if args.backend is not None and args.executor_backend is None:
        o.setdefault("executor_model.backend", args.backend)
    for part in args.without or []:
        o[f"components.{part}"] = False
    for item in args.set or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise TaskError(
                f"--set {item!r}: write it as field.path=value, e.g. --set scientist.candidates=3"
            )
        o[key] = parse_value(value)
    return o


def cmd_search(args: argparse.Namespace) -> int:
    from arts.search.run import resume_run, start_run

    if args.resume:
        summary = resume_run(Path(args.resume))
    else:
        if args.task is None:
            print("error: give a task (built-in name or directory) or --resume DIR", file=sys.stderr)
            return 2
        cfg = load_config(Path(args.config) if args.config else None, _overrides(args))
        summary = start_run(cfg, Path(args.run_dir) if args.run_dir else None)
    best = summary["best"]
    print(
        f"best {_fmt(best['score'])} (node {best['node']}, test {_fmt(best['test_score'])}) vs seed {_fmt(summary['baseline'])}"
        f"; {summary['valid_nodes']}/{summary['nodes']} valid nodes; stopped: {summary['stopped_because']}"
    )
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from arts.search.report import write_report
    from arts.search.store import Store

    run_dir = Path(args.run_dir)
    with Store.open(run_dir, create=False) as store:
        print(write_report(run_dir, store.load_state()))
    return 0


def _load_run(run_dir: str):
    """(stored state, resolved config, scientist model spec) of a run, for the training commands."""
    from arts.search.store import Store

    path = Path(run_dir)
    cfg = load_config(path / "config.toml", {}) if (path / "config.toml").is_file() else None
    with Store.open(path, create=False) as store:
        return store.load_state(), cfg, (cfg.scientist_model.model if cfg else None)


def cmd_export(args: argparse.Namespace) -> int:
    from arts.training.export import RunInfo, export

    state, cfg, model = _load_run(args.run_dir)
    best = state.best()
    rollout = state.rollouts.get(best.rollout) if best and best.rollout else None
    info = RunInfo(
        task=Path(cfg.task).name if cfg else "unknown", model=model,
        reward=cfg.reward.model_dump_json(exclude_none=True) if cfg else "",
        updates=[e.payload for e in state.events.values() if e.kind == "update"],
        best_node=best.id if best else None, best_score=best.raw_score if best else None,
        best_adapter=rollout.adapter if rollout else None,
    )  # fmt: skip
    print(export(Path(args.run_dir), Path(args.out), args.adapter, args.merge, info))
    return 0


def cmd_rollouts_export(args: argparse.Namespace) -> int:
    from arts.training.offline import export_rollouts, rollout_records

    state, _, model = _load_run(args.run_dir)
    records = rollout_records([r.model_dump() for r in state.rollouts.values()], args.run_dir, model)
    print(f"{export_rollouts(records, Path(args.out))}: {len(records)} rewarded rollouts")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from arts.training.offline import OfflineConfig, rollout_records, train

    records = []
    for run_dir in args.runs:
        state, _, model = _load_run(run_dir)
        records += rollout_records([r.model_dump() for r in state.rollouts.values()], run_dir, model)
    print(train(records, Path(args.out), OfflineConfig(method=args.method, steps=args.steps), args.model))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="arts", description="Automated discovery with a test-time-trained scientist."
    )
    sub = p.add_subparsers(dest="cmd", required=True)

    tasks = sub.add_parser("tasks", help="list, show and check tasks").add_subparsers(
        dest="tasks_cmd", required=True
    )
    tasks.add_parser("list", help="the built-in tasks").set_defaults(fn=cmd_tasks_list)
    show = tasks.add_parser("show", help="statement, files, metric and references of a task")
    show.add_argument("name", help="built-in task name or task directory")
    show.set_defaults(fn=cmd_tasks_show)
    check = tasks.add_parser("check", help="validate a task directory")
    check.add_argument("dir")
    check.set_defaults(fn=cmd_tasks_check)

    ev = sub.add_parser("eval", help="evaluate the seed program (or --files) in the sandbox")
    ev.add_argument("task", help="built-in task name or task directory")
    ev.add_argument("--files", help="directory whose editable files are laid over the seed")
    ev.add_argument("--test", action="store_true", help="run the hidden [test] command instead of [evaluate]")
    ev.add_argument("--json", action="store_true", help="print one JSON object")
    ev.set_defaults(fn=cmd_eval)

    se = sub.add_parser("search", help="run a search on a task")
    se.add_argument("task", nargs="?", help="built-in task name or task directory")
    se.add_argument("--method", choices=["arts", "greedy", "random", "mutate"])
    se.add_argument(
        "--model", help="scientist (and, unless --executor-model, executor) model; default: embedded"
    )
    se.add_argument("--backend", help="transformers | vllm | openai | module:attr")
    se.add_argument("--base-url", help="server for the openai backend")
    se.add_argument("--executor-model")
    se.add_argument("--executor-backend")
    se.add_argument("--executor-base-url")
    se.add_argument("--evals", type=int, help="evaluation budget")
    se.add_argument("--rounds", type=int, help="round cap")
    se.add_argument("--tokens", type=int, help="token budget")
    se.add_argument("--wall", type=float, help="wall-clock budget in seconds")
    se.add_argument("--group", type=int, help="N actions per round (the GRPO group)")
    se.add_argument("-k", type=int, help="K candidates per proposal")
    se.add_argument("--audits", type=int, help="R baseline audit calls")
    se.add_argument("--drafts", type=int, help="greedy: initial drafts")
    se.add_argument("--seed", type=int)
    se.add_argument("--run-dir", help="where the run goes (default runs/<task>-<time>)")
    se.add_argument("--ttt", action="store_true", default=None, help="test-time training (LoRA GRPO)")
    se.add_argument("--update-every", type=int, metavar="M", help="TTT: rounds between GRPO updates")
    se.add_argument("--lora-rank", type=int, metavar="R", help="TTT: LoRA rank")
    se.add_argument("--lr", type=float, help="TTT: learning rate")
    se.add_argument(
        "--without",
        action="append",
        choices=["observations", "comparison", "attribution", "audit", "verbalized", "memory"],
        help="turn one part of the arts round off (an ablation); repeatable",
    )
    se.add_argument("--resume", help="continue the run in this directory")
    se.add_argument("--config", help="TOML file with a SearchConfig")
    se.add_argument(
        "--set", action="append", metavar="PATH=VALUE", help="any config field, e.g. scientist.tail_depth=2"
    )
    se.set_defaults(fn=cmd_search)

    ex = sub.add_parser("export", help="a run's TTT adapter as a peft folder (or --merge: a full model)")
    ex.add_argument("run_dir")
    ex.add_argument("--out", required=True)
    ex.add_argument("--adapter", default="latest", help="latest | best | K (the checkpoint adapters/K)")
    ex.add_argument("--merge", action="store_true", help="fold the adapter into the base model")
    ex.set_defaults(fn=cmd_export)
    ro = sub.add_parser("rollouts", help="a run's rewarded rollouts").add_subparsers(
        dest="rollouts_cmd", required=True
    )
    rx = ro.add_parser("export", help="save them as a `datasets` dataset")
    rx.add_argument("run_dir")
    rx.add_argument("--out", required=True)
    rx.set_defaults(fn=cmd_rollouts_export)
    tr = sub.add_parser("train", help="train an adapter offline on runs' rollouts (TRL SFT or DPO)")
    tr.add_argument("--from", dest="runs", nargs="+", required=True, metavar="RUN_DIR")
    tr.add_argument("--out", required=True)
    tr.add_argument("--method", choices=["sft", "dpo"], default="sft")
    tr.add_argument("--steps", type=int, default=20)
    tr.add_argument("--model", help="base model (default: the runs' scientist model)")
    tr.set_defaults(fn=cmd_train)

    sv = sub.add_parser(
        "serve", help="serve a local model (and adapter) through the OpenAI protocol", add_help=False
    )
    sv.add_argument("rest", nargs=argparse.REMAINDER)
    sv.set_defaults(fn=lambda a: __import__("arts.policy.backends.serve", fromlist=["main"]).main(a.rest))
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # progress lines appear as they happen, also through a pipe
    try:
        return args.fn(args)
    except (TaskError, ValueError, KeyError, StoreError, BackendError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
