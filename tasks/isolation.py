"""The sandbox's isolation: what an evaluated program is kept from, and what it is not.

Generated code never runs inside the search process (STYLE rule 7). This module decides how a command is
isolated and hands `tasks.process` a `Plan`: the bubblewrap command line to prefix, what the child does
between fork and exec (cgroup, limits, uid), and the in-sandbox launcher (`tasks.launch`) that guards the
result. It starts nothing itself. What this machine allows is probed once, on first use (`probe()`).

Why bubblewrap. A maintained, distribution-packaged tool builds the candidate a new root from nothing:
only what is bound in exists, instead of hiding the host's paths one by one (a blocklist always misses one:
other tasks' hidden files, other checkouts, /var/tmp, /run/lock were all reachable). It works as root and,
through user namespaces, unprivileged, so one design serves both. `scripts/setup.sh` installs it.

What the sandbox protects (level "bwrap+uid": root on Linux with bubblewrap)
- The filesystem: the root is an empty tmpfs holding, read-only, /usr (and its /bin, /lib links), the
  interpreter's prefix and site-packages, /etc/ld.so.cache; read-write only the node's working copy; a
  private, size-capped /tmp; a minimal /dev and a /proc of its own. Nothing else of the host exists there.
- Other processes: a new pid namespace, so no host process (nor its command line) is visible, and when the
  evaluator exits the kernel kills every process left in it. The evaluator is made non-dumpable by the
  launcher before its code runs, so the candidate (same uid, no capability) can neither ptrace it, read or
  write its memory (/proc/<pid>/mem), nor take its file descriptors (pidfd_getfd).
- The score: the launcher stops every other process of the sandbox, and waits until they are gone, when
  the evaluator opens result.json for writing; after the evaluator ends it reads result.json itself and
  sends it to the harness over a pipe that no other process holds. No candidate process is alive between
  the evaluator's write and that read, so none can race it (`tasks.launch`).
- The hidden files under [test]: they are copied in for the grader and deleted by the launcher when the
  grader starts its first process, so the candidate never finds them (the grader reads them first).
- The harness and the host: the run gets an unprivileged uid of its own (61000-61999, flock'ed, `lease()`)
  before bubblewrap starts, no capabilities, no network (a network namespace with nothing up), its own
  IPC and UTS namespaces; when the run ends every process of the uid is SIGKILLed and reaped.
- Resources: a memory cgroup caps the whole process tree at memory_mb (OOM kills are told apart from other
  kills by the cgroup's own counter); RLIMIT_NPROC = max_procs; RLIMIT_FSIZE = 256 MiB per file; no core
  files; /tmp is a tmpfs of at most memory_mb; a wall-clock timeout and a 64 MiB cap per output stream.
- Secrets: the environment is an allowlist (PATH, locale, TZ, CUDA_VISIBLE_DEVICES).

Levels with less (stated at the start of each run and in summary.json, never silent)
- "bwrap (user namespaces)": not root. The same namespaces and launcher, but the run keeps the user's
  uid (it may write wherever the user can within what is bound in: only the working copy), RLIMIT_NPROC
  counts all the user's processes, and memory is capped per process (RLIMIT_AS), not over the tree.
- "limits only": no bubblewrap, or user namespaces refused. Resource limits (and, as root, the uid) only:
  the candidate sees the host's filesystem and processes. Install bubblewrap (`bash scripts/setup.sh`).

What it does NOT protect against, at any level
- Disk use inside the working copy beyond the per-file cap (many files of 256 MiB each), and CPU time
  (the limits are wall-clock).
- A non-Python evaluate command: the launcher can neither make it non-dumpable across exec nor see when it
  writes result.json, so a candidate daemon may race it; its hidden files stay readable under [test].
- An evaluator that imports or runs the candidate's code in its own process (the evaluator's design is the
  guard there, DESIGN.md), kernel exploits and side channels; loopback is down (no torch.distributed).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import os
import pwd
import resource
import shutil
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
LAUNCHER = Path(__file__).with_name("launch.py")
LAUNCHER_IN_SANDBOX = "/run/arts/launch.py"
_NEWNS, _PR_SET_CHILD_SUBREAPER = 0x00020000, 36
_MS_BIND, _MS_REC, _MS_PRIVATE = 0x1000, 0x4000, 0x40000
_PRIVATE_ROOT = (None, b"/", None, _MS_REC | _MS_PRIVATE, None)  # our mounts never propagate to the host

Mount = tuple[bytes | None, bytes, bytes | None, int, bytes | None]  # mount(2) arguments


@dataclass(frozen=True)
class Isolation:
    """Which protections runs get on this machine; see `probe()`."""

    level: str
    """"bwrap+uid", "bwrap (user namespaces)" or "limits only"."""
    uid_drop: bool
    bwrap: bool
    memory_tree: bool
    """Whether a memory cgroup caps the whole process tree (else RLIMIT_AS per process)."""
    note: str = ""

    @property
    def network(self) -> bool:
        return self.bwrap

    @property
    def mounts(self) -> bool:
        return self.bwrap


@dataclass
class Plan:
    """How one command runs: the prefix (bubblewrap) and what the child does between fork and exec."""

    prefix: list[str] = field(default_factory=list)
    mounts: list[Mount] = field(default_factory=list)  # root only: stubs so the uid reaches the interpreter
    limits: list[tuple[int, tuple[int, int]]] = field(default_factory=list)
    uid: int | None = None
    stubs: Path | None = None  # this run's mount stubs, removed once its processes are gone
    cgroup: Path | None = None  # this run's memory cgroup, removed once its processes are gone
    launcher: bool = False  # the command runs under tasks.launch, which reports on a pipe
    hidden: list[str] = field(default_factory=list)  # deleted by the launcher at the grader's first spawn


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.unshare.argtypes = [ctypes.c_int]
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    return libc


def _try(argv: list[str], plan: Plan) -> bool:
    try:
        run = subprocess.run(argv, cwd="/", env={}, capture_output=True, preexec_fn=preexec(plan), timeout=30)
        return run.returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@functools.cache
def probe() -> Isolation:
    """What this machine allows, probed once per process on first use (no work at import time)."""
    root = sys.platform == "linux" and os.geteuid() == 0
    uid_drop = bwrap_ok = False
    check = [sys.executable, "-c", "import encodings"]
    if root:
        with uid_lease() as uid:  # the interpreter must start as that uid (it may live under a 0700 /root)
            plan = Plan(uid=uid, stubs=_stubs(uid))
            plan.mounts = _base_mounts(_interpreter_paths(), plan.stubs)
            uid_drop = _try(check, plan)
            bwrap_ok = uid_drop and shutil.which("bwrap") is not None and _try([*_bwrap_base(), *check], plan)
            remove(plan.stubs)
        if uid_drop:  # orphans of killed runs get reparented to us, and reap_uid reaps them
            _libc().prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    elif sys.platform == "linux" and shutil.which("bwrap"):
        bwrap_ok = _try([*_bwrap_base(), *check], Plan())
    memory_tree = root and _memory_cgroup_root() is not None
    if bwrap_ok:
        level = "bwrap+uid" if uid_drop else "bwrap (user namespaces)"
    else:
        level = "limits only"
    notes = {
        "bwrap+uid": "",
        "bwrap (user namespaces)": "not root: no uid of its own, memory capped per process",
        "limits only": "no bubblewrap or no user namespaces: the candidate sees the host's files and "
        "processes; install bubblewrap (bash scripts/setup.sh)",
    }
    note = notes[level] + ("" if memory_tree or not root else "; no memory cgroup: memory capped per process")
    return Isolation(level, uid_drop, bwrap_ok, memory_tree and bwrap_ok, note.strip("; "))


def network_isolated() -> bool:
    """True when runs get their own network namespace (bubblewrap)."""
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
    for sub in ("uids", "stubs"):
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
    run's processes are gone: the run's mount stubs and cgroup are removed then, and the uid freed."""
    if not probe().uid_drop:
        yield None
        return
    with uid_lease() as uid:
        try:
            yield uid
        finally:
            remove(_stubs(uid))
            if (cg := _memory_cgroup_root()) is not None:
                with contextlib.suppress(OSError):
                    (cg / f"arts-{uid}").rmdir()


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


# -- memory cgroup ------------------------------------------------------------------------------------------
@functools.cache
def _memory_cgroup_root() -> Path | None:
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


def _make_cgroup(uid: int, memory_mb: int) -> Path | None:
    base = _memory_cgroup_root()
    if base is None:
        return None
    cg = base / f"arts-{uid}"
    with contextlib.suppress(FileExistsError):
        cg.mkdir()
    limit = str(memory_mb << 20)
    v1 = (cg / "memory.limit_in_bytes").exists()
    for name in ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes") if v1 else ("memory.max",):
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


# -- the child's plan ---------------------------------------------------------------------------------------
def preexec(plan: Plan) -> Callable[[], None]:
    """Between fork and exec: join the cgroup, mount the stubs, set the limits, then drop to the uid."""
    libc = _libc() if plan.mounts else None
    procs = os.fsencode(plan.cgroup / "cgroup.procs") if plan.cgroup else None

    def child() -> None:
        if procs is not None:
            fd = os.open(procs, os.O_WRONLY)
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
        if libc is not None and libc.unshare(_NEWNS) == 0:
            for m in plan.mounts:
                libc.mount(*m)
        for res, lim in plan.limits:
            with contextlib.suppress(OSError, ValueError):  # a platform that refuses a limit runs without it
                resource.setrlimit(res, lim)
        if plan.uid is not None:  # last: the cgroup and the mounts need root
            os.setgroups([])
            os.setresgid(plan.uid, plan.uid, plan.uid)
            os.setresuid(plan.uid, plan.uid, plan.uid)

    return child


@functools.cache
def _interpreter_paths() -> tuple[Path, ...]:
    paths = {sys.executable, sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path}
    found = {Path(os.path.realpath(p)) for p in paths if p and os.path.exists(p)}
    found |= {Path(os.path.abspath(p)) for p in (sys.prefix, sys.executable)}  # a venv's links, as named
    return tuple(sorted(p for p in found if not any(p.is_relative_to(q) and p != q for q in found)))


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
    """For a uid: each directory it cannot traverse on the way to `paths` (a 0700 /root holding pyenv) is
    covered, in a mount namespace of the child's own, by a root-owned stub holding only the needed
    components, bound from the originals; deepest first, so an outer stub carries the inner ones along."""
    mounts: list[Mount] = [_PRIVATE_ROOT]
    if stubs is not None:
        remove(stubs)
        stubs.mkdir(parents=True)
        for i, (anc, names) in enumerate(_blocked(paths)):
            stub = stubs / str(i)
            for n in names:
                (stub / n).mkdir(parents=True)
                mounts.append((os.fsencode(anc / n), os.fsencode(stub / n), None, _MS_BIND | _MS_REC, None))
            os.chmod(stub, 0o711)
            mounts.append((os.fsencode(stub), os.fsencode(anc), None, _MS_BIND | _MS_REC, None))
    return mounts


def _bwrap_base() -> list[str]:
    """bubblewrap's namespaces and the read-only system: /usr, its links, the interpreter."""
    args = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--disable-userns"]
    args[4:4] = ["--unshare-user"]  # --disable-userns needs a user namespace of our own
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    args += ["--ro-bind", "/usr", "/usr", "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    args += ["--ro-bind-try", "/etc/alternatives", "/etc/alternatives"]
    for p in _interpreter_paths():
        if not p.is_relative_to("/usr"):
            args += ["--ro-bind", str(p), str(p)]
    return args + ["--proc", "/proc", "--dev", "/dev"]


def plan_for(task: Task, cfg: CommandConfig, workdir: Path, uid: int | None, *, launcher: bool = False,
             hidden: list[str] | None = None) -> Plan:  # fmt: skip
    """How to run `cfg` in `workdir` as `uid` (None: as ourselves). `launcher`: under `tasks.launch`, which
    guards result.json and deletes `hidden` (paths in the working copy) at the command's first spawn."""
    iso, nproc = probe(), cfg.max_procs
    # RLIMIT_NPROC counts all threads of the user: without a uid of its own, add those already running.
    if uid is None and os.path.isdir("/proc"):
        running = sum(len(os.listdir(f"/proc/{pid}/task")) for pid, _, _ in _procs_of(os.getuid()))
        hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
        nproc = nproc + running if hard == resource.RLIM_INFINITY else min(nproc + running, hard)
    plan = Plan(uid=uid)
    if uid is not None and iso.memory_tree:
        plan.cgroup = _make_cgroup(uid, cfg.memory_mb)
    limits = {"FSIZE": FILE_LIMIT, "CORE": 0, "NPROC": nproc}
    if plan.cgroup is None:
        limits["AS"] = cfg.memory_mb << 20
    plan.limits = [(getattr(resource, f"RLIMIT_{k}"), (v, v)) for k, v in limits.items()]
    if uid is not None:
        plan.stubs = _stubs(uid)
        plan.mounts = _base_mounts((*_interpreter_paths(), workdir), plan.stubs)
    if not iso.bwrap:
        return plan
    plan.launcher, plan.hidden = launcher, list(hidden or [])
    plan.prefix = [*_bwrap_base(), "--size", str(cfg.memory_mb << 20), "--tmpfs", "/tmp"]
    plan.prefix += ["--bind", str(workdir), str(workdir), "--chdir", str(workdir)]
    if launcher:
        plan.prefix += ["--ro-bind", str(LAUNCHER), LAUNCHER_IN_SANDBOX]
    plan.prefix += ["--remount-ro", "/"]  # the new root itself: nothing can be created beside the binds
    return plan


def environment(cfg: CommandConfig, workdir: Path) -> dict[str, str]:
    """The child's environment: an allowlist, never a copy of os.environ, so tokens and keys stay out."""
    env = {k: os.environ[k] for k in PASS_VARS if k in os.environ}
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", os.defpath)])
    env |= {"HOME": str(workdir), "TMPDIR": str(workdir / ".tmp"), "PYTHONDONTWRITEBYTECODE": "1"}
    env |= {"PYTHONHASHSEED": "0", "PYTHONUNBUFFERED": "1"}  # unbuffered: the tails show the last words
    return env | dict.fromkeys(THREAD_VARS, str(cfg.threads))  # torch takes its thread count from OMP
