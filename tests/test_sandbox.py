"""Adversarial tests of the sandbox (`run_evaluation` under `tasks.isolation`): one property per test, each
on a tiny task whose evaluator runs solution.py."""

import json
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from arts.tasks.base import Task, load_task
from arts.tasks.evaluate import run_evaluation
from arts.tasks.isolation import LIB_IN_SANDBOX, network_isolated, probe
from arts.tasks.process import TAIL_BYTES

# The default evaluator: run the candidate; score 1.0 if it exited cleanly; its note.txt becomes the message.
EVALUATE = """
import json, os, subprocess, sys
rc = subprocess.run([sys.executable, "solution.py"]).returncode
note = open("note.txt").read() if os.path.exists("note.txt") else ""
if rc != 0:
    sys.exit(f"solution failed with status {rc}")
json.dump({"score": 1.0, "valid": True, "metrics": {}, "message": note}, open("result.json", "w"))
"""


def writes(result: str, before: str = "") -> str:
    """An evaluator that writes `result` (a Python expression) as result.json."""
    return f"import json, os, sys, time\n{before}\njson.dump({result}, open('result.json', 'w'))\n"


def make_task(tmp_path: Path, evaluate: str = EVALUATE, *, timeout: float = 3, memory_mb: int = 512,
              max_procs: int = 32, hidden: dict[str, str] | None = None) -> Task:  # fmt: skip
    root = tmp_path / "task"
    root.mkdir()
    (root / "statement.md").write_text("A test task.")
    (root / "evaluate.py").write_text(evaluate)
    (root / "solution.py").write_text("print('seed')\n")
    for rel, text in (hidden or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    toml = f"""
        name = "sandbox-test"
        statement = "statement.md"
        kind = "optimize"
        editable = ["solution.py"]
        material = ["evaluate.py"]
        hidden = {json.dumps(["grader/"] if hidden else [])}
        [metric]
        name = "score"
        direction = "maximize"
        [evaluate]
        command = ["python", "evaluate.py"]
        timeout_s = {timeout}
        memory_mb = {memory_mb}
        max_procs = {max_procs}
    """
    if hidden:
        toml += '[test]\ncommand = ["python", "grader/test.py"]\n'
    (root / "task.toml").write_text("\n".join(line.strip() for line in toml.splitlines()))
    return load_task(root)


def run(task: Task, solution: str = "print('hi')", workdir: Path | None = None, split: str = "evaluate"):
    return run_evaluation(task, {"solution.py": solution}, workdir or task.root.parent / "work", split=split)


def require(available: bool, what: str) -> None:
    if not available:
        pytest.skip(f"needs {what}; here: {probe().note}")


def processes_in(workdir: Path, settle_s: float = 1.0) -> list[int]:
    """Processes whose current directory is inside workdir (the evaluated program and its descendants), after
    giving SIGKILLed ones settle_s to finish dying (as root the sandbox itself waits for them)."""
    deadline = time.monotonic() + settle_s
    while True:
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if os.readlink(f"/proc/{pid}/cwd").startswith(str(workdir)):
                    found.append(int(pid))
            except OSError:
                continue
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


def my_zombies() -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            state, ppid = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[:2]
        except OSError:
            continue
        if state == "Z" and int(ppid) == os.getpid():
            found.append(int(pid))
    return found


def test_valid_result_round_trip(tmp_path):
    result = {"score": 2.5, "valid": True, "metrics": {"a": [1, 2], "b": {"c": "d"}}, "message": "hi"}
    r = run(
        make_task(tmp_path, writes(repr(result), "print('to stdout'); print('to stderr', file=sys.stderr)"))
    )
    assert (r.valid, r.score, r.metrics, r.message, r.reason, r.returncode) == (
        True,
        2.5,
        result["metrics"],
        "hi",
        "",
        0,
    )
    assert "to stdout" in r.stdout_tail and "to stderr" in r.stderr_tail and r.wall_s > 0


def test_timeout_kills_infinite_loop(tmp_path):
    start = time.monotonic()
    r = run(make_task(tmp_path, timeout=1), "while True:\n    pass\n")
    assert r.reason == "timeout after 1s" and not r.valid and time.monotonic() - start < 3
    assert processes_in(tmp_path / "work") == []


def test_memory_bomb_is_killed(tmp_path):
    r = run(make_task(tmp_path, memory_mb=256), "x = []\nwhile True:\n    x.append(bytearray(10**7))\n")
    assert r.reason.startswith("killed: memory limit (256 MiB)"), r.reason


def test_fork_bomb_is_contained(tmp_path):
    require(os.geteuid() != 0 or probe().uid_drop, "a process limit (as root, only after a uid drop)")
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    r = run(make_task(tmp_path, timeout=2, max_procs=16), bomb)
    assert r.reason == "timeout after 2s"
    assert processes_in(tmp_path / "work") == []
    assert subprocess.run(["true"], timeout=5).returncode == 0  # the machine still starts processes


def test_gigabyte_of_output_is_capped(tmp_path):
    spew = "import sys\nline = 'x' * (1 << 20) + '\\n'\nfor _ in range(1024):\n    sys.stdout.write(line)\n"
    start = time.monotonic()
    r = run(make_task(tmp_path, timeout=20), spew)
    assert r.reason.startswith("output limit exceeded"), r.reason
    assert len(r.stdout_tail) <= TAIL_BYTES and time.monotonic() - start < 10


def test_network_connection_is_refused(tmp_path):
    require(network_isolated(), "a network namespace (root with CAP_SYS_ADMIN)")
    server = socket.create_server(("127.0.0.1", 0))
    client = f"""
import socket
try:
    socket.create_connection(("127.0.0.1", {server.getsockname()[1]}), timeout=1)
    note = "connected"
except OSError as e:
    note = f"refused: {{e}}"
open("note.txt", "w").write(note)
"""
    r = run(make_task(tmp_path), client)
    server.setblocking(False)
    with pytest.raises(BlockingIOError):  # nothing reached the server
        server.accept()
    assert r.message.startswith("refused"), r.message


def test_cannot_write_outside_working_copy(tmp_path):
    require(probe().uid_drop, "a per-evaluation uid (root)")
    tmp_path.chmod(0o755)  # reachable, so that a write fails on ownership, not on a closed path
    (tmp_path / "sibling").mkdir()
    task = make_task(tmp_path)
    targets = [tmp_path / "sibling" / "planted.txt", task.root / "evaluate.py", Path("/etc/arts-planted")]
    attack = f"""
import os
notes = [f"uid={{os.getuid()}}"]
for target in {[str(t) for t in targets]!r}:
    try:
        open(target, "a").write("pwned")
        notes.append("wrote " + target)
    except OSError as e:
        notes.append(type(e).__name__)
open("note.txt", "w").write(" ".join(notes))
"""
    r = run(task, attack)
    assert r.valid and "wrote" not in r.message and not r.message.startswith("uid=0 "), r.message
    assert not targets[0].exists() and not targets[2].exists() and targets[1].read_text() == EVALUATE


def test_rewritten_evaluator_is_restored(tmp_path):
    fake = writes("{'score': 1e9, 'valid': True}")
    attack = f"""
import os
for attempt in (lambda: os.chmod("evaluate.py", 0o666), lambda: open("evaluate.py", "w").write({fake!r})):
    try:
        attempt()
    except OSError:
        pass
try:
    open("fake.py", "w").write({fake!r})
    os.replace("fake.py", "evaluate.py")
except OSError:
    pass
"""
    task = make_task(tmp_path)
    run(task, attack)
    assert run(task).score == 1.0 and (tmp_path / "work" / "evaluate.py").read_text() == EVALUATE


def test_planted_module_cannot_shadow_evaluator_imports(tmp_path):
    fake_json = 'def dump(obj, f):\n    f.write(\'{"score": 1e9, "valid": true}\')\n'
    task = make_task(tmp_path)
    run(task, f"open('json.py', 'w').write({fake_json!r})\n")  # the next run's `import json` would load it
    assert run(task).score == 1.0 and not (tmp_path / "work" / "json.py").exists()


def test_symlink_planted_in_working_copy_is_not_followed(tmp_path):
    require(probe().uid_drop, "a per-evaluation uid (root)")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    task = make_task(tmp_path)
    run(task, f"import os\nos.remove('solution.py')\nos.symlink({str(victim)!r}, 'solution.py')\n")
    assert (tmp_path / "work" / "solution.py").is_symlink()  # the attack itself worked
    run(task)
    assert victim.read_text() == "precious" and not (tmp_path / "work" / "solution.py").is_symlink()


def test_nan_score_is_invalid(tmp_path):
    assert (
        run(make_task(tmp_path, writes("{'score': float('nan'), 'valid': True}"))).reason
        == "non-finite score"
    )


def test_non_finite_metrics_become_null(tmp_path):
    r = run(
        make_task(
            tmp_path, writes("{'score': 1, 'valid': True, 'metrics': {'a': float('nan'), 'b': [1e999]}}")
        )
    )
    assert r.valid and r.metrics == {"a": None, "b": [None]}
    json.dumps(r.metrics, allow_nan=False)


def test_missing_result_json_is_invalid(tmp_path):
    assert run(make_task(tmp_path, "print('forgot the result')\n")).reason == "no result.json written"


def test_stale_result_json_is_removed(tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "result.json").write_text('{"score": 1e9, "valid": true}')
    assert run(make_task(tmp_path, "pass\n"), workdir=workdir).reason == "no result.json written"


@pytest.mark.parametrize(
    ("evaluate", "reason"),
    [
        ("open('result.json', 'w').write('not json')", "malformed result.json: Expecting value"),
        (
            "open('result.json', 'w').write('[1, 2]')",
            "malformed result.json: the top level must be an object",
        ),
        (writes("{'valid': 'yes', 'score': 1}"), "malformed result.json: 'valid' must be"),
        (writes("{'valid': True, 'score': '1'}"), "malformed result.json: 'score' must be"),
        (writes("{'valid': True, 'score': 1, 'metrics': [1]}"), "malformed result.json: 'valid' must be"),
        (writes("{'valid': True, 'score': 10**400}"), "non-finite score"),
        (writes("{'valid': True, 'score': None}"), "valid=true but score is null"),
        ("import os; os.symlink('/etc/hostname', 'result.json')", "malformed result.json: cannot open it"),
        # os.mkfifo raises no audit event: the launcher did not see the evaluator write result.json
        ("import os; os.mkfifo('result.json')", "no result.json written"),
    ],
)
def test_bad_result_json_is_invalid(tmp_path, evaluate, reason):
    r = run(make_task(tmp_path, evaluate + "\n"))
    assert not r.valid and r.reason.startswith(reason), r.reason


def test_evaluator_may_declare_the_run_invalid(tmp_path):
    r = run(make_task(tmp_path, writes("{'score': None, 'valid': False, 'message': 'overlap'}")))
    assert not r.valid and r.reason == "evaluator: overlap"


def test_hidden_files_only_in_test_split(tmp_path):
    evaluate = writes("{'score': 0, 'valid': True, 'message': str(os.path.exists('grader'))}")
    grader = writes("{'score': float(open('grader/truth.txt').read()), 'valid': True}")
    task = make_task(tmp_path, evaluate, hidden={"grader/test.py": grader, "grader/truth.txt": "7"})
    assert run(task).message == "False"
    assert run(task, split="test").score == 7.0
    assert not (tmp_path / "work" / "grader").exists()


def test_task_directory_is_hidden_from_the_program(tmp_path):
    require(probe().mounts, "a mount namespace (root with CAP_SYS_ADMIN)")
    task = make_task(tmp_path, hidden={"grader/test.py": "", "grader/truth.txt": "7"})
    peek = f"""
try:
    note = open({str(task.root / "grader" / "truth.txt")!r}).read()
except OSError as e:
    note = type(e).__name__
open("note.txt", "w").write(note)
"""
    assert run(task, peek).message == "FileNotFoundError"


def test_secrets_not_in_environment(tmp_path, monkeypatch):
    secrets = {"HF_TOKEN": "hf_s3cret", "AWS_SECRET_ACCESS_KEY": "aws_s3cret", "OPENAI_API_KEY": "sk-s3cret"}
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the host's own path never reaches the candidate
    env = run(make_task(tmp_path, writes("{'score': 1, 'valid': True, 'metrics': dict(os.environ)}"))).metrics
    assert not set(secrets) & set(env) and not set(secrets.values()) & set(env.values())
    assert env["HOME"] == str((tmp_path / "work").resolve()) and env["OMP_NUM_THREADS"] == "1"
    assert env["PYTHONHASHSEED"] == "0" and env.get("PYTHONPATH") in (None, LIB_IN_SANDBOX)


def test_crash_reports_last_stderr_line(tmp_path):
    r = run(make_task(tmp_path, "raise ValueError('boom 123')\n"))
    assert r.reason == "exit status 1: ValueError: boom 123" and r.returncode == 1


def test_escaped_background_process_is_killed(tmp_path):
    require(probe().uid_drop, "a per-evaluation uid (root)")
    daemon = """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(30)
    os._exit(0)
os.wait()
"""
    earlier = set(my_zombies())  # other tests' unreaped children are not this evaluation's
    start = time.monotonic()
    r = run(make_task(tmp_path), daemon)
    assert r.valid and time.monotonic() - start < 3
    assert processes_in(tmp_path / "work") == [] and set(my_zombies()) <= earlier


def test_concurrent_evaluations_get_distinct_uids(tmp_path):
    require(probe().uid_drop, "a per-evaluation uid (root)")
    task = make_task(
        tmp_path, writes("{'score': 1, 'valid': True, 'metrics': {'uid': os.getuid()}}", "time.sleep(0.5)")
    )
    results = {}
    threads = [threading.Thread(target=lambda i=i: results.update({i: run(task, workdir=tmp_path / f"w{i}")}))
               for i in range(2)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.valid for r in results.values()) and results[0].metrics["uid"] != results[1].metrics["uid"]


def test_answer_task_has_no_evaluate_split(tmp_path):
    root = tmp_path / "answer"
    root.mkdir()
    (root / "statement.md").write_text("Diagnose.")
    (root / "test.py").write_text("")
    (root / "task.toml").write_text(
        'name = "a"\nstatement = "statement.md"\nkind = "answer"\neditable = ["answer.json"]\n'
        'material = ["test.py"]\n[test]\ncommand = ["python", "test.py"]\n'
    )
    with pytest.raises(ValueError, match=r"no \[evaluate\] section"):
        run_evaluation(load_task(root), {"answer.json": "{}"}, tmp_path / "work")


def test_an_interpreter_under_tmp_stays_visible_over_the_private_tmp(tmp_path, monkeypatch):
    """A checkout (and its venv) under /tmp: the candidate's private /tmp must not hide the interpreter."""
    import arts.tasks.isolation as isolation

    require(probe().bwrap, "bubblewrap")
    venv = Path("/tmp/some-checkout/.venv")
    monkeypatch.setattr(isolation, "_interpreter_paths", lambda: (venv, Path("/usr/lib/python3")))
    task = make_task(tmp_path)
    plan = isolation.plan_for(task, task.config.evaluate, tmp_path / "work", None)
    args = plan.prefix
    tmpfs = args.index("--tmpfs")
    binds = [i for i in range(len(args) - 2) if args[i] == "--ro-bind" and args[i + 1] == str(venv)]
    assert binds and max(binds) > tmpfs  # bound after the tmpfs, which would otherwise cover it


def test_a_command_that_cannot_start_is_an_outcome_and_leaks_no_descriptor(tmp_path):
    """A failure between fork and exec (here: a memory cgroup that is gone) is told as the evaluation's
    outcome; the pipe the launcher would have reported on is closed once, not twice."""
    from arts.tasks.base import CommandConfig
    from arts.tasks.isolation import Plan
    from arts.tasks.process import execute

    before = len(os.listdir("/proc/self/fd"))
    plan = Plan(cgroup=tmp_path / "gone", launcher=True)
    out = execute(["python", "-c", "pass"], CommandConfig(command=["python"]), tmp_path, plan)
    assert out.stopped.startswith("could not start"), out
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_spawn_refused_for_a_moment_is_tried_again(tmp_path, monkeypatch):
    import errno

    from arts.tasks import process

    calls, real = [], subprocess.Popen

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) < 3:
            raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
        return real(*args, **kwargs)

    monkeypatch.setattr(process, "SPAWN_RETRY_S", (0.0, 0.0))
    monkeypatch.setattr(process.subprocess, "Popen", flaky)
    assert run(make_task(tmp_path)).valid and len(calls) == 3


def test_a_uid_held_by_a_zombie_of_another_parent_is_not_leased(tmp_path):
    """An init that does not reap leaves zombies that count against the uid's process limit: a run under that
    uid could not fork (bwrap: "Can't fork for pid 1"), so the lease passes over it."""
    require(probe().uid_drop, "a per-evaluation uid (root)")
    from arts.tasks.uids import UIDS, procs_of, uid_lease

    with uid_lease() as free:
        pass
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    holder = os.fork()
    if holder == 0:  # a parent that never reaps its child, which exits as the uid about to be leased
        child = os.fork()
        if child == 0:
            os.setresuid(free, free, free)
            os._exit(0)
        os.write(ready_w, b"1")
        os.read(done_r, 1)
        os._exit(0)
    try:
        os.read(ready_r, 1)
        while not any(state == "Z" for _, state, _ in procs_of(free)):
            time.sleep(0.01)
        with uid_lease() as uid:
            assert uid != free and uid in UIDS
    finally:
        os.write(done_w, b"1")
        os.waitpid(holder, 0)
        for fd in (ready_r, ready_w, done_r, done_w):
            os.close(fd)


def test_seccomp_tables_match_libseccomp():
    """The hand-written system call numbers are the kernel's, as libseccomp knows them."""
    import ctypes
    import ctypes.util

    from arts.tasks.seccomp import ARCHES, DENIED

    name = ctypes.util.find_library("seccomp")
    require(name is not None, "libseccomp to check the table against")
    lib = ctypes.CDLL(name)
    lib.seccomp_syscall_resolve_name_arch.argtypes = [ctypes.c_uint32, ctypes.c_char_p]
    for call, numbers in DENIED.items():
        for arch, column in ARCHES.values():
            assert lib.seccomp_syscall_resolve_name_arch(arch, call.encode()) == numbers[column], call


def test_the_launcher_is_the_sandbox_init_under_the_filter(tmp_path):
    """bubblewrap's own init would run as the candidate's uid, dumpable and unfiltered: the launcher takes
    its place, and the plan carries the filter bubblewrap applies to every process of the run."""
    import arts.tasks.isolation as isolation

    require(probe().bwrap, "bubblewrap")
    task = make_task(
        tmp_path, writes("{'score': os.getpid(), 'valid': True, 'metrics': {'ppid': os.getppid()}}")
    )
    plan = isolation.plan_for(task, task.config.evaluate, tmp_path / "work", None, launcher=True)
    assert "--as-pid-1" in plan.prefix and plan.seccomp
    r = run(task)
    assert (r.score, r.metrics["ppid"]) == (2.0, 1)
