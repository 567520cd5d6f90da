"""Cross-validation attacks on the tabular built-ins: a model that remembers earlier folds' rows (in memory,
on disk, in SysV shared memory, in a daemon) or reads the training split from a file must score no better
than an honest model (or be invalid), on validation and on the hidden test, through the user's path
(`run_evaluation`, in the sandbox)."""

from __future__ import annotations

from pathlib import Path

import pytest

from arts.tasks.base import resolve_task
from arts.tasks.confine import confine
from arts.tasks.evaluate import run_evaluation

NOISE_FLOOR = 1.0  # friedman's noise: no honest model's RMSE goes below it

# Remembers every (row, target) it was fitted on, in its module, under /tmp, next to the working copy,
# in $HOME's parent, in /dev/shm and in a SysV shared-memory segment; a forked daemon keeps them too.
# Predicts the remembered target of a held-out row, else linear regression's.
MEMORISER = """
import ctypes, os, pickle
import numpy as np
from sklearn.linear_model import LinearRegression

SEEN = {}
FILES = ["/tmp/seen.pkl", "../seen.pkl", "../../seen.pkl", os.path.join(os.environ.get("HOME", "."), "..", "seen.pkl"),
         "/dev/shm/seen.pkl", TASK_DATA]
libc = ctypes.CDLL(None, use_errno=True)
KEY, SIZE = 0x41727473, 1 << 22


def recall():
    for path in FILES:
        try:
            with open(path, "rb") as f:
                data = f.read()
            if path.endswith(".npz"):
                import io
                d = np.load(io.BytesIO(data))
                SEEN.update((r.tobytes(), t) for r, t in zip(d["X"].astype(np.float64), d["y"]))
            else:
                SEEN.update(pickle.loads(data))
        except Exception:
            pass
    shm = libc.shmget(KEY, SIZE, 0)
    if shm >= 0:
        libc.shmat.restype = ctypes.c_void_p
        addr = libc.shmat(shm, None, 0)
        n = int.from_bytes(ctypes.string_at(addr, 8), "little")
        if n:
            SEEN.update(pickle.loads(ctypes.string_at(addr + 8, n)))


def remember():
    data = pickle.dumps(SEEN)
    for path in FILES[:-1]:
        try:
            with open(path, "wb") as f:
                f.write(data)
        except Exception:
            pass
    shm = libc.shmget(KEY, SIZE, 0o1666)
    if shm >= 0 and len(data) + 8 < SIZE:
        libc.shmat.restype = ctypes.c_void_p
        addr = libc.shmat(shm, None, 0)
        ctypes.memmove(addr, len(data).to_bytes(8, "little") + data, len(data) + 8)


recall()


class Model:
    def fit(self, X, y):
        SEEN.update((r.tobytes(), t) for r, t in zip(X, y))
        remember()
        self.lr = LinearRegression().fit(X, y)
        return self

    def predict(self, X):
        guess = self.lr.predict(X)
        return np.array([SEEN.get(r.tobytes(), g) for r, g in zip(X, guess)])


def build_model():
    return Model()
"""


def _memoriser(task) -> dict[str, str]:
    data = repr(str(task.root / "data" / "train.npz"))
    return {"model.py": MEMORISER.replace("TASK_DATA", data)}


@pytest.mark.parametrize("split", ["evaluate", "test"])
def test_friedman_model_cannot_remember_other_folds_or_read_the_training_file(tmp_path: Path, split: str):
    task = resolve_task("friedman-regression")
    res = run_evaluation(task, _memoriser(task), tmp_path / "work", split=split)
    assert res.valid, res.reason
    assert res.score > 2.0, (res.score, res.message)  # linear regression's honest RMSE ~2.6, far above 1.0


def test_a_confined_process_reads_no_data_and_keeps_no_state(tmp_path: Path):
    """The confinement alone, outside the sandbox: a confined child reads neither the task's data nor /tmp,
    and SysV shared memory is refused."""
    import subprocess
    import sys

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    train = resolve_task("friedman-regression").root / "data" / "train.npz"
    code = f"""
import ctypes, sys
from pathlib import Path
from arts.tasks.confine import confine
assert confine(Path({str(scratch)!r})) == ""
import numpy, sklearn.linear_model  # the interpreter's packages still import
open({str(scratch / "ok.txt")!r}, "w").write("scratch is writable")
for path in ({str(train)!r}, "/tmp/x", "/proc/1/environ"):
    try:
        open(path).read(1)
        sys.exit("read " + path)
    except OSError:
        pass
if ctypes.CDLL(None).shmget(0x41727474, 4096, 0o1666) >= 0:
    sys.exit("shmget allowed")
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (scratch / "ok.txt").read_text() == "scratch is writable"
    assert callable(confine)
