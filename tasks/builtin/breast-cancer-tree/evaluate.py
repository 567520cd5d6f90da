"""Score a breast-cancer classifier by its accuracy under repeated stratified cross-validation on data/train.npz.

Trust boundary: the candidate runs in a child process (`python evaluate.py --child`) in a scratch
directory holding only `model.py` and this file. The child imports the candidate once, then forks a
fresh process per fold that receives only that fold's training rows, training labels and held-out
rows (never the held-out labels), so no fold's code holds another fold's data in memory. Predictions
come back as JSON on a stdout channel that the candidate's prints cannot reach; this parent, which
never imports the candidate, checks them and computes the accuracy itself.
Not prevented here: a candidate that deliberately passes data between folds through the filesystem,
or reads the visible data/train.npz by path; the hidden test split is the final guard.
"""

from __future__ import annotations

import io
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import BinaryIO, NoReturn

import numpy as np

N_SPLITS, N_REPEATS = 5, 2
FIT_BUDGET_S = 40  # all folds together, counted once the candidate is imported
CHILD_TIMEOUT_S = 55  # the whole child; under the task's 60 s, so a slow candidate gets a clear result.json
EDITABLE = "model.py"
Fold = tuple[np.ndarray, np.ndarray, np.ndarray]  # training rows, training labels, held-out rows


def load(path: str) -> tuple[np.ndarray, np.ndarray]:
    """Rows and targets of an .npz file next to this one."""
    data = np.load(Path(__file__).resolve().parent / path)
    return data["X"].astype(np.float64), data["y"]


def stratified_folds(y: np.ndarray, seed: int) -> np.ndarray:
    """Fold number (0..N_SPLITS-1) of every row, with each class spread evenly over the folds."""
    rng = np.random.default_rng(seed)
    fold = np.empty(len(y), dtype=np.int64)
    for c in np.unique(y):
        rows = rng.permutation(np.flatnonzero(y == c))
        fold[rows] = (np.arange(len(rows)) + rng.integers(N_SPLITS)) % N_SPLITS
    return fold


def send(stream: BinaryIO, data: bytes) -> None:
    stream.write(len(data).to_bytes(8, "big") + data)
    stream.flush()


def recv(stream: BinaryIO) -> bytes:
    head = stream.read(8)
    body = stream.read(int.from_bytes(head, "big")) if len(head) == 8 else b""
    if len(head) < 8 or len(body) < int.from_bytes(head, "big"):
        raise EOFError("the channel closed")
    return body


def fit_predict(folds: list[Fold]) -> tuple[list[np.ndarray] | None, str]:
    """The candidate's predictions for each fold's held-out rows, or (None, why it failed)."""
    here = Path(__file__).resolve().parent
    with tempfile.TemporaryDirectory() as scratch, tempfile.TemporaryFile() as err:
        for name in (Path(__file__).name, EDITABLE):
            shutil.copy(here / name, scratch)
        cmd = [sys.executable, Path(__file__).name, "--child"]
        start = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=scratch, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        watchdog = threading.Timer(CHILD_TIMEOUT_S, proc.kill)  # e.g. a candidate that hangs while imported
        watchdog.start()
        replies, why = [], ""
        try:
            for X_fit, y_fit, X_held in folds:
                buf = io.BytesIO()
                np.savez(buf, X_fit=X_fit, y_fit=y_fit, X_held=X_held)
                send(proc.stdin, buf.getvalue())
                replies.append(json.loads(recv(proc.stdout)))
                if "error" in replies[-1]:
                    why = replies[-1]["error"]
                    break
        except (OSError, EOFError, ValueError):
            why = "the candidate crashed or exited before returning predictions"
        finally:
            proc.stdin.close()
            proc.wait()
            watchdog.cancel()
            err.seek(0)
            lines = err.read().decode(errors="replace").strip().splitlines()
    if proc.returncode == -signal.SIGKILL and time.monotonic() - start >= CHILD_TIMEOUT_S:
        why = f"the candidate ran past {CHILD_TIMEOUT_S} s and was stopped"
    if why:
        return None, f"{why}; last line of its error output: {lines[-1]}" if lines else why
    try:
        return [np.asarray(r["pred"]) for r in replies], ""
    except (KeyError, TypeError, ValueError) as e:
        return None, f"the predictions could not be read: {e}"


def reserve_stdout() -> BinaryIO:
    """Keep the real stdout for the payload; whatever the candidate prints goes to stderr instead."""
    sys.stdout.flush()
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    return channel


def write_result(score: float | None, message: str, metrics: dict | None = None) -> None:
    """Write result.json; a missing score means the candidate is invalid."""
    out = Path("result.json")
    out.unlink(missing_ok=True)
    valid = score is not None
    out.write_text(json.dumps({"score": score, "valid": valid, "metrics": metrics or {}, "message": message}))


def accuracy(folds: list[Fold], truth: list[np.ndarray]) -> tuple[float | None, str]:
    """Pooled accuracy of the candidate over all folds, or (None, why)."""
    preds, why = fit_predict(folds)
    if preds is None:
        return None, why
    for k, (p, t) in enumerate(zip(preds, truth, strict=True)):
        if p.shape != t.shape or p.dtype.kind not in "iuf" or not np.isfinite(p).all():
            return None, f"fold {k}: expected {len(t)} numeric labels, got shape {p.shape} of {p.dtype}"
    return float(np.mean(np.concatenate(preds) == np.concatenate(truth))), ""


def score() -> tuple[float | None, str, dict]:
    X, y = load("data/train.npz")
    folds, truth = [], []
    for repeat in range(N_REPEATS):
        fold = stratified_folds(y, seed=repeat)
        for k in range(N_SPLITS):
            folds.append((X[fold != k], y[fold != k], X[fold == k]))
            truth.append(y[fold == k])
    acc, why = accuracy(folds, truth)
    if acc is None:
        return None, why, {}
    message = (
        f"accuracy {acc:.4f} over {N_REPEATS}x{N_SPLITS}-fold stratified cross-validation ({len(y)} rows)"
    )
    return acc, message, {"accuracy": acc}


def _fit_predict_one(model: ModuleType, msg: bytes, out: int) -> NoReturn:
    code = 1
    try:
        fold = np.load(io.BytesIO(msg), allow_pickle=False)
        estimator = model.build_model()
        estimator.fit(fold["X_fit"], fold["y_fit"])
        pred = np.asarray(estimator.predict(fold["X_held"]))
        with os.fdopen(out, "wb") as f:
            f.write(json.dumps({"pred": pred.tolist()}).encode())
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _child() -> None:
    """Import the candidate once, then fork per fold: each fold starts from the same clean state."""
    channel = reserve_stdout()
    import model

    deadline = time.monotonic() + FIT_BUDGET_S
    while True:
        try:
            msg = recv(sys.stdin.buffer)
        except EOFError:
            return
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            channel.close()
            os.close(r)
            _fit_predict_one(model, msg, w)
        os.close(w)
        ready = select.select([r], [], [], max(0.0, deadline - time.monotonic()))[0]
        if not ready:
            os.kill(pid, signal.SIGKILL)
        with os.fdopen(r, "rb") as f:
            reply = f.read() if ready else b""
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        if not ready:
            reply = json.dumps(
                {"error": f"fitting and predicting ran past {FIT_BUDGET_S} s and was stopped"}
            ).encode()
        elif status or not reply:
            reply = json.dumps(
                {"error": f"the candidate crashed or exited early (exit code {status})"}
            ).encode()
        send(channel, reply)


def main() -> None:
    Path("result.json").unlink(missing_ok=True)
    write_result(*score())


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        _child()
    else:
        main()
