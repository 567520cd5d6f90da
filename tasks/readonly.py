"""Read-only commands over a task's case material, in the sandbox that evaluations get.

An `answer`-kind task has no evaluator: the search learns only from what it reads in the material
(logs, metrics, change lists). `run_readonly` runs one text tool (grep, head, tail, wc, ls, cat, sort,
uniq, cut) in a working copy that holds the material and never the hidden files, under the isolation and
limits that evaluations get (`tasks.isolation`: own uid, no network, the task directory hidden, time and
memory limits).
`read_lines` and `grep_lines` are the two tools an investigator is handed, built on it.

Every argument is checked before anything runs, deny by default: argv[0] must be on the allow-list, each
option must be one the command's entry lists (so `sort -o`, `sort -T`, `--compress-program`, `grep -f`,
`tail -f` and every long option are refused), and every path must stay inside the working copy (no absolute
path, no `..`, no symlink out). A refused command raises `ReadonlyError` saying what is allowed.

Not done: pipes, redirections or globbing (argv runs without a shell), reading beyond the material,
keeping the start of an output longer than the sandbox's 20 KB tail (the result says when that happened),
and running two commands at once in one working copy (each call refreshes it: give each caller its own).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from arts.tasks.base import CommandConfig, Task, load_task
from arts.tasks.isolation import lease, plan_for
from arts.tasks.process import TAIL_BYTES, execute
from arts.tasks.workcopy import prepare

SYSTEM_BIN = "/usr/bin:/bin"
"""Where allowed commands are looked up: never the working copy nor the interpreter's directory."""
MEMORY_MB = 512
MAX_PROCS = 8
NO_MATCH = "no line of"
"""How `grep_lines` says that nothing matched: a note quoting it names the pattern without finding it."""
LINE_CHARS = 200
"""`read_lines` and `grep_lines` cut each line to this many characters."""


class ReadonlyError(ValueError):
    """A command refused before it ran; the message says what is allowed instead."""


class ReadonlyResult(BaseModel):
    """What one read-only command printed."""

    model_config = ConfigDict(extra="forbid")
    returncode: int | None
    """The exit status (grep: 1 = no match); None when the command could not start."""
    output: str
    """stdout, then stderr, cut to `max_output` characters; a note in brackets says what was cut."""
    truncated: bool
    """Whether any output was left out."""
    wall_s: float
    """Seconds the command ran."""


@dataclass(frozen=True)
class _Spec:
    flags: str
    """Short options without a value."""
    valued: str = ""
    """Short options that take a value (a count, a pattern, a field list: never a path)."""
    numeric: bool = False
    """Whether `-20` (the old form of `-n 20`) is accepted."""
    max_paths: int | None = None
    """At most this many positional paths (uniq's second one would be its output file)."""
    pattern_first: bool = False
    """The first positional is a pattern, not a path, unless `-e` gave one (grep)."""


COMMANDS: dict[str, _Spec] = {
    # no -R (follows links out of the copy), -f (reads patterns from a file)
    "grep": _Spec("cinvwxlLHhoqsEFGrIz", valued="emABC", pattern_first=True),
    "head": _Spec("qvz", valued="nc", numeric=True),
    "tail": _Spec("qvz", valued="nc", numeric=True),  # no -f/-F: following would hang until the timeout
    "wc": _Spec("clmwL"),
    "ls": _Spec("1aAdFhilnpRrSstU"),
    "cat": _Spec("AbeEnstTuv"),
    "sort": _Spec("bcdfghiMmnrRsuVz", valued="kt"),  # no -o (writes), -T (temp dir), -S
    "uniq": _Spec("cdDiuz", valued="fsw", max_paths=1),
    "cut": _Spec("nsz", valued="bcdf"),
}


def _refuse(name: str, why: str) -> ReadonlyError:
    spec = COMMANDS[name]
    allowed = f"-[{spec.flags}]" + (f", -[{spec.valued}] VALUE" if spec.valued else "")
    return ReadonlyError(f"{name}: {why}; allowed options: {allowed}, and paths inside the working copy")


def _inside(arg: str, workdir: Path) -> bool:
    if not arg or Path(arg).is_absolute() or ".." in Path(arg).parts:
        return False
    return Path(os.path.realpath(workdir / arg)).is_relative_to(workdir)


def check_argv(argv: list[str], workdir: Path) -> str:
    """The absolute path of argv[0]'s program, after checking every argument; raises ReadonlyError."""
    if not argv or argv[0] not in COMMANDS:
        got = argv[0] if argv else "nothing"
        raise ReadonlyError(f"{got!r} is not a read-only command here; use one of {', '.join(COMMANDS)}")
    name, spec = argv[0], COMMANDS[argv[0]]
    positional: list[str] = []
    pattern_given, args, i = False, argv[1:], 0
    while i < len(args):
        arg, i = args[i], i + 1
        if arg == "--":
            positional += args[i:]
            break
        if not arg.startswith("-") or arg == "-":
            positional.append(arg)
            continue
        if arg.startswith("--"):
            raise _refuse(name, f"long option {arg.split('=')[0]!r} is not allowed")
        if spec.numeric and arg[1:].isdigit():
            continue
        for j, ch in enumerate(arg[1:], start=1):
            if ch in spec.valued:
                if j == len(arg) - 1:  # the value is the next argument
                    if i >= len(args):
                        raise _refuse(name, f"option -{ch} needs a value")
                    i += 1
                pattern_given |= name == "grep" and ch == "e"
                break
            if ch not in spec.flags:
                raise _refuse(name, f"option -{ch} is not allowed")
    if spec.pattern_first and not pattern_given:
        if not positional:
            raise _refuse(name, "a pattern is needed")
        positional = positional[1:]
    if spec.max_paths is not None and len(positional) > spec.max_paths:
        raise _refuse(name, f"at most {spec.max_paths} path(s): a further one would be written")
    for arg in positional:
        if arg != "-" and not _inside(arg, workdir):
            raise _refuse(name, f"path {arg!r} leaves the working copy (absolute or '..')")
    program = shutil.which(name, path=SYSTEM_BIN)
    if program is None:
        raise ReadonlyError(f"{name} is not installed in {SYSTEM_BIN}; install coreutils/grep")
    return program


def _output(stdout: str, stderr: str, max_output: int, note: str) -> tuple[str, bool]:
    """stdout then stderr, cut to max_output characters, and whether anything was left out."""
    lost_start = len(stdout.encode()) >= TAIL_BYTES  # the sandbox kept only the tail of a longer stream
    text = stdout + (("\n" if stdout and not stdout.endswith("\n") else "") + stderr if stderr else "")
    truncated = lost_start or len(text) > max_output
    if lost_start:
        text = "[... the start of the output was not kept]\n" + text[-max_output:]
    elif len(text) > max_output:
        text = text[:max_output] + f"\n[... {len(text) - max_output} more characters]"
    return text + (f"\n[{note}]" if note else ""), truncated


def run_readonly(
    task_or_root: Task | str | Path,
    argv: list[str],
    workdir: Path,
    timeout_s: float = 10,
    max_output: int = 4000,
) -> ReadonlyResult:
    """Copy the material (never the hidden files) into `workdir` and run `argv` there in the sandbox.
    Raises ReadonlyError for a refused command; whatever the command does is in the result."""
    task = task_or_root if isinstance(task_or_root, Task) else load_task(task_or_root)
    Path(workdir).mkdir(parents=True, exist_ok=True)
    workdir = Path(workdir).resolve()
    program = check_argv(argv, workdir)
    cfg = CommandConfig(command=argv, timeout_s=timeout_s, memory_mb=MEMORY_MB, max_procs=MAX_PROCS)
    with lease() as uid:
        prepare(task, {}, workdir, uid, with_hidden=False)
        check_argv(argv, workdir)  # again: the copy is fresh, so no link planted earlier leads out
        o = execute([program, *argv[1:]], cfg, workdir, plan_for(task, cfg, workdir, uid))
    stopped = {"timeout": f"stopped: timeout after {timeout_s:g}s", "output": "stopped: too much output"}
    started = o.stopped in ("", *stopped)  # otherwise o.stopped says why it could not start
    output, truncated = _output(o.stdout, o.stderr, max_output, stopped.get(o.stopped, o.stopped))
    return ReadonlyResult(
        returncode=o.returncode if started else None,
        output=output,
        truncated=truncated,
        wall_s=round(o.wall_s, 4),
    )


def _clip(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 3] + "..."


def read_lines(task: Task, workdir: Path, path: str, start: int, count: int = 20) -> str:
    """Lines `start`..`start+count-1` of a material file, each as `<n>: <text>`. Numbered by grep itself,
    so the lines are found even when the sandbox kept only the tail of a long output."""
    start = max(int(start), 1)
    argv = ["grep", "-n", "-m", str(start + count - 1), "-e", "", "--", path]
    result = run_readonly(task, argv, workdir, max_output=TAIL_BYTES * 2)
    if result.returncode not in (0, 1):
        return _clip(result.output.strip()) or f"cannot read {path}"
    rows = []
    for line in result.output.splitlines():
        number, _, text = line.partition(":")
        if number.isdigit() and int(number) >= start:
            rows.append(f"{number}: {_clip(text)}")
    if not rows:
        return f"{path} has fewer than {start} lines"
    return "\n".join(rows[:count])


def grep_lines(task: Task, workdir: Path, pattern: str, path: str, max_matches: int = 20) -> str:
    """The first `max_matches` lines of a material file containing `pattern` (case-insensitive basic
    regex), each as `<n>: <text>`."""
    argv = ["grep", "-n", "-i", "-m", str(max_matches), "-e", pattern, "--", path]
    result = run_readonly(task, argv, workdir)
    if result.returncode == 1:
        return f"{NO_MATCH} {path} matches {pattern!r}"
    if result.returncode != 0:
        return _clip(result.output.strip()) or f"grep failed on {path}"
    return "\n".join(_clip(line.replace(":", ": ", 1)) for line in result.output.splitlines())
