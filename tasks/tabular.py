"""Cross-validated scoring of a scikit-learn-style model file, shared by the built-in tabular tasks.

The candidate's `model.py` defines `build_model()`, an unfitted estimator with fit(X, y) and predict(X).
A classification task scores pooled accuracy under repeated stratified K-fold cross-validation; a
regression task, root-mean-square error under repeated K-fold. Its grader fits once on all of
data/train.npz and scores the hidden split.

Trust boundary: this module runs in the evaluator, which loads the data and never imports the candidate.
Each fold is one `tasks.protocol.run_child`: a fresh process, confined by `tasks.confine` (it can read
neither data/train.npz nor any other fold's files, and nothing it leaves outlives it), that receives only
that fold's training rows, training targets and held-out rows (never the held-out targets) on a pipe and
returns its predictions. The evaluator checks them and computes the score itself.
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Literal

import numpy as np

from arts.tasks import protocol

Kind = Literal["classification", "regression"]
N_SPLITS, N_REPEATS = 5, 2
BUDGET_S = 50  # all folds together; under the tasks' 60 s, so a slow candidate gets a clear result.json
EDITABLE = "model.py"
Fold = tuple[np.ndarray, np.ndarray, np.ndarray]  # training rows, training targets, held-out rows


def load(evaluator: str | Path, path: str) -> tuple[np.ndarray, np.ndarray]:
    """Rows (as float64) and targets of an .npz file beside the evaluator."""
    data = np.load(Path(evaluator).resolve().parent / path)
    return data["X"].astype(np.float64), data["y"]


def fold_of(y: np.ndarray, seed: int, kind: Kind) -> np.ndarray:
    """Fold number (0..N_SPLITS-1) of every row: for classification each class spread evenly over the
    folds, for regression a seeded shuffle dealt into equal folds."""
    rng = np.random.default_rng(seed)
    fold = np.empty(len(y), dtype=np.int64)
    if kind == "regression":
        fold[rng.permutation(len(y))] = np.arange(len(y)) % N_SPLITS
        return fold
    for c in np.unique(y):
        rows = rng.permutation(np.flatnonzero(y == c))
        fold[rows] = (np.arange(len(rows)) + rng.integers(N_SPLITS)) % N_SPLITS
    return fold


def fit_predict(evaluator: str | Path, folds: list[Fold]) -> tuple[list[np.ndarray] | None, str]:
    """The candidate's predictions for each fold's held-out rows, each from a fresh confined process."""
    deadline, preds = time.monotonic() + BUDGET_S, []
    for X_fit, y_fit, X_held in folds:
        buf = io.BytesIO()
        np.savez(buf, X_fit=X_fit, y_fit=y_fit, X_held=X_held)
        left = deadline - time.monotonic()
        if left <= 0:
            return None, f"fitting and predicting ran past {BUDGET_S} s and was stopped"
        out, why = protocol.run_child(evaluator, EDITABLE, buf.getvalue(), timeout_s=left)
        if out is None:
            return None, why
        try:
            preds.append(np.asarray(json.loads(out)["pred"]))
        except (KeyError, TypeError, ValueError) as e:
            return None, f"the predictions could not be read: {e}"
    return preds, ""


def measure(evaluator: str | Path, folds: list[Fold], truth: list[np.ndarray], kind: Kind) -> tuple[float | None, str]:  # fmt: skip
    """Accuracy (classification) or RMSE (regression) over all held-out rows of all folds, or (None, why)."""
    preds, why = fit_predict(evaluator, folds)
    if preds is None:
        return None, why
    for k, (p, t) in enumerate(zip(preds, truth, strict=True)):
        p = p.reshape(-1) if kind == "regression" and p.shape == (len(t), 1) else p
        if kind == "classification" and (p.shape != t.shape or p.dtype.kind not in "iuf"):
            return None, f"fold {k}: expected {len(t)} numeric labels, got shape {p.shape} of {p.dtype}"
        if kind == "regression" and (
            p.shape != t.shape or p.dtype.kind not in "iuf" or not np.isfinite(p).all()
        ):
            return None, f"fold {k}: expected {len(t)} finite predictions, got shape {p.shape} of {p.dtype}"
        preds[k] = p
    p, t = np.concatenate(preds), np.concatenate(truth)
    return float(np.mean(p == t) if kind == "classification" else np.sqrt(np.mean((p - t) ** 2))), ""


def _report(value: float | None, why: str, kind: Kind, where: str, prefix: str = "") -> protocol.Score:
    if value is None:
        return None, why, {}
    name = "accuracy" if kind == "classification" else "rmse"
    label = "accuracy" if kind == "classification" else "RMSE"
    return value, f"{prefix}{label} {value:.4f} {where}", {name: value}


def cross_validate(evaluator: str | Path, kind: Kind) -> protocol.Score:
    """The validation score on data/train.npz."""
    X, y = load(evaluator, "data/train.npz")
    folds, truth = [], []
    for repeat in range(N_REPEATS):
        fold = fold_of(y, repeat, kind)
        for k in range(N_SPLITS):
            folds.append((X[fold != k], y[fold != k], X[fold == k]))
            truth.append(y[fold == k])
    value, why = measure(evaluator, folds, truth, kind)
    how = "stratified cross-validation" if kind == "classification" else "cross-validation"
    return _report(value, why, kind, f"over {N_REPEATS}x{N_SPLITS}-fold {how} ({len(y)} rows)")


def test(evaluator: str | Path, kind: Kind, hidden: str = "grader/test.npz") -> protocol.Score:
    """The final score: fit on all of data/train.npz, score on the hidden split (read before any child)."""
    X, y = load(evaluator, "data/train.npz")
    X_test, y_test = load(evaluator, hidden)
    value, why = measure(evaluator, [(X, y, X_test)], [y_test], kind)
    return _report(value, why, kind, f"on {len(y_test)} hidden rows", prefix="test ")


def child(payload: bytes) -> bytes:
    """In the confined child: fit a fresh `build_model()` on this fold's rows, predict its held-out rows."""
    import model  # the candidate, beside the evaluator in the scratch directory

    fold = np.load(io.BytesIO(payload), allow_pickle=False)
    estimator = model.build_model()
    estimator.fit(fold["X_fit"], fold["y_fit"])
    return json.dumps({"pred": np.asarray(estimator.predict(fold["X_held"])).tolist()}).encode()


def main(evaluator: str | Path, kind: Kind) -> None:
    """A tabular task's evaluate.py: `--child` fits one fold, anything else cross-validates."""
    protocol.main(lambda: cross_validate(evaluator, kind), child)
