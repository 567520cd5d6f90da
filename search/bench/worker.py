"""One bench run in its own process: `python -m arts.search.bench.worker RUN_DIR`.

The bench starts one worker per run, so a run that crashes, or a model that runs out of memory, ends that
run only; and each run loads its model once, fresh, since a test-time-trained run changes its weights
and must not hand them to the next. The worker reads the job from the run folder (`plan.JOB_FILE`),
records when it started (`plan.SESSIONS_FILE`), then continues the run from its store if one exists
(`resume_run`), else starts it (`start_run`). Its exit status is the bench's only news of a failure;
the traceback is in the folder's log.

On Linux the worker asks the kernel to kill it when the bench process dies (even by SIGKILL), so a killed
bench leaves no worker behind holding a run's lock.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import time
from pathlib import Path

from arts.search.bench.plan import JOB_FILE, SESSIONS_FILE, folder_state

PR_SET_PDEATHSIG = 1
PARENT_VAR = "ARTS_BENCH_PID"
"""The bench's pid, set by the bench: a worker whose bench died while it started finds itself an orphan."""


def die_with_parent() -> None:
    """Have the kernel send SIGKILL to this process when its parent exits (Linux; elsewhere a no-op)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return


def run_job(run_dir: Path) -> dict:
    """Start or continue the run in `run_dir` and return its summary."""
    from arts.search.config import load_config
    from arts.search.run import resume_run, start_run

    def log(line: str) -> None:
        print(line, flush=True)

    job = json.loads((run_dir / JOB_FILE).read_text())
    with (run_dir / SESSIONS_FILE).open("a") as f:
        f.write(json.dumps({"start": time.time(), "pid": os.getpid()}) + "\n")
    if folder_state(run_dir) == "resumable":
        return resume_run(run_dir, log=log)
    return start_run(load_config(None, job["overrides"]), run_dir, log=log)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m arts.search.bench.worker RUN_DIR", file=sys.stderr)
        return 2
    parent = int(os.environ.get(PARENT_VAR, os.getppid()))
    die_with_parent()
    if os.getppid() != parent:  # the bench died before the request took effect (even before we started)
        return 1
    summary = run_job(Path(args[0]))
    print(f"finished: {summary['stopped_because']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
