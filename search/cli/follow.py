"""Following runs: `arts runs [DIR]` lists them, `arts status RUN` shows one, live or finished.

Both read a run through `Store.open_readonly`, which takes no lock, so a running search is never blocked
or slowed by someone watching it. A run's status comes from two facts: whether a process holds the run's
lock (running), and whether its last `round_start` was followed by a `finish` event (finished); a run
that is neither was killed (or crashed) and can be continued with `arts search --resume`.

Not done here: anything that writes. Reading imports no model code, so both commands start fast.
"""

from __future__ import annotations

import fcntl
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from arts.search.store import Store

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass
class RunView:
    """What a person following a run wants to know, read from its store and its files."""

    path: Path
    task: str = "?"
    method: str = "?"
    status: str = "killed"
    """running | finished | killed"""
    round: int = 0
    evals: int = 0
    nodes: int = 0
    valid: int = 0
    best: float | None = None
    best_node: int | None = None
    baseline: float | None = None
    wall_s: float = 0.0
    updated: float = 0.0
    """Unix time of the store's last write."""
    stopped: str = ""
    phase: str = ""
    """The console's last line (from arts.log): what the run is doing now."""
    recent: list[str] = field(default_factory=list)


def is_locked(run_dir: Path) -> bool:
    """True while a process holds the run's lock. A shared probe for an instant: it can only fail (never
    block) a writer that opens in that same instant, and a writer never waits for it."""
    try:
        fd = os.open(run_dir / "lock", os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops the probe's lock
    return False


def _config(run_dir: Path) -> dict:
    try:
        return tomllib.loads((run_dir / "config.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def _last_line(path: Path, limit: int = 4096) -> str:
    try:
        with path.open("rb") as f:
            f.seek(max(f.seek(0, os.SEEK_END) - limit, 0))
            lines = f.read().decode(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1] if lines else ""


def now_doing(line: str) -> str:
    """The log's last line as "what, for how long": `14:20:49    438.9s  phase round 2: attribute (...)`."""
    m = re.match(r"(\d\d:\d\d:\d\d)\s+[\d.]+s\s+(?:phase )?(.*?)(?: \(previous took [\d.]+s\))?$", line)
    if not m:
        return line.strip()
    h, mi, s = map(int, m.group(1).split(":"))
    now = time.localtime()
    since = (now.tm_hour * 3600 + now.tm_min * 60 + now.tm_sec - (h * 3600 + mi * 60 + s)) % 86400
    return f"{m.group(2)}  (since {m.group(1)}, {age(since)} ago)"


def last_write(run_dir: Path) -> float:
    """When the run last wrote: its database, a non-empty WAL, or its log. Not the -shm file, which
    readers (this module included) touch, nor an empty WAL a reader left."""
    times = []
    for name in ("arts.db", "arts.db-wal", "arts.log"):
        try:
            st = (run_dir / name).stat()
        except FileNotFoundError:
            continue
        if name != "arts.db-wal" or st.st_size > 0:
            times.append(st.st_mtime)
    return max(times, default=0.0)


def _task_name(task: str) -> str:
    """The name in a task folder's task.toml, as the run's header says it; a built-in task is stored by
    name, and a folder that is gone or unreadable is shown by its folder name."""
    try:
        name = tomllib.loads((Path(task) / "task.toml").read_text()).get("name")
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        name = None
    return name if isinstance(name, str) and name else Path(task).name


def read_run(run_dir: Path, recent: int = 0) -> RunView:
    """One run's view; `recent` > 0 also reads its last nodes as lines."""
    run_dir = Path(run_dir)
    cfg = _config(run_dir)
    view = RunView(run_dir, task=_task_name(str(cfg.get("task", "?"))), method=str(cfg.get("method", "?")))
    with Store.open_readonly(run_dir) as store:
        state = store.load_state()
    events = sorted(state.events.values(), key=lambda e: e.id)
    starts = [e.id for e in events if e.kind == "round_start"]
    finish = next((e for e in reversed(events) if e.kind == "finish"), None)
    if is_locked(run_dir):
        view.status = "running"
    elif finish is not None and finish.id > max(starts, default=0):
        view.status, view.stopped = "finished", str(finish.payload.get("stopped_because", ""))
    view.round = int(state.meta.get("round", 0))
    view.wall_s = float(state.meta.get("wall_s", 0.0))  # written as each round ends
    if view.status == "running" and "wall_t0" in state.meta:  # a live run: counted up to now
        view.wall_s = time.time() - float(state.meta["wall_t0"])
    view.evals = sum(e.kind == "eval" for e in events)
    children = [n for n in state.nodes.values() if n.parent is not None]
    view.nodes, view.valid = len(children), sum(n.status == "valid" for n in children)
    root = next((n for n in state.nodes.values() if n.parent is None), None)
    view.baseline = root.raw_score if root else None
    best = state.best()
    if best is not None:
        view.best, view.best_node = best.raw_score, best.id
    view.updated = last_write(run_dir)
    view.phase = now_doing(_last_line(run_dir / "arts.log")) if view.status == "running" else ""
    for n in sorted(children, key=lambda n: n.id)[-recent:] if recent else []:
        result = f"{n.raw_score:.6g}" if n.raw_score is not None else f"{n.status}: {n.reason[:60]}"
        view.recent.append(f"node {n.id} <- {n.parent}  round {n.round}  {result}  {n.hypothesis[:60]}")
    return view


def list_runs(root: Path) -> list[RunView]:
    """Every run under `root` (folders holding an arts.db), newest first; unreadable ones are skipped."""
    views = []
    for db in Path(root).glob("*/arts.db"):
        try:
            views.append(read_run(db.parent))
        except Exception as e:  # a broken folder must not hide the others  # noqa: BLE001
            views.append(RunView(db.parent, status=f"unreadable ({type(e).__name__})"))
    return sorted(views, key=lambda v: v.updated, reverse=True)


def age(seconds: float) -> str:
    s = max(int(seconds), 0)
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= n:
            return f"{s // n}{unit}"
    return f"{s}s"


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.6g}"


def runs_table(views: list[RunView]) -> str:
    rows = [("run", "task", "method", "status", "best", "evals", "age")]
    now = time.time()
    for v in views:
        rows.append(
            (v.path.name, v.task, v.method, v.status, _fmt(v.best), str(v.evals), age(now - v.updated))
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def status_text(v: RunView) -> str:
    lines = [
        f"{v.path}  {v.task}  {v.method}  {v.status}" + (f" ({v.stopped})" if v.stopped else ""),
        f"round {v.round}  evals {v.evals}  nodes {v.valid}/{v.nodes} valid  wall {v.wall_s:.0f}s"
        f"  last write {age(time.time() - v.updated)} ago",
        f"best {_fmt(v.best)} (node {v.best_node})  seed {_fmt(v.baseline)}",
    ]
    if v.phase:
        lines.append(f"now: {v.phase}")
    if v.recent:
        lines += ["", *v.recent]
    report = v.path / "report.html"
    if report.is_file():
        lines += ["", f"report: {report}"]
    return "\n".join(lines)
