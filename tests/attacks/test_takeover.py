"""Attacks on the sandbox's init and on the evaluator's process: ptrace, memory, descriptors, signals, and
daemons that try to outlive the evaluator and forge result.json after it. The verdict is the evaluator's
own (score 1.0) or invalid, never the forged 2.9; no process outlives the evaluation."""

import os
import time

import pytest
from attack_kit import attack, make_task

FORGED = '{"score": 2.9, "valid": true, "metrics": {}, "message": "forged"}'


def honest(res) -> bool:
    """The evaluator's own verdict or an invalid node: never the forged score."""
    return res.score != 2.9 and (not res.valid or res.score == 1.0)


PTRACE_INIT = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
notes = []
for target in (1, os.getppid()):
    for request in (0x4206, 16):  # PTRACE_SEIZE, PTRACE_ATTACH
        rc = libc.ptrace(request, target, 0, 0)
        notes.append(f"{target}:{rc}:{ctypes.get_errno()}")
open("note.txt", "w").write(" ".join(notes))
"""


def test_pid1_cannot_be_ptraced_into_forging_the_result(task, bwrap):
    res = attack(task, PTRACE_INIT)
    assert honest(res) and res.valid, res
    assert all(n.split(":")[1] == "-1" for n in res.message.split()), res.message


def test_pid1_memory_cannot_be_written(task, bwrap):
    poke = """
notes = []
for pid in ("1", "self/../1"):
    try:
        open(f"/proc/{pid}/mem", "r+b", buffering=0)
        notes.append("opened")
    except OSError as e:
        notes.append(type(e).__name__)
open("note.txt", "w").write(" ".join(notes))
"""
    res = attack(task, poke)
    assert honest(res) and "opened" not in res.message, res.message


def test_pid1_is_the_launcher_not_bubblewrap(task, bwrap):
    peek = """
open("note.txt", "w").write(open("/proc/1/cmdline", "rb").read().replace(b"\\0", b" ").decode())
"""
    res = attack(task, peek)
    assert "launch.py" in res.message and "bwrap" not in res.message, res.message


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGTERM", "SIGINT", "SIGSTOP", "SIGHUP", "SIGUSR1"])
def test_signals_to_pid1_are_dropped(task, bwrap, sig):
    res = attack(task, f"import os, signal; os.kill(1, signal.{sig}); open('note.txt', 'w').write('sent')")
    assert res.valid and res.score == 1.0 and res.message == "sent", res


def test_stopped_evaluator_times_out_without_a_score(tmp_path, bwrap):
    task = make_task(tmp_path / "task", timeout=2)
    res = attack(task, "import os, signal; os.kill(os.getppid(), signal.SIGSTOP)")
    assert not res.valid and "timeout" in res.reason, res


def test_kill_everything_leaves_no_score(task, bwrap):
    res = attack(task, "import os, signal; os.kill(-1, signal.SIGKILL)")
    assert not res.valid and "killed" in res.reason, res


AFTER_EXIT = """
import os, sys, time
if os.fork():
    sys.exit(0)
os.setsid()
evaluator = os.getppid()
while os.path.exists(f"/proc/{evaluator}"):  # wait for the evaluator to finish, then forge
    time.sleep(0.005)
for _ in range(2000):
    try:
        open("forged.json", "w").write(FORGED)
        os.replace("forged.json", "result.json")
        os.fork()
    except OSError:
        pass
    time.sleep(0.005)
""".replace("FORGED", repr(FORGED))


def test_daemon_does_not_outlive_the_evaluator(tmp_path, bwrap):
    task = make_task(tmp_path / "task", timeout=8)
    start = time.monotonic()
    res = attack(task, AFTER_EXIT)
    assert honest(res) and res.valid, res
    assert time.monotonic() - start < 5  # ended with the evaluator, not at the timeout
    time.sleep(0.3)
    assert "forged" not in (tmp_path / "work" / "result.json").read_text()


RUNS_TWICE = """
import json, os, subprocess, sys
json.dump({"score": 1.0, "valid": True, "metrics": {}, "message": ""}, open("result.json", "w"))
subprocess.run([sys.executable, "solution.py"])  # after the write: the candidate runs again
"""


def test_candidate_run_after_the_write_cannot_replace_it(tmp_path, bwrap):
    task = make_task(tmp_path / "task", RUNS_TWICE)
    res = attack(
        task, f"import os\nopen('f.json', 'w').write({FORGED!r})\nos.replace('f.json', 'result.json')"
    )
    assert res.valid and res.score == 1.0, res


@pytest.mark.parametrize("how", ["symlink", "hardlink", "fifo", "directory"])
def test_planted_result_json_gives_no_false_score(tmp_path, bwrap, how):
    task = make_task(tmp_path / "task", timeout=3)
    plant = {
        "symlink": f"import os\nopen('mine.json', 'w').write({FORGED!r})\nos.symlink('mine.json', 'result.json')",
        "hardlink": f"import os\nopen('mine.json', 'w').write({FORGED!r})\nos.link('mine.json', 'result.json')",
        "fifo": "import os\nos.mkfifo('result.json')",
        "directory": "import os\nos.mkdir('result.json')",
    }[how]  # fmt: skip
    res = attack(task, plant)
    assert honest(res), res


def test_result_written_through_proc_root_is_overwritten(task, bwrap):
    writer = f"""
import os, sys
if os.fork():
    sys.exit(0)
path = f"/proc/{{os.getppid()}}/root" + os.path.abspath("result.json")
for _ in range(100000):
    try:
        open(path, "w").write({FORGED!r})
    except OSError:
        pass
"""
    assert honest(attack(task, writer))


def test_evaluator_descriptors_cannot_be_opened_through_proc(task, bwrap):
    steal = """
import os
got = []
for fd in range(0, 16):
    try:
        os.open(f"/proc/{os.getppid()}/fd/{fd}", os.O_WRONLY)
        got.append(fd)
    except OSError:
        pass
open("note.txt", "w").write(f"took {got}" if got else "denied")
"""
    res = attack(task, steal)
    assert res.valid and res.message == "denied", res.message


def test_forged_report_on_inherited_descriptors_is_not_read(task, bwrap):
    report = '{"exit": 0, "result": ' + repr(FORGED).replace("'", '"') + ', "error": ""}'
    forge = f"""
import os
for fd in range(3, 256):
    try:
        os.write(fd, {report!r}.encode())
    except OSError:
        pass
print({report!r})
"""
    assert honest(attack(task, forge))


def test_report_printed_on_stdout_is_not_taken_for_the_result(task):
    res = attack(task, f"print({FORGED!r}); import sys; print({FORGED!r}, file=sys.stderr)")
    assert res.valid and res.score == 1.0


def test_output_flood_does_not_block_the_report(tmp_path, bwrap):
    task = make_task(tmp_path / "task", timeout=10)
    res = attack(task, "import sys\nfor _ in range(40):\n    sys.stdout.write('x' * (1 << 20))")
    assert res.valid and res.score == 1.0, res.reason


def test_fork_storm_after_the_evaluator_exits_ends_with_it(tmp_path, bwrap):
    storm = """
import os, sys, time
if os.fork():
    sys.exit(0)
while True:
    try:
        if os.fork() == 0:
            time.sleep(60)
    except OSError:
        time.sleep(0.01)
"""
    task = make_task(tmp_path / "task", timeout=8)
    start = time.monotonic()
    res = attack(task, storm)
    assert honest(res) and time.monotonic() - start < 6, res
    leftovers = [p for p in os.listdir("/proc") if p.isdigit() and _cwd_in(p, tmp_path / "work")]
    assert not leftovers


def _cwd_in(pid: str, workdir) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/cwd").startswith(str(workdir))
    except OSError:
        return False
