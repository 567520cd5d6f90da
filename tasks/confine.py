"""Confinement of one candidate process: what the program under search may still read, write and reach.

Called by `tasks.protocol` in every child that runs candidate code, after the evaluator's own code is
loaded and before the candidate is imported. Standard library only (it runs inside the sandbox).

Why Landlock. Inside the sandbox the candidate runs as the same uid as the evaluator and, under
bubblewrap, may create no further namespace (`--disable-userns`), so a private mount over data/ is out of
reach; and a check in Python can be undone by the code it checks. Landlock is an unprivileged kernel
allow-list that a process puts on itself and on every process it starts, and cannot lift: after
`confine()`, the candidate and its children are held by the kernel to the rules below whatever Python they
run. The evaluator never confines itself: it loads the data first, then hands each child only its share.

What it protects (kernel Landlock ABI >= 6; ABI 4-5 lack the two scopes, 1-3 the TCP rules too)
- Files: read only the system (/usr, /lib*, /bin, /etc) and the interpreter's prefixes (site-packages),
  less the arts package (the built-ins' data and generators) and scikit-learn's bundled datasets (the
  built-ins' classification splits come from them); read and write only the child's own scratch
  directory, which the evaluator deletes when the child ends. So no working copy (data/train.npz, the
  evaluator's files), no /proc but the child's own entry and the machine's cpuinfo and meminfo (libraries
  read them: threadpoolctl, which scikit-learn calls, reads /proc/self/maps), no /tmp, no /dev/shm: nothing from another fold, and no file that
  outlives the child.
- Other processes: no signal to, no ptrace of (Landlock's own rule), no abstract unix socket of, any
  process outside this child's domain, so a daemon left by an earlier fold cannot be reached (and the
  evaluator kills every leftover descendant anyway); no TCP bind or connect.
- State outside files: a seccomp filter refuses SysV IPC (shmget, semget, msgget), POSIX message queues
  and the kernel keyrings (add_key, request_key, keyctl), which would otherwise outlive the child.

What it does not protect
- Data the evaluator itself sends to the child (that is the point), and timing side channels.
- Other copies of public data elsewhere under the interpreter's prefix (a dataset a package bundles
  besides scikit-learn's); the hidden test split is never among them.
- A kernel without Landlock (before 5.13) or with it disabled: `confine()` returns a note saying so and
  the child runs unconfined; the seccomp filter is x86-64 and aarch64 only.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import platform
import struct
import sys
from pathlib import Path

_CREATE, _ADD_RULE, _RESTRICT = 444, 445, 446  # the same numbers on every architecture
_PATH_BENEATH, _VERSION = 1, 1
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1, 2, 4, 8
FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | (1 << 14) | (1 << 15)  # rights a rule on a file may carry
READ = EXECUTE | READ_FILE | READ_DIR
FS_BITS = {1: 13, 2: 14, 3: 15, 4: 15, 5: 16}  # how many access bits each ABI handles (later: 16)
SYSTEM = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/sys/devices/system/cpu")
DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random")
SYSTEM_INFO = ("/proc/cpuinfo", "/proc/meminfo")
"""Read-only facts about the machine that numeric libraries size their thread pools and caches by."""
# SysV IPC, POSIX message queues and keyrings, per architecture: state that outlives a process
_PERSISTENT = {
    0xC000003E: (29, 64, 68, 240, 248, 249, 250),  # x86-64
    0xC00000B7: (194, 190, 186, 180, 217, 218, 219),  # aarch64
}
_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}


def hidden_from_candidates() -> list[Path]:
    """What no candidate reads though it lies under the interpreter's prefix: the arts package and
    scikit-learn's bundled datasets."""
    here = Path(__file__).resolve().parent
    found = [here, here.parent] if here.parent.name == "arts" else [here]
    with contextlib.suppress(ImportError, ValueError):
        spec = importlib.util.find_spec("sklearn")
        for top in (spec and spec.submodule_search_locations) or []:
            found += [Path(top).resolve() / "datasets" / sub for sub in ("data", "descr", "images")]
    return found


def _roots() -> list[Path]:
    names = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable)}
    return [Path(os.path.realpath(p)) for p in sorted({*names, *SYSTEM}) if p and os.path.exists(p)]


def readable(roots: list[Path], denied: list[Path]) -> list[tuple[Path, int]]:
    """(path, access) rules that let `roots` be read but not `denied` (Landlock only allows, so a root
    holding a denied path is replaced by its other entries, recursively; it keeps READ_DIR, so the names
    beneath it, the denied ones too, can be listed but not read)."""
    out: list[tuple[Path, int]] = []

    def visit(p: Path) -> None:
        if any(p.is_relative_to(d) for d in denied):
            return
        if not any(d.is_relative_to(p) for d in denied):
            out.append((p, READ))
            return
        out.append((p, READ_DIR))  # its names stay listable (imports list folders), beneath too
        with contextlib.suppress(OSError), os.scandir(p) as entries:
            for e in entries:
                real = Path(os.path.realpath(e.path))
                if e.is_dir(follow_symlinks=False):
                    visit(Path(e.path))
                elif real.is_dir():
                    visit(real)
                elif not any(real.is_relative_to(d) for d in denied):
                    out.append((Path(e.path), READ))

    for r in roots:
        visit(r)
    return out


def _seccomp() -> None:
    """Refuse (EPERM) the system calls that keep state after a process ends."""
    arch = _ARCH.get(platform.machine())
    if arch is None:
        return
    nrs = _PERSISTENT[arch]
    allow, deny = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    prog = [(0x20, 0, 0, 4), (0x15, 1, 0, arch), (0x06, 0, 0, allow), (0x20, 0, 0, 0)]
    prog += [(0x15, len(nrs) - i, 0, nr) for i, nr in enumerate(nrs)]  # jump to the deny below
    prog += [(0x06, 0, 0, allow), (0x06, 0, 0, deny)]
    raw = b"".join(struct.pack("HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(raw)
    fprog = struct.pack("HP", len(prog), ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.c_char_p(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp filter refused")


def confine(scratch: Path) -> str:
    """Put this process (and all it will start) under the rules of the module docstring; `scratch` stays
    readable and writable. Returns "" when confined, else why not (the process then runs unconfined)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(_CREATE, None, 0, _VERSION) if sys.platform == "linux" else -1
    if abi < 1:
        return "this kernel has no Landlock: candidate processes are not confined"
    handled = (1 << FS_BITS.get(abi, 16)) - 1
    attr = struct.pack("QQQ", handled, 3 if abi >= 4 else 0, 3 if abi >= 6 else 0)
    attr = attr[: 8 if abi < 4 else 16 if abi < 6 else 24]
    ruleset = libc.syscall(_CREATE, ctypes.c_char_p(attr), len(attr), 0)
    if ruleset < 0:
        return (
            f"Landlock refused a ruleset (errno {ctypes.get_errno()}): candidate processes are not confined"
        )
    try:
        rules = readable(_roots(), hidden_from_candidates())
        rules += [(Path(d), READ_FILE | WRITE_FILE) for d in DEVICES] + [(scratch, handled)]
        # its own /proc entry (threadpoolctl, which scikit-learn calls, reads /proc/self/maps), no other's
        rules += [(Path(f"/proc/{os.getpid()}"), READ_FILE | READ_DIR)] + [
            (Path(p), READ_FILE) for p in SYSTEM_INFO
        ]
        for path, access in rules:
            with contextlib.suppress(OSError):
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                try:
                    access &= handled if os.path.isdir(path) else FILE_ONLY & handled
                    rule = struct.pack("=Qi", access, fd)
                    libc.syscall(_ADD_RULE, ruleset, _PATH_BENEATH, ctypes.c_char_p(rule), 0)
                finally:
                    os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return "no_new_privs refused: candidate processes are not confined"
        _seccomp()
        if libc.syscall(_RESTRICT, ruleset, 0) != 0:
            return f"Landlock refused to confine (errno {ctypes.get_errno()})"
    finally:
        os.close(ruleset)
    return ""
