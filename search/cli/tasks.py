"""The `arts` sub-commands about tasks: `tasks list|show|check` and `eval` (a seed or your files, in the sandbox).

Beside `search.cli.main` (the parser) and `search.cli.search` (the search). Each imports what it uses when it runs,
so that the others start fast.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from arts.tasks.base import Task


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.6g}"


def cmd_tasks_list(args: argparse.Namespace) -> int:
    from arts.tasks.base import builtin_names, resolve_task

    rows = [("name", "kind", "metric", "direction", "baseline", "best known")]
    for name in builtin_names():
        c = resolve_task(name).config
        m = c.metric
        rows.append((name, c.kind, m.name if m else "-", m.direction if m else "-",
                     _fmt(m.baseline if m else None), _fmt(m.best_known if m else None)))  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())
    return 0


def cmd_tasks_show(args: argparse.Namespace) -> int:
    from arts.tasks.base import resolve_task

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
    if c.probe:  # a learning probe (never shown to the scientist)
        print(f"probe:    {c.probe.paying} pays; decoys: {', '.join(c.probe.decoys) or '-'}")
    print(f"location: {task.root}")
    return 0


def cmd_tasks_check(args: argparse.Namespace) -> int:
    """The task folder's checks, then (unless --no-run) one evaluation of the seed program, as the search's
    first node would meet it: an evaluator that writes a wrong result fails here with the reason `arts eval`
    gives, not as a whole budget of invalid nodes."""
    from arts.tasks.base import BUILTIN_DIR, TaskError, builtin_names, load_task
    from arts.tasks.problems import unsearchable

    # a folder here wins over a built-in of the same name, as a task folder does for `arts bench --tasks`
    builtin = args.dir in builtin_names() and not Path(args.dir).is_dir()
    try:
        task = load_task(BUILTIN_DIR / args.dir if builtin else args.dir)
    except TaskError as e:
        print(e, file=sys.stderr)
        return 1
    if not task.seedless:
        seed = f"seed: {', '.join(task.seed_files())}"
    elif task.config.kind == "answer":
        seed = f"no seed answer (the investigator writes {', '.join(task.config.editable)})"
    else:
        seed = "seedless (first nodes are drafts)"
    if why := unsearchable(task.root, task.config):
        print(f"{why}; a search would stop before its first node", file=sys.stderr)
        return 1
    print(f"{task.root / 'task.toml'}: ok — {task.name} ({task.config.kind}), {seed}")
    if task.config.kind == "answer":
        return _answer_plan(task)
    if args.no_run or task.seedless or task.config.evaluate is None:
        return 0
    return _check_seed(task)


def _answer_plan(task: Task) -> int:
    """What a search would meet on an answer task, without a model: the schema as a grammar, the parts an
    answer is written in, each part's menus from its material, the tables a comparison reads, and the
    histories a bisect replays (each undone from its final tree here; its test is not run)."""
    from arts.policy import answer_menus, answer_parts
    from arts.policy.answer_schema import schema_model
    from arts.search.assembly import material_paths, material_texts
    from arts.search.diagnose import table_folders
    from arts.tasks import history

    schema = task.answer_schema()
    try:
        schema_model(schema)
    except ValueError as e:
        print(f"{task.root / 'task.toml'}: the answer schema cannot constrain decoding: {e}", file=sys.stderr)
        return 1
    material = [p for p in material_paths(task) if p != task.config.answer.schema_path]
    parts = answer_parts.split(schema, material)
    if not parts:
        print(f"answer: written whole from {len(material)} material files")
        return 0
    whole = "\n".join(material_texts(task, material).values())
    print(f"answer: {len(parts)} parts, one per folder ({', '.join(p.folder for p in parts)})")
    for part in parts:
        files = [p for p in material if p.startswith(part.folder)]
        menu = answer_menus.narrowed(
            part.schema, "\n".join(material_texts(task, files).values()), whole, True
        )
        sizes = [
            f"{len(a['enum'])}/{len(b['enum'])}"
            for a, b in zip(answer_menus.enums(menu), answer_menus.enums(part.schema))
        ]
        tables = table_folders(files)
        print(
            f"  {part.name}: {len(files)} files, menus {' '.join(sizes) or '-'}, compare {', '.join(tables) or '-'}"
            + "".join(f", {_history_line(task, files, f)}" for f in history.history_folders(files))
        )
    return 0


def _history_line(task: Task, files: list[str], folder: str) -> str:
    """A part's history as a bisect would replay it, or why it cannot."""
    from arts.search.assembly import material_texts
    from arts.tasks import history

    try:
        replayed = history.load(material_texts(task, files), folder)
        return f"bisect {folder} ({len(history.states(replayed)) - 1} commits, {replayed.test})"
    except history.HistoryError as e:
        return f"bisect {folder}: cannot replay: {e}"


def _check_seed(task: Task) -> int:
    from arts.tasks.evaluate import run_evaluation

    with tempfile.TemporaryDirectory(prefix="arts-check-") as tmp:
        res = run_evaluation(task, task.seed_files(), Path(tmp) / "work")
    metric = task.config.metric.name if task.config.metric else "score"
    if res.valid:
        print(f"seed evaluated: {metric} = {_fmt(res.score)}  ({res.wall_s:.2f}s)")
        return 0
    evaluator = " ".join(task.config.evaluate.command)
    print(
        f"{task.root / 'task.toml'}: the seed program is invalid: {res.reason}\n"
        f"  every node of a search would meet this: fix the seed or the evaluator ({evaluator}); "
        f"`arts eval {task.root}` shows it again (docs/tasks.md: the result protocol)",
        file=sys.stderr,
    )
    return 1


def _read_overlay(task_files: list[str], overlay: Path) -> dict[str, str]:
    from arts.tasks.base import TaskError

    if not overlay.is_dir():
        why = "is a file" if overlay.exists() else "no such directory"
        raise TaskError(f"--files {overlay}: {why}; give the folder that holds {', '.join(task_files)}")
    files = {}
    for rel in task_files:
        p = overlay / rel
        if p.is_file():
            files[rel] = p.read_text()
    if not files:
        raise TaskError(f"--files {overlay}: holds none of the editable files {task_files}; put them there")
    return files


def cmd_eval(args: argparse.Namespace) -> int:
    from arts.tasks.base import resolve_task
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
