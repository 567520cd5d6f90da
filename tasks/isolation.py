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
- Other processes: a new pid namespace, so no host process (nor its command line) is visible. Its init
  (pid 1) is the launcher itself (bubblewrap's `--as-pid-1`), not bubblewrap: a bubblewrap init runs as
  the candidate's uid, dumpable and unfiltered, so a candidate could ptrace it, make it exec a daemon that,
  as init, survives every kill(-1) and forges the result. The launcher makes itself non-dumpable before
  any candidate code exists, installs no signal handler (the kernel drops signals a namespace's own
  processes send its init), forks the evaluator and exits the moment the evaluator does, whereupon the
  kernel kills every process left in the namespace: a sandbox whose evaluator has exited is ended at once.
- Cross-process reach: a seccomp filter (`tasks.seccomp`), applied by bubblewrap to every process of the
  sandbox (launcher, evaluator, candidate), refuses ptrace, process_vm_readv/writev, pidfd_getfd, kcmp,
  new namespaces, mounts, keyrings, bpf, perf, io_uring and userfaultfd; a foreign syscall ABI is killed.
  With non-dumpability (which closes /proc/<pid>/mem, a path a filter cannot see) the candidate, though it
  runs as the same uid, can reach neither the launcher nor the evaluator: not their memory, descriptors,
  or the result pipe. Why both: non-dumpability alone leaves the kernel's ptrace and /proc checks as the
  only guard; the filter alone cannot stop an open() of /proc/1/mem.
- The score: the evaluator stops every other process of the sandbox, and waits until they are gone, when
  it opens result.json for writing; it copies result.json out before it starts any process after that
  write; after it ends it reads result.json itself (or takes that copy) and sends it to the harness over a
  pipe no other process holds. No candidate process is alive between the evaluator's write and that read,
  so none can race, rename over or link away the file that is read (`tasks.launch`).
- The hidden files under [test]: they are copied in for the grader and deleted by the launcher when the
  grader starts its first process, so the candidate never finds them (the grader reads them first).
- The harness and the host: the run gets an unprivileged uid of its own (61000-61999, flock'ed, `lease()`)
  before bubblewrap starts, no capabilities, no network: a network namespace of its own whose only
  interface is a private loopback (127.0.0.1 reaches the run's own sockets, never the host's); its own
  IPC and UTS namespaces; when the run ends every process of the uid is SIGKILLed and reaped.
- Resources: a memory cgroup caps the whole process tree at memory_mb (OOM kills are told apart from other
  kills by the cgroup's own counter); RLIMIT_NPROC = max_procs; RLIMIT_FSIZE = 256 MiB per file; no core
  files; /tmp is a tmpfs of at most memory_mb; the working copy may grow by at most disk_mb, counted by
  apparent size (sparse files in full), and by at most 20000 entries (empty files cost inodes), checked
  four times a second while the run lasts and once after it (`tasks.process`), what it wrote deleted when
  it went over; a wall-clock timeout and a 64 MiB cap per output stream.
- Secrets: the environment is an allowlist (PATH, locale, TZ, CUDA_VISIBLE_DEVICES).

Levels with less (stated at the start of each run and in summary.json, never silent)
- "bwrap (user namespaces)": not root. The same namespaces and launcher, but the run keeps the user's
  uid (it may write wherever the user can within what is bound in: only the working copy), RLIMIT_NPROC
  counts all the user's processes, and memory is capped per process (RLIMIT_AS), not over the tree.
- "limits only": no bubblewrap, or user namespaces refused. Resource limits (and, as root, the uid) only:
  the candidate sees the host's filesystem and processes. Install bubblewrap (`bash scripts/setup.sh`).

What it does NOT protect against, at any level
- A burst of writes between two disk checks (the working copy may overshoot disk_mb, or its entry
  count, by what a program writes in a quarter second before it is stopped and its output deleted), and
  CPU time (the limits are wall-clock).
- The command lines of the launcher and evaluator (/proc/1/cmdline): they name the interpreter's and the
  working copy's paths, which are bound in anyway; nothing else of the host.
- A non-Python evaluate command: the launcher can neither make it non-dumpable across exec nor see when it
  writes result.json, so a candidate daemon may race it; its hidden files stay readable under [test].
- An evaluator that imports or runs the candidate's code in its own process (the evaluator's design is the
  guard there, docs/tasks.md), kernel exploits and side channels; a machine without x86_64 or aarch64 runs
  without the seccomp filter.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import resource
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from arts.tasks import seccomp
from arts.tasks.base import CommandConfig, Task
from arts.tasks.uids import (
    make_cgroup,
    memory_cgroup_root,
    oom_kills,
    procs_of,
    reap_uid,
    signal_uid,
    stubs_of,
    uid_lease,
)
from arts.tasks.workcopy import remove

__all__ = ["lease", "oom_kills", "plan_for", "preexec", "probe", "reap_uid", "signal_uid"]

FILE_LIMIT = 256 << 20
PASS_VARS = ("PATH", "LANG", "LC_ALL", "TZ", "CUDA_VISIBLE_DEVICES")
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")
LAUNCHER = Path(__file__).with_name("launch.py")
LAUNCHER_IN_SANDBOX = "/run/arts/launch.py"
# the evaluator protocol (`tasks.protocol`) and what it imports, bound read-only under LIB_IN_SANDBOX (first on
# the sandbox's PYTHONPATH) so that `import arts.tasks.protocol` works there for any install, while the source
# tree's own path stays absent; these files hold no task data
LIB_IN_SANDBOX = "/run/arts/lib"
PROTOCOL = tuple(LAUNCHER.with_name(n) for n in ("__init__.py", "protocol.py", "confine.py", "tabular.py"))
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
    seccomp: bytes | None = None  # the system-call filter bubblewrap applies (`tasks.seccomp`)


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
        # orphans of our runs get reparented to us, and reap_uid reaps them; from the probe on: bwrap's
        # inner process may outlive the outer one, and an init that does not reap would keep it as a zombie
        # that counts against the uid's RLIMIT_NPROC
        _libc().prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        with uid_lease() as uid:  # the interpreter must start as that uid (it may live under a 0700 /root)
            plan = Plan(uid=uid, stubs=stubs_of(uid))
            plan.mounts = _base_mounts(_interpreter_paths(), plan.stubs)
            uid_drop = _try(check, plan)
            bwrap_ok = uid_drop and shutil.which("bwrap") is not None and _try([*_bwrap_base(), *check], plan)
            reap_uid(uid)  # kills what still runs, reaps the orphans bwrap left us
            remove(plan.stubs)
        if not uid_drop:
            _libc().prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
    elif sys.platform == "linux" and shutil.which("bwrap"):
        bwrap_ok = _try([*_bwrap_base(), *check], Plan())
    memory_tree = root and memory_cgroup_root() is not None
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
    """The interpreter, its prefixes and the sys.path entries inside them (site-packages); never another
    sys.path entry, such as a source checkout, which would bring every task's hidden files along."""
    named = {sys.executable, sys.prefix, sys.base_prefix, sys.exec_prefix}
    found = {Path(os.path.realpath(p)) for p in named if p and os.path.exists(p)}
    found |= {Path(os.path.abspath(p)) for p in (sys.prefix, sys.executable)}  # a venv's links, as named
    for p in sys.path:
        real = Path(os.path.realpath(p)) if p and os.path.exists(p) else None
        if real is not None and any(real.is_relative_to(q) for q in found if q.is_dir()):
            found.add(real)
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
            remove(stubs_of(uid))
            if (cg := memory_cgroup_root()) is not None:
                with contextlib.suppress(OSError):
                    (cg / f"arts-{uid}").rmdir()


def plan_for(task: Task, cfg: CommandConfig, workdir: Path, uid: int | None, *, launcher: bool = False,
             hidden: list[str] | None = None) -> Plan:  # fmt: skip
    """How to run `cfg` in `workdir` as `uid` (None: as ourselves). `launcher`: under `tasks.launch`, which
    guards result.json and deletes `hidden` (paths in the working copy) at the command's first spawn."""
    iso, nproc = probe(), cfg.max_procs
    # RLIMIT_NPROC counts all threads of the user: without a uid of its own, add those already running.
    if uid is None and os.path.isdir("/proc"):
        running = sum(len(os.listdir(f"/proc/{pid}/task")) for pid, _, _ in procs_of(os.getuid()))
        hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
        nproc = nproc + running if hard == resource.RLIM_INFINITY else min(nproc + running, hard)
    plan = Plan(uid=uid)
    if uid is not None and iso.memory_tree:
        plan.cgroup = make_cgroup(uid, cfg.memory_mb)
    limits = {"FSIZE": FILE_LIMIT, "CORE": 0, "NPROC": nproc}
    if plan.cgroup is None:
        limits["AS"] = cfg.memory_mb << 20
    plan.limits = [(getattr(resource, f"RLIMIT_{k}"), (v, v)) for k, v in limits.items()]
    if uid is not None:
        plan.stubs = stubs_of(uid)
        # the launcher's folder too: bwrap, run as the uid, reads it from a checkout that may sit in a 0700
        # folder (a mktemp clone); inside bwrap's own root only the launcher file is bound
        plan.mounts = _base_mounts((*_interpreter_paths(), workdir, LAUNCHER.parent), plan.stubs)
    if not iso.bwrap:
        return plan
    plan.launcher, plan.hidden, plan.seccomp = launcher, list(hidden or []), seccomp.program()
    plan.prefix = [*_bwrap_base(), "--size", str(cfg.memory_mb << 20), "--tmpfs", "/tmp"]
    if launcher:  # the launcher is the namespace's init: no bubblewrap process inside the sandbox
        plan.prefix.insert(1, "--as-pid-1")
    for p in _interpreter_paths():  # an interpreter under /tmp (a venv there) stays visible over the tmpfs
        if p.is_relative_to("/tmp"):
            plan.prefix += ["--ro-bind", str(p), str(p)]
    plan.prefix += ["--bind", str(workdir), str(workdir), "--chdir", str(workdir)]
    if launcher:
        plan.prefix += ["--ro-bind", str(LAUNCHER), LAUNCHER_IN_SANDBOX]
        plan.prefix += [a for f in PROTOCOL for a in ("--ro-bind", str(f), f"{LIB_IN_SANDBOX}/arts/tasks/{f.name}")]
    plan.prefix += ["--remount-ro", "/"]  # the new root itself: nothing can be created beside the binds
    return plan


def environment(cfg: CommandConfig, workdir: Path) -> dict[str, str]:
    """The child's environment: an allowlist, never a copy of os.environ, so tokens and keys stay out."""
    env = {k: os.environ[k] for k in PASS_VARS if k in os.environ}
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", os.defpath)])
    env |= {"HOME": str(workdir), "TMPDIR": str(workdir / ".tmp"), "PYTHONDONTWRITEBYTECODE": "1"}
    env |= {"PYTHONHASHSEED": "0", "PYTHONUNBUFFERED": "1"}  # unbuffered: the tails show the last words
    env |= {"USER": "arts", "LOGNAME": "arts"}  # getpass.getuser() without the /etc/passwd the sandbox lacks
    return env | dict.fromkeys(THREAD_VARS, str(cfg.threads))  # torch takes its thread count from OMP
