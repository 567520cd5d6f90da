"""The evaluator's side of the task contract, for built-in and users' evaluators alike.

An evaluator imports this module instead of copying the protocol (standard library only, so it imports
inside the sandbox, where `tasks.isolation` binds this file, `tasks.confine` and `tasks.tabular` and
nothing else of arts):

    from arts.tasks import protocol

    def score():                       # trusted: runs in the evaluator, never imports the candidate
        out, why = protocol.run_child(__file__, "solution.py", payload=b"")
        ...
        return value, "message", {"metric": value}

    def child(payload: bytes) -> bytes:  # runs the candidate, in a fresh, confined child process
        from solution import answer
        return json.dumps(answer()).encode()

    if __name__ == "__main__":
        protocol.main(score, child)

`run_child` copies the evaluator and the editable file (only those) into a fresh scratch directory and
runs `python evaluate.py --child` there; `main` sends that run to `child`, after `tasks.confine` has put
the process under Landlock (it reads no working copy, no data file, nothing another child left) and its
stdout is reserved: what the candidate prints goes to stderr, and only `child`'s return value reaches the
evaluator. When the child ends, every process it left is killed (this process is their subreaper) and
the scratch directory is deleted. So each call is a fresh process that never ran candidate code before
and keeps nothing: cross-validation calls it once per fold with that fold's arrays alone.
The evaluator writes result.json itself (`write_result`), last, as `tasks.launch` requires.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

CHILD_FLAG = "--child"
_PR_SET_CHILD_SUBREAPER = 36
Score = tuple[float | None, str, dict]


MESSAGE_CHARS = 2000
"""A message longer than this (a candidate's huge error line) is cut: result.json stays small."""


def _bounded(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else f"{text[: limit - 40]}... ({len(text)} characters in all)"


def write_result(score: float | None, message: str, metrics: dict | None = None) -> None:
    """Write result.json; a missing score means the candidate is invalid."""
    out = Path("result.json")
    out.unlink(missing_ok=True)
    valid = score is not None
    message = _bounded(message, MESSAGE_CHARS)
    out.write_text(json.dumps({"score": score, "valid": valid, "metrics": metrics or {}, "message": message}))


def reserve_stdout() -> BinaryIO:
    """Keep the real stdout for the payload; whatever the candidate prints goes to stderr instead."""
    sys.stdout.flush()
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    return channel


def _descendants() -> list[int]:
    pids: list[int] = []
    with contextlib.suppress(OSError):
        for tid in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError), open(f"/proc/self/task/{tid}/children") as f:
                pids += [int(p) for p in f.read().split()]
    return pids


def stop_descendants() -> None:
    """SIGKILL and reap every process the children left (daemons included: they were reparented to this
    process, their subreaper), until none is left."""
    for _ in range(10_000):
        pids = _descendants()
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in pids:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def run_child(evaluator: str | Path, editable: str, payload: bytes = b"", *, timeout_s: float) -> tuple[bytes | None, str]:  # fmt: skip
    """Run `evaluator --child` on the candidate in a fresh scratch directory holding only the evaluator and
    `editable` (both from the evaluator's folder), `payload` on its stdin: (its output, "") or (None, why)."""
    here = Path(evaluator).resolve().parent
    if sys.platform == "linux":  # orphans of the child come to us, so that none outlives it
        ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    scratch = Path(tempfile.mkdtemp(prefix="candidate-"))
    try:
        for name in (Path(evaluator).name, editable):
            shutil.copy(here / name, scratch)
        env = {**os.environ, "TMPDIR": str(scratch), "HOME": str(scratch)}
        cmd = [sys.executable, Path(evaluator).name, CHILD_FLAG]
        # files, not pipes: a daemon the child leaves holding them cannot keep this side waiting
        with (
            tempfile.TemporaryFile() as inp,
            tempfile.TemporaryFile() as out,
            tempfile.TemporaryFile() as err,
        ):
            inp.write(payload)
            inp.seek(0)
            proc = subprocess.Popen(cmd, cwd=scratch, stdin=inp, stdout=out, stderr=err, env=env,
                                    start_new_session=True)  # fmt: skip
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                return None, f"the candidate ran past {timeout_s:g} s and was stopped"
            finally:
                stop_descendants()
            stdout, stderr = (f.seek(0) or f.read() for f in (out, err))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if proc.returncode == -signal.SIGKILL:  # the memory cgroup's OOM killer is what sends SIGKILL here
        return None, (
            "the candidate was killed (SIGKILL), most likely by the memory limit: use less memory "
            "(smaller arrays or models, fewer copies)"
        )
    if proc.returncode != 0:
        err = stderr.decode(errors="replace").strip().splitlines()
        last = _bounded(err[-1]) if err else "no error output"
        if "MemoryError" in last:  # the per-process memory limit, where no memory cgroup caps the tree
            return None, f"the candidate ran out of memory (the memory limit): use less memory; {last}"
        return None, f"the candidate crashed (exit code {proc.returncode}): {last}"
    if not stdout:
        return None, "the candidate exited without returning anything (sys.exit or os._exit in the program?)"
    return stdout, ""


def serve(child: Callable[[bytes], bytes]) -> None:
    """The child side: confine this process, read the payload, return `child(payload)` on the reserved
    stdout. A kernel without Landlock is said on stderr, and the child runs unconfined."""
    from arts.tasks.confine import confine

    if why := confine(Path.cwd()):
        print(f"warning: {why}", file=sys.stderr)
    channel = reserve_stdout()
    payload = sys.stdin.buffer.read()
    channel.write(child(payload))
    channel.flush()


def main(score: Callable[[], Score], child: Callable[[bytes], bytes]) -> None:
    """An evaluator's entry point: `--child` runs the candidate's side, anything else scores and writes
    result.json."""
    if sys.argv[1:] == [CHILD_FLAG]:
        serve(child)
        return
    Path("result.json").unlink(missing_ok=True)
    write_result(*score())
