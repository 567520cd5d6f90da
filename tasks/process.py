"""Running one command under an isolation plan: spawn it, keep the tails of its output, stop it.

Both users of the sandbox, scored evaluations (`tasks.evaluate`) and read-only commands over case
material (`tasks.readonly`), run their command through `execute`. It spawns the command in its own session
with the plan's preexec (`tasks.isolation`), drains stdout and stderr as data comes (the child never
blocks on a full pipe) keeping 20 KB tails, and stops the run at the wall-clock timeout or past 64 MiB on
one stream. When the command exits or is stopped, its process group and, as root, every process of its uid
are SIGKILLed, so nothing it started outlives the run.

Not done here: deciding the limits or the uid (`tasks.isolation`), writing the working copy
(`tasks.workcopy`), or judging what the command did (callers read `Outcome`). Nothing raises for what the
command does: a command that cannot start comes back as an `Outcome` saying why.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from arts.tasks.base import CommandConfig
from arts.tasks.isolation import Plan, environment, preexec, reap_uid, signal_uid

TAIL_BYTES = 20_000
"""How much of the end of each output stream is kept."""
OUTPUT_LIMIT = 64 << 20
"""A run that prints more than this on one stream is stopped."""
_GRACE_S = 1.0  # after the command exits, how long its pipes may still drain


@dataclass
class Outcome:
    """How one command ended."""

    returncode: int | None = None
    wall_s: float = 0.0
    stdout: str = ""
    stderr: str = ""
    stopped: str = ""  # "timeout", "output", or why the command could not start


def _pump(proc: subprocess.Popen, tails: dict[int, bytearray], until: float, stop: Callable[[], None]) -> str:
    """Read both pipes as data comes, keeping only tails, until the command exits and its pipes drain.
    Returns "timeout", "output" (too much of it) or ""."""
    sel = selectors.DefaultSelector()
    for fd in tails:
        sel.register(fd, selectors.EVENT_READ)
    try:
        pidfd: int | None = os.pidfd_open(proc.pid)
        sel.register(pidfd, selectors.EVENT_READ)
    except (AttributeError, OSError):
        pidfd = None  # not Linux: poll for the exit every 20 ms
    totals, exited = dict.fromkeys(tails, 0), False
    try:
        while not exited or any(fd in sel.get_map() for fd in tails):
            if not exited and pidfd is None and proc.poll() is not None:
                exited, until = True, time.monotonic() + _GRACE_S
                stop()
            wait = until - time.monotonic()
            if wait <= 0:
                return "" if exited else "timeout"
            for key, _ in sel.select(wait if pidfd is not None else min(wait, 0.02)):
                if key.fd == pidfd:  # exited: kill what it left running, so its pipes close; then drain
                    exited, until = True, time.monotonic() + _GRACE_S
                    sel.unregister(pidfd)
                    stop()
                elif chunk := os.read(key.fd, 1 << 16):
                    tails[key.fd] += chunk
                    if len(tails[key.fd]) > 2 * TAIL_BYTES:
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


def execute(argv: list[str], cfg: CommandConfig, workdir: Path, plan: Plan) -> Outcome:
    """Run argv in workdir under plan and cfg's timeout; every process it started is gone on return."""
    start = time.monotonic()
    try:
        proc = subprocess.Popen(argv, cwd=workdir, env=environment(cfg, workdir), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                preexec_fn=preexec(plan))  # fmt: skip
    except (OSError, subprocess.SubprocessError) as e:
        return Outcome(stopped=f"could not start {argv[0]!r}: {e}")
    assert proc.stdout is not None and proc.stderr is not None
    tails = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    ended: list[float] = []

    def stop() -> None:  # once: the process group, then (as root) every process of the uid
        if not ended:
            ended.append(time.monotonic() - start)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # the unreaped leader keeps its group id valid
            if plan.uid is not None:
                signal_uid(plan.uid)

    try:
        why = _pump(proc, tails, start + cfg.timeout_s, stop)
    finally:
        stop()
        proc.stdout.close()
        proc.stderr.close()
        proc.wait()
        if plan.uid is not None:
            reap_uid(plan.uid)
    out, err = (bytes(t[-TAIL_BYTES:]).decode("utf-8", "replace") for t in tails.values())
    return Outcome(proc.returncode, ended[0], out, err, why)
