"""Attacks on the score: a candidate that races result.json, writes the evaluator's memory, takes its
descriptors, kills it, or reads the hidden test data. The verdict is the evaluator's own, or invalid."""

import pytest
from attack_kit import attack, make_task

from arts.tasks.base import resolve_task
from arts.tasks.evaluate import run_evaluation

DAEMON = """
import os, sys, time
if os.fork():
    sys.exit(0)
os.setsid()
if os.fork():
    os._exit(0)
fake = b'{"score": 2.9, "valid": true, "metrics": {}, "message": "fake"}'
deadline = time.time() + 20
while time.time() < deadline:  # replace result.json the moment it appears, again and again
    try:
        if open("result.json", "rb").read() != fake:
            open("fake.json", "wb").write(fake)
            os.replace("fake.json", "result.json")
    except OSError:
        pass
"""


@pytest.mark.parametrize("split", ["evaluate", "test"])
def test_daemon_cannot_replace_the_result(tmp_path, bwrap, split):
    grader = "exec(open('evaluate.py').read())\n"
    task = make_task(tmp_path / "task", test=grader)
    for _ in range(3):
        res = attack(task, DAEMON, split=split)
        assert res.valid and res.score == 1.0, (res.score, res.reason)


# The evaluator holds its tolerance in a float object; the candidate looks for its bytes in the evaluator's
# memory through /proc/<parent>/mem and overwrites them with 1e9 (which made circle packing score 13.0).
MEMORY_EVALUATOR = """
import json, os, subprocess, sys
TOLERANCE = float(os.environ.get("NO_SUCH_VAR", "1e-9"))
rc = subprocess.run([sys.executable, "solution.py"]).returncode
note = open("note.txt").read() if os.path.exists("note.txt") else ""
score = 13.0 if TOLERANCE > 1 else 1.0
json.dump({"score": score, "valid": True, "metrics": {}, "message": note}, open("result.json", "w"))
"""
MEMORY_WRITER = """
import os, struct
old, new, notes = struct.pack("d", 1e-9), struct.pack("d", 1e9), []
pid = os.getppid()
try:
    mem = open(f"/proc/{pid}/mem", "r+b", buffering=0)
    for line in open(f"/proc/{pid}/maps"):
        span, perms = line.split()[:2]
        if not perms.startswith("rw"):
            continue
        lo, hi = (int(x, 16) for x in span.split("-"))
        try:
            mem.seek(lo)
            data = mem.read(hi - lo)
        except OSError:
            continue
        at = data.find(old)
        while at >= 0:
            mem.seek(lo + at)
            mem.write(new)
            notes.append("wrote")
            at = data.find(old, at + 1)
except OSError as e:
    notes.append(f"denied: {type(e).__name__}")
open("note.txt", "w").write(" ".join(notes))
"""


def test_candidate_cannot_write_the_evaluators_memory(tmp_path, bwrap):
    task = make_task(tmp_path / "task", MEMORY_EVALUATOR)
    res = attack(task, MEMORY_WRITER)
    assert res.valid and res.score == 1.0 and res.message.startswith("denied"), res


PIDFD_GETFD = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
pidfd = os.pidfd_open(os.getppid())
got = [libc.syscall(438, pidfd, fd, 0) for fd in range(3, 12)]  # pidfd_getfd
open("note.txt", "w").write("took" if any(g >= 0 for g in got) else f"denied errno {ctypes.get_errno()}")
"""


def test_candidate_cannot_take_the_evaluators_descriptors(task, bwrap):
    res = attack(task, PIDFD_GETFD)
    assert res.valid and res.message.startswith("denied"), res.message


def test_killed_evaluator_is_not_reported_as_out_of_memory(task):
    res = attack(task, "import os, signal; os.kill(os.getppid(), signal.SIGKILL)")
    assert not res.valid and "memory" not in res.reason.replace("not by the memory limit", ""), res.reason
    assert "killed" in res.reason


CHEATING_MODEL = """
import os
import numpy as np
from sklearn.linear_model import LinearRegression

CHEAT = None
for path in [os.path.join(os.environ.get("HOME", ""), "grader", "test.npz"), "../grader/test.npz", TASK_NPZ]:
    try:
        d = np.load(path)
        CHEAT = (d["X"], d["y"])
        break
    except Exception:
        pass


class Model:
    def fit(self, X, y):
        self.lr = LinearRegression().fit(X, y)
        return self

    def predict(self, X):
        if CHEAT is not None and len(X) == len(CHEAT[1]):
            return CHEAT[1]
        return self.lr.predict(X)


def build_model():
    return Model()
"""


GRADER = """
import json, os, subprocess, sys
truth = open("grader/truth.txt").read()
rc = subprocess.run([sys.executable, "solution.py"]).returncode
guess = open("guess.txt").read() if os.path.exists("guess.txt") else ""
json.dump({"score": 1.0 if guess == truth else 0.0, "valid": True, "message": guess}, open("result.json", "w"))
"""
READ_TRUTH = """
import os
for path in ("grader/truth.txt", os.path.join(os.environ["HOME"], "grader/truth.txt"), TASK_TRUTH):
    try:
        open("guess.txt", "w").write(open(path).read())
        break
    except OSError:
        pass
"""


def test_hidden_files_are_gone_before_the_candidate_starts(tmp_path, bwrap):
    task = make_task(tmp_path / "task", test=GRADER, hidden={"grader/truth.txt": "the answer"})
    res = attack(
        task, READ_TRUTH.replace("TASK_TRUTH", repr(str(task.root / "grader/truth.txt"))), split="test"
    )
    assert res.valid and res.score == 0.0, res


@pytest.mark.slow
def test_friedman_model_cannot_read_the_hidden_test_split(tmp_path):
    task = resolve_task("friedman-regression")
    model = CHEATING_MODEL.replace("TASK_NPZ", repr(str(task.root / "grader" / "test.npz")))
    res = run_evaluation(task, {"model.py": model}, tmp_path / "work", split="test")
    assert res.valid and res.score > 2.0, (res.score, res.reason)  # linear regression's honest RMSE ~2.6
