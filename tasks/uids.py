"""The run's own uid and memory cgroup: leasing them, and killing every process that holds the uid.

As root each evaluation runs as an unprivileged uid no account and no concurrent run uses (61000-61999,
flock'ed), so that "every process of this run" is "every process of this uid", escaped daemons included:
`signal_uid` kills them all at once and `reap_uid` waits until they are gone. A memory cgroup per uid caps
the whole process tree, and its OOM counter tells a memory kill apart from any other.

Not done here: the namespaces and mounts (`tasks.isolation`), running anything (`tasks.process`).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import pwd
import signal
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

UIDS = range(61000, 62000)


@functools.cache
def state_dir() -> Path:
    """Root-only directory for uid locks and mount stubs; no sandbox uid may touch it."""
    d = Path("/run" if os.access("/run", os.W_OK) else tempfile.gettempdir()) / "arts-sandbox"
    d.mkdir(mode=0o700, exist_ok=True)
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o077:
        raise RuntimeError(f"{d} must be a directory owned by root with mode 0700; remove it and retry")
    for sub in ("uids", "stubs"):
        (d / sub).mkdir(mode=0o755, exist_ok=True)
    return d


def stubs_of(uid: int) -> Path:
    return state_dir() / "stubs" / str(uid)


@contextlib.contextmanager
def uid_lease() -> Iterator[int]:
    """An unprivileged uid that no concurrent run holds (flock on its lock file), no account uses and no
    process holds. The lock file holds b"1" while in use: finding it so means a harness died mid-run."""
    for uid in UIDS:
        with contextlib.suppress(KeyError):
            pwd.getpwuid(uid)
            continue  # an account owns this uid
        fd = os.open(state_dir() / "uids" / str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            if os.pread(fd, 1, 0) or procs_of(uid):
                signal_uid(uid)
                reap_uid(uid)
                if procs_of(uid):
                    # zombies whose parent is not us (an init that does not reap them) still count against
                    # RLIMIT_NPROC of the uid: a run under it could not fork, so take another
                    continue
            os.pwrite(fd, b"1", 0)
            yield uid
            os.ftruncate(fd, 0)  # skipped when the body raised: the next holder cleans up
            return
        finally:
            os.close(fd)
    raise RuntimeError(
        f"sandbox uids {UIDS.start}-{UIDS.stop - 1} are all busy; run fewer evaluations at once"
    )


def signal_uid(uid: int) -> None:
    """SIGKILL every process of uid, escaped daemons included: a forked helper takes the uid and calls
    kill(-1), which the kernel applies under the task-list lock, so no fork slips past it."""
    pid = os.fork()
    if pid == 0:
        with contextlib.suppress(BaseException):
            os.closerange(3, 1 << 16)  # inherited fds (a run's lock among them) must not outlive the parent
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)
        os._exit(0)
    os.waitpid(pid, 0)


def procs_of(uid: int) -> list[tuple[int, str, int]]:
    """(pid, state, ppid) of the processes owned by uid, zombies included."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError, IndexError):  # a process may vanish while we look
            if os.stat(f"/proc/{name}").st_uid == uid:
                fields = Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()
                found.append((int(name), fields[0].decode(), int(fields[1])))
    return found


def reap_uid(uid: int) -> None:
    """After signal_uid: wait until uid has no live process and reap the orphans reparented to us."""
    me = os.getpid()
    for _ in range(1000):
        procs = procs_of(uid)
        for pid, state, ppid in procs:
            if ppid == me and state == "Z":
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
        if all(state == "Z" and ppid != me for _, state, ppid in procs):
            return  # what remains are zombies of other parents, beyond our reach
        if any(state != "Z" for _, state, _ in procs):
            signal_uid(uid)
        time.sleep(0.001)


@functools.cache
def memory_cgroup_root() -> Path | None:
    """The memory cgroup this process lives in, if we may create children there (cgroup v1 or v2)."""
    if os.geteuid() != 0 or not os.path.isfile("/proc/self/cgroup"):
        return None
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            base = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
        elif controllers == "" and os.path.isfile("/sys/fs/cgroup/cgroup.controllers"):
            base = Path("/sys/fs/cgroup") / path.lstrip("/")
            if "memory" not in (base / "cgroup.subtree_control").read_text(errors="replace"):
                continue
        else:
            continue
        probe_dir = base / f"arts-probe-{os.getpid()}"
        try:
            probe_dir.mkdir()
            probe_dir.rmdir()
            return base
        except OSError:
            continue
    return None


def make_cgroup(uid: int, memory_mb: int) -> Path | None:
    base = memory_cgroup_root()
    if base is None:
        return None
    cg = base / f"arts-{uid}"
    with contextlib.suppress(FileExistsError):
        cg.mkdir()
    limit = str(memory_mb << 20)
    v1 = (cg / "memory.limit_in_bytes").exists()
    # v1 wants memsw >= limit at every step: raise memsw first, set the limit, then bring memsw down to it
    v1_names = ("memory.memsw.limit_in_bytes", "memory.limit_in_bytes", "memory.memsw.limit_in_bytes")
    for name in v1_names if v1 else ("memory.max",):
        with contextlib.suppress(OSError):
            (cg / name).write_text(limit)
    if not v1:
        with contextlib.suppress(OSError):
            (cg / "memory.swap.max").write_text("0")
    return cg


def oom_kills(cgroup: Path | None) -> int:
    """How many processes the memory cgroup's limit has killed so far (0 without a cgroup)."""
    if cgroup is None:
        return 0
    for name in ("memory.events", "memory.oom_control"):
        with contextlib.suppress(OSError):
            for line in (cgroup / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
    return 0
