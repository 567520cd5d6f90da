"""The sandbox's isolation: what an evaluated program is kept from, and what it is not.

Generated code never runs inside the search process (STYLE rule 7). This module decides how a command is
isolated and hands the child a `Plan` (namespaces, mounts, resource limits, uid) that it applies between
fork and exec; it starts nothing itself. Running the command (timeouts, output tails, killing what is
left) is `tasks.process`; preparing its working copy is `tasks.workcopy`; scoring an evaluation is
`tasks.evaluate`. What this machine allows is probed once, on first use (`probe()`), never at import.

What the sandbox protects (as root on Linux, unless said otherwise)
- The harness: the program runs as a per-run unprivileged uid (61000-61999, flock'ed, `lease()`), in a
  new session; when the run ends its process group and every process of that uid, escaped daemons too,
  are SIGKILLed, and the harness, a child subreaper, reaps the orphans (an init that does not reap, in
  containers and VMs, would keep them).
- The machine's resources: RLIMIT_AS = memory_mb, RLIMIT_NPROC = max_procs (threads count), RLIMIT_FSIZE
  = 256 MiB, no core files, thread variables = threads; a wall-clock timeout and a 64 MiB cap per output
  stream (`tasks.process`). Without root too.
- Secrets: the environment is an allowlist (PATH, locale, TZ, CUDA_VISIBLE_DEVICES): no token or key
  leaks in. Without root too.
- The network: a new network namespace with nothing up, not even loopback.
- The task's hidden files and the host's scratch space: in a new mount namespace the task directory is
  covered by an empty one, /tmp and /dev/shm are private tmpfs of memory_mb (unless the working copy or
  interpreter is there), and directories the uid cannot traverse on the way to the interpreter or working
  copy (a 0700 /root holding pyenv) are covered by stubs exposing only that path. A new IPC namespace.
- The next run: material is re-copied root-owned and read-only into sticky directories the uid may add
  to but not delete from, stray code is swept, and root never follows a planted symlink (`tasks.workcopy`).

What it does NOT protect against
- Evaluator and candidate share one uid: while both run, a hostile candidate can signal the evaluator or
  race to rewrite result.json. Evaluators must keep the score out of the candidate's reach (DESIGN.md).
- Reads of world-readable files elsewhere: the source tree, other nodes' working copies and, without a
  mount namespace, the task's hidden files by absolute path (chmod o-r them). In split="test" the program
  can read the hidden files and copy them into the working copy.
- Without root: no uid drop (the program writes wherever the user can; RLIMIT_NPROC counts all the
  user's processes), no namespaces (no network cut), and descendants that leave the process group survive.
- RLIMIT_AS bounds each process, not their sum, and CUDA needs a large address space; RLIMIT_FSIZE bounds
  each file, not the disk. Time limits are wall-clock; CPU use is not capped.
- Kernel exploits, side channels, what /proc shows of other processes; and with loopback down, programs
  that need localhost (torch.distributed) fail.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import os
import pwd
import resource
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from arts.tasks.base import CommandConfig, Task
from arts.tasks.workcopy import remove

UIDS = range(61000, 62000)
FILE_LIMIT = 256 << 20
PASS_VARS = ("PATH", "LANG", "LC_ALL", "TZ", "CUDA_VISIBLE_DEVICES")
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")
_NEWNS, _NEWIPC, _NEWNET, _PR_SET_CHILD_SUBREAPER = 0x00020000, 0x08000000, 0x40000000, 36
_OWN_NS = _NEWNS | _NEWIPC  # own mounts and SysV IPC: whatever the run leaves there dies with it
_MS_NOSUID, _MS_NODEV, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x1000, 0x4000, 0x40000
_PRIVATE_ROOT = (None, b"/", None, _MS_REC | _MS_PRIVATE, None)  # our mounts never propagate to the host

Mount = tuple[bytes | None, bytes, bytes | None, int, bytes | None]  # mount(2) arguments


@dataclass(frozen=True)
class Isolation:
    """Which protections runs get on this machine; see `probe()`."""

    uid_drop: bool
    network: bool
    mounts: bool
    note: str = ""


@dataclass
class Plan:
    """What the child does between fork and exec, computed beforehand so that the child only makes syscalls."""

    unshare: int = 0
    mounts: list[Mount] = field(default_factory=list)
    limits: list[tuple[int, tuple[int, int]]] = field(default_factory=list)
    uid: int | None = None
    stubs: Path | None = None  # this run's mount stubs, removed once its processes are gone


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.unshare.argtypes = [ctypes.c_int]
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    return libc


@functools.cache
def probe() -> Isolation:
    """What this machine allows, probed once per process on first use (no work at import time)."""
    if sys.platform != "linux" or os.geteuid() != 0:
        return Isolation(False, False, False, "not root on Linux: no uid drop, no namespaces")
    libc = _libc()
    pid = os.fork()  # try the namespaces in a child, so that this process keeps its own
    if pid == 0:
        code = 0
        try:
            code |= libc.unshare(_NEWNET) == 0
            code |= (libc.unshare(_OWN_NS) == 0 and libc.mount(*_PRIVATE_ROOT) == 0) << 1
        finally:
            os._exit(code)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    network, mounts = bool(code & 1), bool(code & 2)
    with uid_lease() as uid:  # the interpreter must start as that uid (it may live under a 0700 /root)
        plan = Plan(uid=uid, stubs=_stubs(uid))
        if mounts:
            plan.unshare, plan.mounts = _OWN_NS, _base_mounts(_interpreter_paths(), plan.stubs)
        try:
            args = [sys.executable, "-c", "import encodings"]
            run = subprocess.run(args, cwd="/", env={}, capture_output=True, preexec_fn=preexec(plan))
            uid_drop = run.returncode == 0
        except (OSError, subprocess.SubprocessError):
            uid_drop = False
        remove(plan.stubs)
    if uid_drop:  # orphans of killed runs get reparented to us, and reap_uid reaps them
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    states = {"uid drop": uid_drop, "network namespace": network, "mount namespace": mounts}
    off = ", ".join(name for name, ok in states.items() if not ok)
    return Isolation(uid_drop, network, mounts, f"unavailable here: {off}" if off else "")


def network_isolated() -> bool:
    """True when runs get their own network namespace (root with CAP_SYS_ADMIN)."""
    return probe().network


# -- per-run uid --------------------------------------------------------------------------------------------
@functools.cache
def _state_dir() -> Path:
    """Root-only directory for uid locks and mount stubs; no sandbox uid may touch it."""
    d = Path("/run" if os.access("/run", os.W_OK) else tempfile.gettempdir()) / "arts-sandbox"
    d.mkdir(mode=0o700, exist_ok=True)
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o077:
        raise RuntimeError(f"{d} must be a directory owned by root with mode 0700; remove it and retry")
    for sub in ("uids", "stubs", "stubs/empty"):
        (d / sub).mkdir(mode=0o755, exist_ok=True)
    return d


def _stubs(uid: int) -> Path:
    return _state_dir() / "stubs" / str(uid)


@contextlib.contextmanager
def uid_lease() -> Iterator[int]:
    """An unprivileged uid that no concurrent run holds (flock on its lock file) and no account uses.
    The lock file holds b"1" while in use: finding it so means a harness died mid-run and left processes."""
    for uid in UIDS:
        with contextlib.suppress(KeyError):
            pwd.getpwuid(uid)
            continue  # an account owns this uid
        fd = os.open(_state_dir() / "uids" / str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            if os.pread(fd, 1, 0):
                signal_uid(uid)
                reap_uid(uid)
            os.pwrite(fd, b"1", 0)
            yield uid
            os.ftruncate(fd, 0)  # skipped when the body raised: the next holder cleans up
            return
        finally:
            os.close(fd)
    raise RuntimeError(
        f"sandbox uids {UIDS.start}-{UIDS.stop - 1} are all busy; run fewer evaluations at once"
    )


@contextlib.contextmanager
def lease() -> Iterator[int | None]:
    """The uid of one run where this machine can drop to one, else None. Leave the block only once the
    run's processes are gone: the run's mount stubs are removed then, and the uid freed."""
    if not probe().uid_drop:
        yield None
        return
    with uid_lease() as uid:
        try:
            yield uid
        finally:
            remove(_stubs(uid))


def signal_uid(uid: int) -> None:
    """SIGKILL every process of uid, escaped daemons included: a forked helper takes the uid and calls
    kill(-1), which the kernel applies under the task-list lock, so no fork slips past it."""
    pid = os.fork()
    if pid == 0:
        with contextlib.suppress(BaseException):
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)
        os._exit(0)
    os.waitpid(pid, 0)


def _procs_of(uid: int) -> list[tuple[int, str, int]]:
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
        procs = _procs_of(uid)
        for pid, state, ppid in procs:
            if ppid == me and state == "Z":
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
        if all(state == "Z" and ppid != me for _, state, ppid in procs):
            return  # what remains are zombies of other parents, beyond our reach
        if any(state != "Z" for _, state, _ in procs):
            signal_uid(uid)
        time.sleep(0.001)


# -- the child's plan ---------------------------------------------------------------------------------------
def preexec(plan: Plan) -> Callable[[], None]:
    """The function the child runs between fork and exec: namespaces and mounts, limits, then the uid."""
    libc = _libc() if plan.unshare else None

    def child() -> None:
        if libc is not None and libc.unshare(plan.unshare) == 0:
            for m in plan.mounts:
                libc.mount(*m)
        for res, lim in plan.limits:
            with contextlib.suppress(OSError, ValueError):  # a platform that refuses a limit runs without it
                resource.setrlimit(res, lim)
        if plan.uid is not None:  # last: unshare and mount need root
            os.setgroups([])
            os.setresgid(plan.uid, plan.uid, plan.uid)
            os.setresuid(plan.uid, plan.uid, plan.uid)

    return child


@functools.cache
def _interpreter_paths() -> tuple[Path, ...]:
    paths = {sys.executable, sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path}
    return tuple(sorted({Path(os.path.realpath(p)) for p in paths if p and os.path.exists(p)}))


@functools.lru_cache(maxsize=64)
def _blocked(paths: tuple[Path, ...]) -> tuple[tuple[Path, tuple[str, ...]], ...]:
    """Directories others cannot traverse on the way to paths, deepest first, each with the components that
    must stay reachable through it."""
    found: dict[Path, set[str]] = {}
    for p in paths:
        for anc in p.parents:
            with contextlib.suppress(OSError):
                if not os.stat(anc).st_mode & stat.S_IXOTH:
                    found.setdefault(anc, set()).add(p.relative_to(anc).parts[0])
    return tuple((a, tuple(sorted(found[a]))) for a in sorted(found, key=lambda a: -len(a.parts)))


def _base_mounts(paths: tuple[Path, ...], stubs: Path | None) -> list[Mount]:
    """Private propagation first, so nothing reaches the host's mounts. Then, for a uid, each blocked
    directory is covered by a root-owned stub holding only the needed components, bound from the originals;
    deepest first, so an outer stub carries the inner ones along (MS_REC). Stubs must outlive the run:
    removing a mountpoint detaches it in every namespace."""
    mounts: list[Mount] = [_PRIVATE_ROOT]
    if stubs is not None:
        remove(stubs)
        for i, (anc, names) in enumerate(_blocked(paths)):
            stub = stubs / str(i)
            for n in names:
                (stub / n).mkdir(parents=True)
                mounts.append((os.fsencode(anc / n), os.fsencode(stub / n), None, _MS_BIND | _MS_REC, None))
            os.chmod(stub, 0o711)
            mounts.append((os.fsencode(stub), os.fsencode(anc), None, _MS_BIND | _MS_REC, None))
    return mounts


def plan_for(task: Task, cfg: CommandConfig, workdir: Path, uid: int | None) -> Plan:
    """The namespaces, mounts and limits for running `cfg` in `workdir` as `uid` (None: as ourselves)."""
    iso, nproc = probe(), cfg.max_procs
    # RLIMIT_NPROC counts all threads of the user: without a uid of its own, add those already running.
    if uid is None and os.path.isdir("/proc"):
        running = sum(len(os.listdir(f"/proc/{pid}/task")) for pid, _, _ in _procs_of(os.getuid()))
        hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
        nproc = nproc + running if hard == resource.RLIM_INFINITY else min(nproc + running, hard)
    limits = {"AS": cfg.memory_mb << 20, "FSIZE": FILE_LIMIT, "CORE": 0, "NPROC": nproc}
    plan = Plan(unshare=(_NEWNET if iso.network else 0) | (_OWN_NS if iso.mounts else 0), uid=uid)
    plan.limits = [(getattr(resource, f"RLIMIT_{k}"), (v, v)) for k, v in limits.items()]
    if not iso.mounts:
        return plan
    plan.stubs = _stubs(uid) if uid is not None else None
    interp = _interpreter_paths()
    plan.mounts = _base_mounts((*interp, workdir), plan.stubs)
    root = task.root.resolve()
    if not any(p.is_relative_to(root) for p in (*interp, workdir)):  # hide the task directory (hidden files)
        plan.mounts.append(
            (os.fsencode(_state_dir() / "stubs/empty"), os.fsencode(root), None, _MS_BIND, None)
        )
    for d in ("/tmp", "/dev/shm"):
        if os.path.isdir(d) and not any(p.is_relative_to(d) for p in (*interp, workdir)):
            opts = f"size={cfg.memory_mb}m,mode=1777".encode()
            plan.mounts.append((b"tmpfs", d.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, opts))
    return plan


def environment(cfg: CommandConfig, workdir: Path) -> dict[str, str]:
    """The child's environment: an allowlist, never a copy of os.environ, so tokens and keys stay out."""
    env = {k: os.environ[k] for k in PASS_VARS if k in os.environ}
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", os.defpath)])
    env |= {"HOME": str(workdir), "TMPDIR": str(workdir / ".tmp"), "PYTHONDONTWRITEBYTECODE": "1"}
    env |= {"PYTHONHASHSEED": "0", "PYTHONUNBUFFERED": "1"}  # unbuffered: the tails show the last words
    return env | dict.fromkeys(THREAD_VARS, str(cfg.threads))  # torch takes its thread count from OMP
