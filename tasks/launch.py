"""The evaluation's first process inside the sandbox: it guards the evaluator and carries its result out.

Run by `tasks.process` as `python launch.py FD HIDDEN COMMAND...` under bubblewrap's `--as-pid-1`
(standard library only: it runs inside the sandbox, where arts is not installed). It is the init (pid 1)
of the sandbox's pid namespace: non-dumpable and under the seccomp filter before anything else runs, so no
candidate can ptrace it, write its memory (/proc/1/mem) or take its descriptors, and the kernel drops every
signal a process of the namespace sends it (it handles none). It forks the evaluator (pid 2), reaps every
orphan while the evaluator runs, and exits the moment the evaluator does: the kernel then kills whatever
else still runs in the namespace, so nothing outlives the evaluator. For a Python evaluator
(`python script.py ...`) the evaluator process:
1. inherits non-dumpability, so the candidate, though it runs as the same uid, cannot reach it either;
2. keeps the result pipe FD out of every child (close-on-exec, and closed after a bare fork);
3. deletes HIDDEN (the [test] split's hidden files, os.pathsep-separated) when the grader starts its first
   child process: the grader has read them by then, and the candidate never finds them;
4. stops every other process of the sandbox's pid namespace, and waits until they are gone, whenever the
   evaluator opens, renames or links onto result.json for writing: nothing can race the write; and copies
   result.json out (with no other process alive) whenever it starts a process after such a write;
5. runs the evaluator (runpy), then stops every other process again and writes {"exit": code, "result":
   text or null, "error": why there is none} to FD: result.json as the evaluator last left it, or the copy
   taken before a later process could touch it.
A non-Python command runs as a child, with steps 4-5 after it ends (so a daemon can race its write).

Not done here: judging the result (`tasks.evaluate`); isolation itself (`tasks.isolation`).
"""

import contextlib
import ctypes
import json
import os
import runpy
import signal
import subprocess
import sys
import time
import traceback

PR_SET_DUMPABLE = 4
RESULT_LIMIT = (1 << 20) + 1
SPAWNS = {"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.exec", "os.system", "os.spawn"}
WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def others() -> list[int]:
    """Live processes of this pid namespace other than its init (1) and us."""
    me, found = os.getpid(), []
    for name in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError, IndexError):
            state = open(f"/proc/{name}/stat", "rb").read().rsplit(b")", 1)[1].split()[0]
            if int(name) not in (1, me) and state not in (b"Z", b"X"):
                found.append(int(name))
    return found


def stop_others() -> None:
    """SIGKILL every other process we may signal (kill(-1) spares init and us), until none is left."""
    deadline = time.monotonic() + 5
    while others() and time.monotonic() < deadline:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(-1, signal.SIGKILL)
        time.sleep(0.001)


def read_result(path: str) -> tuple[str | None, str]:
    """(result.json's text, "") or (None, why it cannot be read); no link followed, no FIFO waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None, "no result.json written"
    except OSError as e:
        return None, f"malformed result.json: cannot open it ({e.strerror})"
    with open(fd, "rb") as f:
        if not (os.fstat(fd).st_mode & 0o170000) == 0o100000:  # a regular file only
            return None, "malformed result.json: not a regular file"
        return f.read(RESULT_LIMIT).decode("utf-8", "replace"), ""


def init(fd: int, hidden: list[str], cmd: list[str]) -> int:
    """As the namespace's pid 1: fork the evaluator, reap orphans until it exits, return its status. Our
    exit then ends the namespace: the kernel SIGKILLs every process left in it."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)  # no handler: the kernel drops these when the candidate sends them
    evaluator = os.fork()
    if evaluator == 0:
        os._exit(evaluate(fd, hidden, cmd))
    os.close(fd)  # the evaluator holds the only write end: the harness reads EOF once it is gone
    while True:
        with contextlib.suppress(InterruptedError):
            pid, status = os.wait()
            if pid == evaluator:
                code = os.waitstatus_to_exitcode(status)
                return code if code >= 0 else 128 - code  # as a shell tells a death by signal


def evaluate(fd: int, hidden: list[str], cmd: list[str]) -> int:
    """Run the evaluator in this process and write its report to fd (see the module's steps 2-5)."""
    os.set_inheritable(fd, False)
    os.register_at_fork(after_in_child=lambda: os.close(fd))
    result = os.path.abspath("result.json")
    state: dict = {"clean": False, "copy": None}  # clean: no other process ran since the evaluator wrote
    python = len(cmd) >= 2 and cmd[1].endswith(".py") and os.path.basename(cmd[0]).startswith("python")

    def is_result(path: object) -> bool:
        with contextlib.suppress(TypeError, ValueError):
            return os.path.abspath(os.fsdecode(path)) == result  # type: ignore[arg-type]
        return False

    def wrote() -> None:
        stop_others()
        state["clean"] = True

    def hook(event: str, args: tuple) -> None:
        if event in SPAWNS:
            if hidden:
                for rel in hidden:
                    with contextlib.suppress(OSError):
                        subprocess_free_remove(rel)
                hidden.clear()
            if state["clean"]:  # a process about to start could rewrite the result: keep it as it is now
                state["copy"], state["clean"] = read_result(result), False
        elif event == "open" and is_result(args[0]):
            mode, flags = args[1] or "", args[2] or 0
            if any(c in str(mode) for c in "wax+") or flags & WRITES:
                wrote()
        elif (
            event == "os.mkfifo"
            and is_result(args[0])
            or (event in ("os.rename", "os.link", "os.symlink") and is_result(args[1]))
        ):
            wrote()

    code = run(cmd, hook) if python else run_child(cmd)
    stop_others()
    if state["clean"] or not python:
        text, why = read_result(result)
    else:
        text, why = state["copy"] or (None, "no result.json written")
    with contextlib.suppress(OSError):
        os.write(fd, json.dumps({"exit": code, "result": text, "error": why}).encode())
    return code


def run(cmd: list[str], hook) -> int:
    """Run a Python evaluator in this process under the audit hook; its exit status."""
    sys.addaudithook(hook)
    sys.argv = cmd[1:]
    sys.path[0] = os.path.dirname(os.path.abspath(cmd[1]))
    code = 1
    try:
        runpy.run_path(cmd[1], run_name="__main__")
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
        if not isinstance(e.code, int | None):
            print(e.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    return code


def run_child(cmd: list[str]) -> int:
    try:
        return subprocess.run(cmd).returncode
    except OSError as e:
        print(f"could not start {cmd[0]!r}: {e}", file=sys.stderr)
        return 127


def main() -> int:
    fd, hidden, cmd = int(sys.argv[1]), [h for h in sys.argv[2].split(os.pathsep) if h], sys.argv[3:]
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    if os.getpid() == 1:
        return init(fd, hidden, cmd)
    return evaluate(fd, hidden, cmd)  # not the namespace's init (a run without --as-pid-1)


def subprocess_free_remove(rel: str) -> None:
    """rm -r without following links and without starting a process (that would re-enter the hook)."""
    path = os.path.join(os.getcwd(), rel.rstrip("/"))
    if os.path.islink(path) or not os.path.isdir(path):
        os.unlink(path)
        return
    for dirpath, dirnames, filenames in os.walk(path, topdown=False):
        for name in filenames:
            os.unlink(os.path.join(dirpath, name))
        for name in dirnames:
            p = os.path.join(dirpath, name)
            os.unlink(p) if os.path.islink(p) else os.rmdir(p)
    os.rmdir(path)


if __name__ == "__main__":
    os._exit(main())
