"""Sandboxed evaluation: run a task's evaluate/test command on a node's files under limits, get an EvalResult.

Generated code never runs inside the search process (STYLE rule 7). Nothing the evaluated program does raises
here: every failure is `valid=False` with a reason (timeout, killed for memory, exit status, bad result.json).

What it does
- Working copy: removes result.json, .tmp/'s contents, __pycache__/ and stray code of earlier runs (*.py,
  *.so, *.pth neither editable nor material: they could shadow the evaluator's imports); writes the editable
  files; re-copies all material (a run cannot rewrite the next run's evaluator); adds hidden files for
  split="test" only, and removes them after. Root never follows a planted symlink (unlink and
  O_EXCL|O_NOFOLLOW writes, O_NOFOLLOW read of result.json).
- Limits: wall-clock timeout; at the end the process group and, as root, every process of the uid (escaped
  daemons too) are SIGKILLed. RLIMIT_AS = memory_mb, RLIMIT_NPROC = max_procs (threads count), RLIMIT_FSIZE =
  256 MiB, no core files. Output is drained as it comes, 20 KB tails kept, the run killed past 64 MiB on a
  stream. Thread variables = threads. The environment is an allowlist: no token or key leaks in.
- As root: a per-evaluation unprivileged uid (61000-61999, flock'ed); material root-owned and read-only in a
  sticky directory the uid may add to but not delete from; new network (nothing up, not even loopback), IPC
  and mount namespaces: the task directory hidden, /tmp and /dev/shm private size-limited tmpfs (unless the
  working copy is there), and stubs over directories the uid cannot traverse on the way to the interpreter
  or working copy (a 0700 /root holding pyenv) exposing only that path. The harness becomes a child
  subreaper and reaps killed orphans, which an init that does not reap (containers, VMs) would keep.

What it does NOT protect against
- Evaluator and candidate share one uid: while both run, a hostile candidate can signal the evaluator or race
  to rewrite result.json. Evaluators must keep the score out of the candidate's reach (DESIGN.md).
- Reads of world-readable files elsewhere: the source tree, other nodes' working copies and, without a mount
  namespace, the task's hidden files by absolute path (chmod o-r them). In split="test" the program can read
  the hidden files and copy them into the working copy.
- Without root: no uid drop (the program writes wherever the user can; RLIMIT_NPROC counts all the user's
  processes), no namespaces (no network cut), and descendants that leave the process group survive.
- RLIMIT_AS bounds each process, not their sum, and CUDA needs a large address space; RLIMIT_FSIZE bounds each
  file, not the disk. Time limits are wall-clock; CPU use is not capped.
- Kernel exploits, side channels, what /proc shows of other processes; and with loopback down, programs that
  need localhost (torch.distributed) fail.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import json
import math
import os
import pwd
import resource
import selectors
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
from typing import Literal

from arts.tasks.base import CommandConfig, EvalResult, Task

TAIL_BYTES = 20_000
OUTPUT_LIMIT = 64 << 20
FILE_LIMIT = 256 << 20
RESULT_LIMIT = 1 << 20
UIDS = range(61000, 62000)
CODE_SUFFIXES = (".py", ".pyc", ".pyo", ".pth", ".so")
PASS_VARS = ("PATH", "LANG", "LC_ALL", "TZ", "CUDA_VISIBLE_DEVICES")
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")
MEMORY_SIGNS = ("MemoryError", "allocate memory", "bad_alloc", "out of memory")
_NEWNS, _NEWIPC, _NEWNET, _PR_SET_CHILD_SUBREAPER = 0x00020000, 0x08000000, 0x40000000, 36
_OWN_NS = _NEWNS | _NEWIPC  # own mounts and SysV IPC: whatever the run leaves there dies with it
_MS_NOSUID, _MS_NODEV, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x1000, 0x4000, 0x40000
_PRIVATE_ROOT = (None, b"/", None, _MS_REC | _MS_PRIVATE, None)  # our mounts never propagate to the host
_GRACE_S = 1.0  # after the command exits, how long its pipes may still drain

Mount = tuple[bytes | None, bytes, bytes | None, int, bytes | None]  # mount(2) arguments


@dataclass(frozen=True)
class Isolation:
    """Which protections evaluations get here; see `isolation()`."""

    uid_drop: bool
    network: bool
    mounts: bool
    note: str = ""


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.unshare.argtypes = [ctypes.c_int]
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    return libc


@functools.cache
def isolation() -> Isolation:
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
    with _uid_lease() as uid:  # the interpreter must start as that uid (it may live under a 0700 /root)
        plan = _Plan(uid=uid, stubs=_state_dir() / "stubs" / str(uid))
        if mounts:
            plan.unshare, plan.mounts = _OWN_NS, _base_mounts(_interpreter_paths(), plan.stubs)
        try:
            args = [sys.executable, "-c", "import encodings"]
            run = subprocess.run(args, cwd="/", env={}, capture_output=True, preexec_fn=_preexec(plan))
            uid_drop = run.returncode == 0
        except (OSError, subprocess.SubprocessError):
            uid_drop = False
        _remove(plan.stubs)
    if uid_drop:  # orphans of killed evaluations get reparented to us, and _reap_uid reaps them
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    states = {"uid drop": uid_drop, "network namespace": network, "mount namespace": mounts}
    off = ", ".join(name for name, ok in states.items() if not ok)
    return Isolation(uid_drop, network, mounts, f"unavailable here: {off}" if off else "")


def network_isolated() -> bool:
    """True when evaluations run in their own network namespace (root with CAP_SYS_ADMIN)."""
    return isolation().network


# -- per-evaluation uid -------------------------------------------------------------------------------------
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


@contextlib.contextmanager
def _uid_lease() -> Iterator[int]:
    """An unprivileged uid that no concurrent evaluation holds (flock on its lock file) and no account uses.
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
                _signal_uid(uid)
                _reap_uid(uid)
            os.pwrite(fd, b"1", 0)
            yield uid
            os.ftruncate(fd, 0)  # skipped when the body raised: the next holder cleans up
            return
        finally:
            os.close(fd)
    raise RuntimeError(
        f"sandbox uids {UIDS.start}-{UIDS.stop - 1} are all busy; run fewer evaluations at once"
    )


def _signal_uid(uid: int) -> None:
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


def _reap_uid(uid: int) -> None:
    """After _signal_uid: wait until uid has no live process and reap the orphans reparented to us."""
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
            _signal_uid(uid)
        time.sleep(0.001)


# -- the working copy ---------------------------------------------------------------------------------------
def _remove(p: Path) -> None:
    if p.is_symlink() or (p.exists() and not p.is_dir()):
        p.unlink()
    elif p.exists():
        shutil.rmtree(p)


def _open_fresh(workdir: Path, rel: str, mode: int) -> int:
    """An fd on a new regular file at workdir/rel; whatever the program left on the way is removed first."""
    parent = workdir
    for part in Path(rel).parts[:-1]:
        parent = parent / part
        if parent.is_symlink() or (parent.exists() and not parent.is_dir()):
            parent.unlink()
        parent.mkdir(exist_ok=True)
    _remove(workdir / rel)
    return os.open(workdir / rel, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)


def _copy_in(src: Path, workdir: Path, rel: str, trust_root_owned: bool) -> None:
    """Copy a task file in, read-only. As root an identical root-owned copy stays: the uid cannot alter it."""
    st = src.stat()
    mode = 0o555 if st.st_mode & 0o111 else 0o444
    with contextlib.suppress(OSError):
        old = os.lstat(workdir / rel)
        now = (old.st_size, old.st_mtime_ns, old.st_mode, old.st_uid, old.st_nlink)
        if trust_root_owned and now == (st.st_size, st.st_mtime_ns, stat.S_IFREG | mode, 0, 1):
            return
    with open(_open_fresh(workdir, rel, mode), "wb") as out, open(src, "rb") as inp:
        shutil.copyfileobj(inp, out, 1 << 20)
        os.fchmod(out.fileno(), mode)
        os.utime(out.fileno(), ns=(st.st_atime_ns, st.st_mtime_ns))


def _sweep(workdir: Path, keep: set[str]) -> None:
    """Remove what must not survive into a run: the old result, temp files, bytecode and stray code."""
    _remove(workdir / "result.json")
    tmp = workdir / ".tmp"
    if tmp.is_symlink() or not tmp.is_dir():
        _remove(tmp)
        tmp.mkdir()
    for child in tmp.iterdir():
        _remove(child)
    for dirpath, dirnames, filenames in os.walk(workdir):
        for d in [d for d in dirnames if d == "__pycache__"]:
            _remove(Path(dirpath, d))
            dirnames.remove(d)
        for f in filenames:
            if f.endswith(CODE_SUFFIXES) and os.path.relpath(Path(dirpath, f), workdir) not in keep:
                os.unlink(Path(dirpath, f))


def _hand_over(workdir: Path, uid: int, fixed: set[str]) -> None:
    """Give the working copy to uid. Directories holding material stay root's, group-writable and sticky: the
    uid may add files there but not delete or rename root's. Material stays root-owned and read-only."""
    containers = {workdir} | {workdir / a for rel in fixed for a in Path(rel).parents if a != Path(".")}
    for dirpath, dirnames, filenames in os.walk(workdir):
        for p in (Path(dirpath, name) for name in dirnames + filenames):
            if p in containers or os.path.relpath(p, workdir) in fixed:
                continue
            st = os.lstat(p)
            if st.st_nlink > 1 and st.st_uid == 0 and not stat.S_ISDIR(st.st_mode):
                p.unlink()  # a hard link to a root file elsewhere: chown would hand that file over
            else:
                os.lchown(p, uid, uid)
    for d in containers:
        os.chown(d, 0, uid)
        os.chmod(d, 0o1770)


def _prepare(task: Task, files: dict[str, str], workdir: Path, uid: int | None, with_hidden: bool) -> None:
    material, hidden = [str(p) for p in task.material_files()], [str(p) for p in task.hidden_files()]
    for rel in files:
        if Path(rel).is_absolute() or ".." in Path(rel).parts or rel in ("", ".", *material, *hidden):
            raise ValueError(
                f"editable file {rel!r} must be a relative path in the working copy, not material"
            )
    _remove_hidden(task, workdir)
    _sweep(workdir, {os.path.normpath(p) for p in [*files, *task.config.editable, *material, *hidden]})
    for rel, text in files.items():
        with open(_open_fresh(workdir, rel, 0o644), "w", encoding="utf-8") as f:
            f.write(text)
    present = material + (hidden if with_hidden else [])
    for rel in present:
        _copy_in(task.root / rel, workdir, rel, trust_root_owned=uid is not None)
    if uid is not None:
        _hand_over(workdir, uid, set(present))


def _remove_hidden(task: Task, workdir: Path) -> None:
    for entry in task.config.hidden:
        _remove(workdir / entry.rstrip("/"))


# -- the child process --------------------------------------------------------------------------------------
@dataclass
class _Plan:
    """What the child does between fork and exec, computed here so that the child only makes syscalls."""

    unshare: int = 0
    mounts: list[Mount] = field(default_factory=list)
    limits: list[tuple[int, tuple[int, int]]] = field(default_factory=list)
    uid: int | None = None
    stubs: Path | None = None  # this evaluation's mount stubs, removed once its processes are gone


def _preexec(plan: _Plan) -> Callable[[], None]:
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
        _remove(stubs)
        for i, (anc, names) in enumerate(_blocked(paths)):
            stub = stubs / str(i)
            for n in names:
                (stub / n).mkdir(parents=True)
                mounts.append((os.fsencode(anc / n), os.fsencode(stub / n), None, _MS_BIND | _MS_REC, None))
            os.chmod(stub, 0o711)
            mounts.append((os.fsencode(stub), os.fsencode(anc), None, _MS_BIND | _MS_REC, None))
    return mounts


def _plan(task: Task, cfg: CommandConfig, workdir: Path, uid: int | None) -> _Plan:
    iso, nproc = isolation(), cfg.max_procs
    # RLIMIT_NPROC counts all threads of the user: without a uid of its own, add those already running.
    if uid is None and os.path.isdir("/proc"):
        running = sum(len(os.listdir(f"/proc/{pid}/task")) for pid, _, _ in _procs_of(os.getuid()))
        hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
        nproc = nproc + running if hard == resource.RLIM_INFINITY else min(nproc + running, hard)
    limits = {"AS": cfg.memory_mb << 20, "FSIZE": FILE_LIMIT, "CORE": 0, "NPROC": nproc}
    plan = _Plan(unshare=(_NEWNET if iso.network else 0) | (_OWN_NS if iso.mounts else 0), uid=uid)
    plan.limits = [(getattr(resource, f"RLIMIT_{k}"), (v, v)) for k, v in limits.items()]
    if not iso.mounts:
        return plan
    plan.stubs = _state_dir() / "stubs" / str(uid) if uid is not None else None
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


def _environment(cfg: CommandConfig, workdir: Path) -> dict[str, str]:
    """An allowlist, never a copy of os.environ: tokens, keys and credentials stay out."""
    env = {k: os.environ[k] for k in PASS_VARS if k in os.environ}
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", os.defpath)])
    env |= {"HOME": str(workdir), "TMPDIR": str(workdir / ".tmp"), "PYTHONDONTWRITEBYTECODE": "1"}
    env |= {"PYTHONHASHSEED": "0", "PYTHONUNBUFFERED": "1"}  # unbuffered: the tails show the last words
    return env | dict.fromkeys(THREAD_VARS, str(cfg.threads))  # torch takes its thread count from OMP


# -- running and judging ------------------------------------------------------------------------------------
@dataclass
class _Outcome:
    returncode: int | None = None
    wall_s: float = 0.0
    stdout: str = ""
    stderr: str = ""
    stopped: str = ""  # "timeout", "output", or why the command could not start


def _pump(proc: subprocess.Popen, tails: dict[int, bytearray], until: float, stop: Callable[[], None]) -> str:
    """Read both pipes as data comes (the child never blocks on a full pipe), keeping only tails, until the
    command exits and its pipes drain. Returns "timeout", "output" (too much of it) or ""."""
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


def _execute(argv: list[str], cfg: CommandConfig, workdir: Path, plan: _Plan) -> _Outcome:
    start = time.monotonic()
    try:
        proc = subprocess.Popen(argv, cwd=workdir, env=_environment(cfg, workdir), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                preexec_fn=_preexec(plan))  # fmt: skip
    except (OSError, subprocess.SubprocessError) as e:
        return _Outcome(stopped=f"could not start {argv[0]!r}: {e}")
    assert proc.stdout is not None and proc.stderr is not None
    tails = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    ended: list[float] = []

    def stop() -> None:  # once: the process group, then (as root) every process of the uid
        if not ended:
            ended.append(time.monotonic() - start)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # the unreaped leader keeps its group id valid
            if plan.uid is not None:
                _signal_uid(plan.uid)

    try:
        why = _pump(proc, tails, start + cfg.timeout_s, stop)
    finally:
        stop()
        proc.stdout.close()
        proc.stderr.close()
        proc.wait()
        if plan.uid is not None:
            _reap_uid(plan.uid)
    out, err = (bytes(t[-TAIL_BYTES:]).decode("utf-8", "replace") for t in tails.values())
    return _Outcome(proc.returncode, ended[0], out, err, why)


def _failure(o: _Outcome, cfg: CommandConfig) -> str:
    """Why the command failed, or "" if it exited with status 0."""
    if o.stopped == "timeout":
        return f"timeout after {cfg.timeout_s:g}s"
    if o.stopped == "output":
        return f"output limit exceeded ({OUTPUT_LIMIT >> 20} MiB on one stream)"
    if o.stopped or o.returncode == 0:
        return o.stopped
    rc, memory = o.returncode or 0, f"killed: memory limit ({cfg.memory_mb} MiB)"
    last = next((line.strip() for line in reversed(o.stderr.splitlines()) if line.strip()), "")[:300]
    out_of_memory = any(s in o.stderr for s in MEMORY_SIGNS)
    if rc < 0:
        name = signal.Signals(-rc).name if -rc in signal.valid_signals() else f"signal {-rc}"
        # Under RLIMIT_AS a failed allocation often ends in SIGSEGV; a SIGKILL not ours is the OOM killer.
        crash = -rc in (signal.SIGKILL, signal.SIGSEGV, signal.SIGBUS)
        return f"{memory} ({name})" if out_of_memory or crash else f"killed by {name}"
    if out_of_memory:
        return f"{memory}: {last}"
    return f"exit status {rc}: {last}" if last else f"exit status {rc}"


def _read_result(path: Path, require_score: bool) -> dict | str:
    """The checked fields of result.json, or why it is unusable."""
    try:  # O_NOFOLLOW: root follows no planted symlink; O_NONBLOCK: nor waits on a planted FIFO
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return "no result.json written"
    except OSError as e:
        return f"malformed result.json: cannot open it ({e.strerror})"
    with open(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "malformed result.json: not a regular file"
        raw = f.read(RESULT_LIMIT + 1)
    if len(raw) > RESULT_LIMIT:
        return f"malformed result.json: larger than {RESULT_LIMIT >> 20} MiB"
    try:
        data = json.loads(raw)
        metrics = data.get("metrics", {}) if isinstance(data, dict) else None
        # NaN/Infinity in metrics become null: metrics must stay strict JSON for the store.
        metrics = json.loads(json.dumps(metrics), parse_constant=lambda _: None)
    except (ValueError, RecursionError) as e:
        return f"malformed result.json: {e}"
    if not isinstance(data, dict):
        return "malformed result.json: the top level must be an object"
    valid, score, message = data.get("valid"), data.get("score"), data.get("message", "")
    if not isinstance(valid, bool) or not isinstance(metrics, dict) or not isinstance(message, str):
        return "malformed result.json: 'valid' must be true or false, 'metrics' an object, 'message' a string"
    if isinstance(score, bool) or not isinstance(score, int | float | None):
        return "malformed result.json: 'score' must be a number or null"
    if score is not None:  # an int beyond the float range counts as infinite (float() would raise)
        score = float(score) if abs(score) <= sys.float_info.max else math.inf
        if not math.isfinite(score):
            return "non-finite score"
    if valid and score is None and require_score:
        return "valid=true but score is null"
    return {"valid": valid, "score": score, "metrics": metrics, "message": message[:4000]}


def run_evaluation(
    task: Task, files: dict[str, str], workdir: Path, *, split: Literal["evaluate", "test"] = "evaluate"
) -> EvalResult:
    """Write `files` (editable path -> text) into `workdir`, run the split's command there in the sandbox and
    return its checked result. Never raises for what the evaluated program does; raises ValueError for a task
    without that split's section or a file path outside the working copy."""
    if split not in ("evaluate", "test"):
        raise ValueError(f"split must be 'evaluate' or 'test', not {split!r}")
    cfg = task.config.evaluate if split == "evaluate" else task.config.test
    if cfg is None:
        raise ValueError(f"task {task.name!r} ({task.config.kind}) has no [{split}] section to run")
    argv = [sys.executable if cfg.command[0] in ("python", "python3") else cfg.command[0], *cfg.command[1:]]
    Path(workdir).mkdir(parents=True, exist_ok=True)
    workdir = Path(workdir).resolve()
    with _uid_lease() if isolation().uid_drop else contextlib.nullcontext() as uid:
        try:
            _prepare(task, files, workdir, uid, with_hidden=split == "test")
            o = _execute(argv, cfg, workdir, _plan(task, cfg, workdir, uid))
        finally:  # the run's processes are gone by now
            _remove_hidden(task, workdir)  # hidden files never stay in a working copy
            if uid is not None:
                _remove(_state_dir() / "stubs" / str(uid))
    tails = {
        "wall_s": round(o.wall_s, 4),
        "returncode": o.returncode,
        "stdout_tail": o.stdout,
        "stderr_tail": o.stderr,
    }
    if reason := _failure(o, cfg):
        return EvalResult(valid=False, reason=reason, **tails)
    got = _read_result(
        workdir / "result.json", require_score=split == "evaluate" and task.config.kind == "optimize"
    )
    if isinstance(got, str):
        return EvalResult(valid=False, reason=got, **tails)
    reason = "" if got["valid"] else f"evaluator: {got['message'][:300] or 'result marked invalid'}"
    return EvalResult(**got, reason=reason, **tails)
