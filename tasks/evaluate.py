"""Scored evaluation: run a task's evaluate/test command on a node's files in the sandbox, get an EvalResult.

`run_evaluation` is the one call the search makes to score a program: it leases the run's uid
(`tasks.isolation`), prepares the working copy (`tasks.workcopy`), runs the split's command
(`tasks.process`) and turns what happened into an `EvalResult`. Nothing the evaluated program does raises
here: every failure is `valid=False` with a reason (timeout, killed for memory, exit status, bad
result.json). Under bubblewrap result.json comes from the launcher's report (`tasks.launch`), read once no
other process of the run was alive; otherwise from the file, after every process of the run is gone,
without following links or waiting on a FIFO. It is capped at 1 MiB and checked field by field; non-finite
metrics become null, a non-finite score is invalid. A kill is called "memory limit" only when the memory
cgroup counted an OOM kill (or, without one, the program's error output says it ran out of memory).

What the sandbox does and does not protect is stated in `tasks.isolation`.
"""

from __future__ import annotations

import json
import math
import os
import signal
import stat
import sys
from pathlib import Path
from typing import Literal

from arts.tasks.base import CommandConfig, EvalResult, Task
from arts.tasks.isolation import lease, plan_for
from arts.tasks.process import FILES_LIMIT, OUTPUT_LIMIT, Outcome, execute
from arts.tasks.workcopy import discard_outputs, prepare, remove_hidden

RESULT_LIMIT = 1 << 20
"""A larger result.json is malformed."""
MEMORY_SIGNS = ("MemoryError", "allocate memory", "bad_alloc", "out of memory")
"""Text in stderr by which a failed run is reported as out of memory."""


_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x20), *range(0x7F, 0xA0)] if chr(c) not in "\n\t"}


def printable(text: str) -> str:
    """Text from the evaluated program, safe to print on a terminal: escape sequences and NUL bytes are
    shown as \\xNN instead of acting on it."""
    return text.translate(_CONTROL)


def _failure(o: Outcome, cfg: CommandConfig) -> str:
    """Why the command failed, or "" if it exited with status 0."""
    if o.stopped == "timeout":
        return f"timeout after {cfg.timeout_s:g}s"
    if o.stopped == "output":
        return f"output limit exceeded ({OUTPUT_LIMIT >> 20} MiB on one stream)"
    if o.stopped == "disk":
        return f"disk limit exceeded: more than {cfg.disk_mb} MiB written into the working copy"
    if o.stopped == "files":
        return f"disk limit exceeded: more than {FILES_LIMIT} files created in the working copy"
    if o.stopped or o.returncode == 0:
        return o.stopped
    rc, memory = o.returncode or 0, f"killed: memory limit ({cfg.memory_mb} MiB)"
    last = next((line.strip() for line in reversed(o.stderr.splitlines()) if line.strip()), "")[:300]
    out_of_memory = o.oom_kills > 0 or any(s in o.stderr for s in MEMORY_SIGNS)
    if rc < 0:
        name = signal.Signals(-rc).name if -rc in signal.valid_signals() else f"signal {-rc}"
        if out_of_memory:
            return f"{memory} ({name})"
        if -rc == signal.SIGKILL:
            return "the evaluator was killed (SIGKILL) before it reported a result, not by the memory limit"
        return f"the evaluator was killed by {name}"
    if out_of_memory:
        return f"{memory}: {last}"
    return f"exit status {rc}: {last}" if last else f"exit status {rc}"


def _read_file(path: Path) -> bytes | str:
    """result.json's bytes, or why it cannot be read."""
    try:  # O_NOFOLLOW: root follows no planted symlink; O_NONBLOCK: nor waits on a planted FIFO
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return "no result.json written"
    except OSError as e:
        return f"malformed result.json: cannot open it ({e.strerror})"
    with open(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "malformed result.json: not a regular file"
        return f.read(RESULT_LIMIT + 1)


def _from_report(report: dict) -> bytes | str:
    """result.json's bytes as the launcher read them, or why there are none."""
    text = report.get("result")
    if not isinstance(text, str):
        return str(report.get("error") or "no result.json written")
    return text.encode("utf-8", "surrogatepass")


def _read_result(raw: bytes | str, require_score: bool) -> dict | str:
    """The checked fields of result.json, or why it is unusable."""
    if isinstance(raw, str):
        return raw
    if len(raw) > RESULT_LIMIT:
        return f"malformed result.json: larger than {RESULT_LIMIT >> 20} MiB"
    try:
        data = json.loads(raw)
        metrics = data.get("metrics", {}) if isinstance(data, dict) else None
        # NaN/Infinity in metrics become null: metrics must stay strict JSON for the store.
        metrics = json.loads(json.dumps(metrics), parse_constant=lambda _: None)
    except (ValueError, RecursionError) as e:
        return f"malformed result.json: {e}"
    if not isinstance(data, dict):
        return "malformed result.json: the top level must be an object"
    valid, score, message = data.get("valid"), data.get("score"), data.get("message", "")
    if not isinstance(valid, bool) or not isinstance(metrics, dict) or not isinstance(message, str):
        return "malformed result.json: 'valid' must be true or false, 'metrics' an object, 'message' a string"
    if isinstance(score, bool) or not isinstance(score, int | float | None):
        return "malformed result.json: 'score' must be a number or null"
    if score is not None:  # an int beyond the float range counts as infinite (float() would raise)
        score = float(score) if abs(score) <= sys.float_info.max else math.inf
        if not math.isfinite(score):
            return "non-finite score"
    if valid and score is None and require_score:
        others = sorted(set(data) - {"valid", "score", "metrics", "message"})
        hint = f" (it has {', '.join(map(repr, others))}: is one of them meant as 'score'?)" if others else ""
        return f"valid=true but score is null; write the score under the key 'score'{hint}"
    return {"valid": valid, "score": score, "metrics": metrics, "message": printable(message[:4000])}


def run_evaluation(
    task: Task, files: dict[str, str], workdir: Path, *, split: Literal["evaluate", "test"] = "evaluate"
) -> EvalResult:
    """Write `files` (editable path -> text) into `workdir`, run the split's command there in the sandbox and
    return its checked result. Never raises for what the evaluated program does; raises ValueError for a task
    without that split's section or a file path outside the working copy."""
    if split not in ("evaluate", "test"):
        raise ValueError(f"split must be 'evaluate' or 'test', not {split!r}")
    cfg = task.config.evaluate if split == "evaluate" else task.config.test
    if cfg is None:
        raise ValueError(f"task {task.name!r} ({task.config.kind}) has no [{split}] section to run")
    argv = [sys.executable if cfg.command[0] in ("python", "python3") else cfg.command[0], *cfg.command[1:]]
    Path(workdir).mkdir(parents=True, exist_ok=True)
    workdir = Path(workdir).resolve()
    hidden = [str(p) for p in task.config.hidden] if split == "test" else []
    with lease() as uid:
        try:
            prepare(task, files, workdir, uid, with_hidden=split == "test")
            plan = plan_for(task, cfg, workdir, uid, launcher=True, hidden=hidden)
            o = execute(argv, cfg, workdir, plan)
        finally:  # the run's processes are gone by now
            remove_hidden(task, workdir)  # hidden files never stay in a working copy
        if o.stopped in ("disk", "files"):
            discard_outputs(task, files, workdir)
    tails = {
        "wall_s": round(o.wall_s, 4),
        "returncode": o.returncode,
        "stdout_tail": o.stdout,
        "stderr_tail": o.stderr,
    }
    if reason := _failure(o, cfg):
        return EvalResult(valid=False, reason=printable(reason), **tails)
    raw = _from_report(o.report) if plan.launcher else _read_file(workdir / "result.json")
    if plan.launcher and o.report is None:
        raw = "the evaluator ended without reporting a result (killed, or its launcher failed)"
    got = _read_result(raw, require_score=split == "evaluate" and task.config.kind == "optimize")
    if isinstance(got, str):
        return EvalResult(valid=False, reason=printable(got), **tails)
    reason = "" if got["valid"] else f"evaluator: {got['message'][:300] or 'result marked invalid'}"
    if reason and o.oom_kills > 0:  # the cgroup counted it: a candidate child ran out, the evaluator said why
        reason = f"killed: memory limit ({cfg.memory_mb} MiB) reached; {reason}"
    return EvalResult(**got, reason=reason, **tails)
