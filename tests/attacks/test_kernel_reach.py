"""Attacks through the kernel's wider surface: system calls that reach another process, build a new
namespace or mount, widen the kernel's attack surface, or lift a limit. Each is refused (EPERM, or ENOSYS
for the x32 numbering) and the evaluation still ends with the evaluator's own verdict."""

import errno
import platform

import pytest
from attack_kit import attack

from arts.tasks.seccomp import DENIED, program

CALL = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
rc = libc.syscall(NR, 0, 0, 0, 0, 0)
open("note.txt", "w").write(f"{rc} {ctypes.get_errno()}")
"""
ARCH_COLUMN = {"x86_64": 0, "aarch64": 1}.get(platform.machine())
# each a separate attack: reach another process, make a namespace or mount, or widen the kernel's surface
CALLS = ["process_vm_writev", "process_vm_readv", "pidfd_getfd", "kcmp", "unshare", "setns", "mount",
         "umount2", "pivot_root", "chroot", "io_uring_setup", "bpf", "perf_event_open", "userfaultfd",
         "keyctl", "open_by_handle_at", "fsopen", "open_tree", "init_module"]  # fmt: skip


@pytest.fixture
def filtered(bwrap) -> None:
    if program() is None:
        pytest.skip(f"no seccomp filter for {platform.machine()}")


@pytest.mark.parametrize("name", CALLS)
def test_system_call_is_refused(task, filtered, name):
    res = attack(task, CALL.replace("NR", str(DENIED[name][ARCH_COLUMN])))
    rc, err = res.message.split()
    assert res.valid and res.score == 1.0 and rc == "-1" and int(err) == errno.EPERM, (name, res.message)


def test_x32_numbering_is_refused(task, filtered):
    if platform.machine() != "x86_64":
        pytest.skip("x32 is an x86_64 ABI")
    res = attack(task, CALL.replace("NR", str(0x40000000 | 101)))  # ptrace under the x32 numbering
    assert res.message.split() == ["-1", str(errno.ENOSYS)], res.message


def test_unshare_a_user_namespace_is_refused(task, filtered):
    nested = """
import os
try:
    os.unshare(os.CLONE_NEWUSER | os.CLONE_NEWNS)
    note = "unshared"
except (OSError, AttributeError) as e:
    note = type(e).__name__
open("note.txt", "w").write(note)
"""
    assert attack(task, nested).message != "unshared"


def test_mount_over_proc_is_refused(task, filtered):
    remount = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
rc = libc.mount(b"tmpfs", b"/proc", b"tmpfs", 0, None)
open("note.txt", "w").write(f"{rc}")
"""
    assert attack(task, remount).message == "-1"


@pytest.mark.parametrize("limit", ["RLIMIT_NPROC", "RLIMIT_FSIZE", "RLIMIT_CORE", "RLIMIT_AS"])
def test_raising_a_hard_limit_is_refused(task, bwrap, limit):
    raise_it = f"""
import resource
soft, hard = resource.getrlimit(resource.{limit})
try:
    resource.setrlimit(resource.{limit}, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    note = "raised" if hard != resource.RLIM_INFINITY else "unlimited already"
except (OSError, ValueError) as e:
    note = type(e).__name__
open("note.txt", "w").write(note)
"""
    assert attack(task, raise_it).message != "raised"
