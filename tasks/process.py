"""Running one command under an isolation plan: spawn it, keep the tails of its output, stop it.

Both users of the sandbox, scored evaluations (`tasks.evaluate`) and read-only commands over case
material (`tasks.readonly`), run their command through `execute`. It spawns the command in its own session
with the plan's preexec (`tasks.isolation`), drains stdout and stderr as data comes (the child never
blocks on a full pipe) keeping 20 KB tails, and stops the run at the wall-clock timeout or past 64 MiB on
one stream, or past `disk_mb` (apparent sizes: sparse files count in full) or FILES_LIMIT entries added to
its working copy, checked while it runs and once more after. When the command exits or is stopped, its process group and, as root, every process of its uid
are SIGKILLed, so nothing it started outlives the run. Under bubblewrap (`Plan.prefix`) the command may
run under the launcher (`tasks.launch`), whose report (the evaluator's exit status and result.json) comes
back on a pipe of its own.

Not done here: deciding the limits or the uid (`tasks.isolation`), writing the working copy
(`tasks.workcopy`), or judging what the command did (callers read `Outcome`). Nothing raises for what the
command does: a command that cannot start comes back as an `Outcome` saying why.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import selectors
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from arts.tasks.base import CommandConfig
from arts.tasks.isolation import (
    LAUNCHER_IN_SANDBOX,
    LIB_IN_SANDBOX,
    Plan,
    environment,
    oom_kills,
    preexec,
    reap_uid,
    signal_uid,
)

TAIL_BYTES = 20_000
"""How much of the end of each output stream is kept."""
OUTPUT_LIMIT = 64 << 20
"""A run that prints more than this on one stream is stopped."""
REPORT_LIMIT = 3 << 20
"""A larger launcher report is dropped (result.json is capped at 1 MiB)."""
FILES_LIMIT = 20_000
"""How many files, folders and links a run may add to its working copy (each costs an inode)."""
DISK_CHECK_S = 0.25
"""How often the working copy's size is checked against the command's disk_mb."""
SPAWN_RETRY_S = (0.5, 2.0)
"""Pauses before trying a spawn again that fork refused for want of processes or memory."""
_GRACE_S = 1.0  # after the command exits, how long its pipes may still drain


@dataclass
class Outcome:
    """How one command ended."""

    returncode: int | None = None
    wall_s: float = 0.0
    stdout: str = ""
    stderr: str = ""
    stopped: str = ""  # "timeout", "output", or why the command could not start
    report: dict | None = None  # the launcher's report (tasks.launch), when the command ran under it
    oom_kills: int = 0  # processes the memory cgroup's limit killed


def disk_use(root: Path, stop_at: tuple[int, int] | None = None) -> tuple[int, int]:
    """(bytes, entries) under root, links not followed. A file counts its apparent size or its allocated
    blocks, whichever is larger (a sparse file counts in full: copying the node folder would write it
    out), once however many hard links name it; every entry counts against FILES_LIMIT (empty files cost
    inodes). The walk ends early once either total passes `stop_at`."""
    total, entries, seen, stack = 0, 0, set(), [os.fspath(root)]
    while stack and not (stop_at and (total > stop_at[0] or entries > stop_at[1])):
        with contextlib.suppress(OSError), os.scandir(stack.pop()) as found:
            for e in found:
                entries += 1
                with contextlib.suppress(OSError):
                    st = e.stat(follow_symlinks=False)
                    if (st.st_dev, st.st_ino) not in seen:
                        seen.add((st.st_dev, st.st_ino))
                        regular = stat.S_ISREG(st.st_mode)
                        total += max(st.st_size if regular else 0, st.st_blocks * 512)
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
    return total, entries


def _over_disk(workdir: Path, cfg: CommandConfig, base: tuple[int, int]) -> str:
    """ "disk" or "files" when the run added more than disk_mb or FILES_LIMIT entries to workdir, else ""."""
    limit = (base[0] + (cfg.disk_mb << 20), base[1] + FILES_LIMIT)
    used = disk_use(workdir, stop_at=limit)
    return "disk" if used[0] > limit[0] else "files" if used[1] > limit[1] else ""


def _pump(proc: subprocess.Popen, tails: dict[int, bytearray], until: float, stop: Callable[[], None],
          over_disk: Callable[[], str] = lambda: "") -> str:  # fmt: skip
    """Read the pipes as data comes, keeping only tails (the first pipe, the launcher's report, is kept
    whole up to REPORT_LIMIT), until the command exits and its pipes drain. Returns "timeout", "output"
    (too much of it), what `over_disk()` (asked every DISK_CHECK_S) says ("disk", "files") or ""."""
    sel = selectors.DefaultSelector()
    for fd in tails:
        sel.register(fd, selectors.EVENT_READ)
    try:
        pidfd: int | None = os.pidfd_open(proc.pid)
        sel.register(pidfd, selectors.EVENT_READ)
    except (AttributeError, OSError):
        pidfd = None  # not Linux: poll for the exit every 20 ms
    totals, exited, next_check = dict.fromkeys(tails, 0), False, time.monotonic() + DISK_CHECK_S
    report_fd = next(iter(tails)) if len(tails) == 3 else None
    try:
        while not exited or any(fd in sel.get_map() for fd in tails):
            if not exited and pidfd is None and proc.poll() is not None:
                exited, until = True, time.monotonic() + _GRACE_S
                stop()
            now = time.monotonic()
            if not exited and now >= next_check:
                if over := over_disk():
                    return over
                next_check = now + DISK_CHECK_S
            wait = until - now
            if wait <= 0:
                return "" if exited else "timeout"
            wait = min(wait, max(next_check - now, 0.001)) if not exited else wait
            for key, _ in sel.select(wait if pidfd is not None else min(wait, 0.02)):
                if key.fd == pidfd:  # exited: kill what it left running, so its pipes close; then drain
                    exited, until = True, time.monotonic() + _GRACE_S
                    sel.unregister(pidfd)
                    stop()
                elif chunk := os.read(key.fd, 1 << 16):
                    tails[key.fd] += chunk
                    if key.fd == report_fd:
                        if len(tails[key.fd]) > REPORT_LIMIT:
                            del tails[key.fd][:]
                            sel.unregister(key.fd)
                    elif len(tails[key.fd]) > 2 * TAIL_BYTES:
                        del tails[key.fd][:-TAIL_BYTES]
                    totals[key.fd] += len(chunk)
                    if totals[key.fd] > OUTPUT_LIMIT and not exited:
                        return "output"
                else:
                    sel.unregister(key.fd)
        return ""
    finally:
        sel.close()
        if pidfd is not None:
            os.close(pidfd)


def _filter_fd(plan: Plan) -> int | None:
    """A descriptor holding the plan's seccomp program, read from its start; None without one."""
    if not plan.prefix or plan.seccomp is None:
        return None
    fd = os.memfd_create("arts-seccomp")  # close-on-exec, but for the one spawn that passes it
    os.write(fd, plan.seccomp)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _spawn(argv: list[str], **kwargs) -> subprocess.Popen:
    """Popen, tried again twice when fork finds the machine out of processes or memory for a moment (a
    loaded machine, or processes a killed run left behind that the next lease is still reaping)."""
    for pause in SPAWN_RETRY_S:
        try:
            return subprocess.Popen(argv, **kwargs)
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.ENOMEM):
                raise
            time.sleep(pause)
    return subprocess.Popen(argv, **kwargs)


def execute(argv: list[str], cfg: CommandConfig, workdir: Path, plan: Plan) -> Outcome:
    """Run argv in workdir under plan and cfg's timeout; every process it started is gone on return."""
    start = time.monotonic()
    r, w = os.pipe() if plan.launcher else (None, None)
    if w is not None:
        hidden = os.pathsep.join(plan.hidden)
        argv = [sys.executable, LAUNCHER_IN_SANDBOX, str(w), hidden, *argv]
    prefix, filter_fd = plan.prefix, _filter_fd(plan)
    if filter_fd is not None:  # bubblewrap reads the filter from it and applies it to all it starts
        prefix = [prefix[0], "--seccomp", str(filter_fd), *prefix[1:]]
    passed = tuple(fd for fd in (w, filter_fd) if fd is not None)
    env = environment(cfg, workdir) | ({"PYTHONPATH": LIB_IN_SANDBOX} if plan.launcher else {})
    try:
        proc = _spawn([*prefix, *argv], cwd=workdir, env=env,
                      stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                      start_new_session=True, preexec_fn=preexec(plan), pass_fds=passed)  # fmt: skip
    except (OSError, subprocess.SubprocessError) as e:
        if r is not None:
            os.close(r)  # w: in the finally below, once
        return Outcome(stopped=f"could not start {argv[0]!r}: {e}")
    finally:
        for fd in passed:
            os.close(fd)  # the launcher holds the only write end: EOF once it is gone
    assert proc.stdout is not None and proc.stderr is not None
    tails = {} if r is None else {r: bytearray()}
    tails |= {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    ended: list[float] = []

    def stop() -> None:  # once: the process group, then (as root) every process of the uid
        if not ended:
            ended.append(time.monotonic() - start)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # the unreaped leader keeps its group id valid
            if plan.uid is not None:
                signal_uid(plan.uid)

    base = disk_use(workdir)
    try:
        why = _pump(proc, tails, start + cfg.timeout_s, stop, lambda: _over_disk(workdir, cfg, base))
    finally:
        stop()
        proc.stdout.close()
        proc.stderr.close()
        proc.wait()
        if plan.uid is not None:
            reap_uid(plan.uid)
        if r is not None:
            os.close(r)
    # once more with every process gone: what a run wrote after the last check (sparse files take no time)
    why = why or _over_disk(workdir, cfg, base)
    report = None
    if r is not None:
        with contextlib.suppress(ValueError):
            report = json.loads(bytes(tails.pop(r))) or None
    out, err = (bytes(t[-TAIL_BYTES:]).decode("utf-8", "replace") for t in tails.values())
    report = report if isinstance(report, dict) and isinstance(report.get("exit"), int) else None
    rc = proc.returncode
    if report is not None:
        rc = report["exit"]
    elif plan.prefix and rc is not None and rc > 128:  # bubblewrap tells a death by signal N as 128+N
        rc = 128 - rc
    o = Outcome(rc, ended[0], out, err, why, report)
    o.oom_kills = oom_kills(plan.cgroup)
    return o
