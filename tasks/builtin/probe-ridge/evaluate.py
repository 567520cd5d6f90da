"""Score a regression by its mean squared error on held-out rows of a fixed synthetic data set.

Trust boundary: the data are drawn here from a fixed seed. The candidate's `fit()` runs in a child process
(`python evaluate.py --child`) in a scratch directory holding only `solution.py` and this file; it gets the
training rows and returns an intercept and eight coefficients as JSON on a stdout channel that its own
prints cannot reach. This parent never imports the candidate: it computes the error on the validation
rows itself. The score has no clock on it.
"""

from __future__ import annotations

import json
import math
import random

from arts.tasks import protocol

FEATURES = 8
TRUE_COEFS = (3.0, -2.6, 2.2, -1.9, 1.6, -1.4, 1.2, 1.0)
NOISE = 1.0
TRAIN_ROWS, HELD_ROWS = 100, 400
VALIDATION_SEED, TEST_SEED = 11, 12  # the grader scores rows of its own seed
CHILD_TIMEOUT_S = 25
EDITABLE = "solution.py"


def rows(seed: int, n: int, orthogonal: bool = False) -> tuple[list[list[float]], list[float]]:
    """n rows of standard normal features and their targets (a linear function plus noise). With
    `orthogonal` (the training rows), the features are made centred and orthogonal, each of mean square 1,
    so that each penalty acts on its own coefficient alone."""
    rng = random.Random(seed)
    xs = [[rng.gauss(0.0, 1.0) for _ in range(FEATURES)] for _ in range(n)]
    if orthogonal:
        cols: list[list[float]] = []
        for j in range(FEATURES):
            v = [r[j] for r in xs]
            mean = math.fsum(v) / n
            v = [x - mean for x in v]
            for u in cols:
                dot = math.fsum(a * b for a, b in zip(v, u)) / n
                v = [a - dot * b for a, b in zip(v, u)]
            norm = math.sqrt(math.fsum(a * a for a in v) / n)
            cols.append([a / norm for a in v])
        xs = [[cols[j][i] for j in range(FEATURES)] for i in range(n)]
    ys = [5.0 + sum(c * x for c, x in zip(TRUE_COEFS, row)) + rng.gauss(0.0, NOISE) for row in xs]
    return xs, ys


def score(held_seed: int = VALIDATION_SEED) -> tuple[float | None, str, dict]:
    """Fit on the training rows, then the mean squared error on `held_seed`'s rows: (mse or None, message,
    metrics)."""
    payload, why = protocol.run_child(__file__, EDITABLE, b"", timeout_s=CHILD_TIMEOUT_S)
    if payload is None:
        return None, why, {}
    try:
        out = json.loads(payload)
        intercept, coefs = float(out["intercept"]), [float(c) for c in out["coefs"]]
        if len(coefs) != FEATURES:
            raise ValueError(f"expected {FEATURES} coefficients, got {len(coefs)}")
    except (ValueError, KeyError, TypeError) as e:
        return None, f"fit() returned something other than an intercept and {FEATURES} coefficients: {e}", {}
    if not all(math.isfinite(x) for x in [intercept, *coefs]):
        return None, f"fit() returned a non-finite coefficient: {[intercept, *coefs]}", {}
    xs, ys = rows(held_seed, HELD_ROWS)
    errors = [(y - intercept - sum(c * x for c, x in zip(coefs, row))) ** 2 for row, y in zip(xs, ys)]
    mse = math.fsum(errors) / len(errors)
    return mse, f"mean squared error {mse:.4f} on {HELD_ROWS} held-out rows", {"mse": mse}


def child(payload: bytes) -> bytes:
    from solution import fit

    xs, ys = rows(0, TRAIN_ROWS, orthogonal=True)
    intercept, coefs = fit(xs, ys)
    return json.dumps({"intercept": float(intercept), "coefs": [float(c) for c in coefs]}).encode()


if __name__ == "__main__":
    protocol.main(score, child)
