"""The sandbox's system-call filter: a classic BPF program for bubblewrap's `--seccomp FD`.

Every process of an evaluation (the launcher, the evaluator, the candidate and all they start) runs under
it; the kernel keeps it across fork and exec and no process can remove it. It refuses, with EPERM, the
calls by which one process of the sandbox reaches into another (ptrace, process_vm_readv/writev,
pidfd_getfd, kcmp) and calls that only widen the kernel's attack surface or change the sandbox itself
(namespaces, mounts, keyrings, bpf, perf, io_uring, userfaultfd, modules, kexec). A call made with another
architecture's numbering (i386 `int 0x80`, x32) cannot slip past the table: a foreign architecture kills
the process, an x32 number is refused with ENOSYS.

Built by hand (no libseccomp binding is needed at run time): the tables below are the kernel's own numbers
for x86_64 and aarch64; tests check them against libseccomp where it is installed. On any other
architecture `program()` returns None and runs go without a filter (the isolation level says so).

Not done here: passing the program to bubblewrap (`tasks.process`), deciding when it applies
(`tasks.isolation`).
"""

from __future__ import annotations

import errno
import platform
import struct

# name -> (x86_64, aarch64) system call numbers
DENIED: dict[str, tuple[int, int]] = {
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "pidfd_getfd": (438, 438),
    "kcmp": (312, 272),
    "process_madvise": (440, 440),
    "perf_event_open": (298, 241),
    "bpf": (321, 280),
    "userfaultfd": (323, 282),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "unshare": (272, 97),
    "setns": (308, 268),
    "open_by_handle_at": (304, 265),
    "name_to_handle_at": (303, 264),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "reboot": (169, 142),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "acct": (163, 89),
    "quotactl": (179, 60),
    "syslog": (103, 116),
    "vhangup": (153, 58),
}
"""System calls refused inside the sandbox."""

ARCHES = {"x86_64": (0xC000003E, 0), "aarch64": (0xC00000B7, 1)}  # AUDIT_ARCH_*, column in DENIED
X32_BIT = 0x40000000

_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_ALLOW, _KILL_PROCESS, _ERRNO = 0x7FFF0000, 0x80000000, 0x00050000


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine: str | None = None) -> bytes | None:
    """The filter for this machine's architecture as struct sock_filter[] bytes, or None where unknown."""
    machine = machine or platform.machine()
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    if machine not in ARCHES:
        return None
    audit_arch, column = ARCHES[machine]
    numbers = sorted({row[column] for row in DENIED.values()})
    ops = [_op(_LD_W_ABS, 4), _op(_JEQ_K, audit_arch, jt=1), _op(_RET_K, _KILL_PROCESS), _op(_LD_W_ABS, 0)]
    if machine == "x86_64":  # x32 numbers name the same calls: refuse them all
        ops += [_op(_JGE_K, X32_BIT, jf=1), _op(_RET_K, _ERRNO | errno.ENOSYS)]
    for i, nr in enumerate(numbers):  # each match jumps to the final EPERM
        ops.append(_op(_JEQ_K, nr, jt=len(numbers) - i))
    ops += [_op(_RET_K, _ALLOW), _op(_RET_K, _ERRNO | errno.EPERM)]
    return b"".join(ops)
