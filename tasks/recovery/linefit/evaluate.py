"""Score a line fit by its mean squared error on held-out points.

Trust boundary: the points are made here from a fixed seed; the candidate's `fit()` runs in a child process
and returns its slope, intercept and training curve as JSON; this parent computes the held-out error
itself and writes the curve to curves.jsonl. JITTER > 0 makes the measurement noisy on purpose (a flawed
protocol, for the recovery scenarios): each evaluation scales the error by a random factor.
"""

from __future__ import annotations

import json
import math
import random

from arts.tasks import protocol

SLOPE, INTERCEPT, NOISE = 1.5, 2.0, 0.5
JITTER = 0.0  # relative sd of the measurement's own noise (0: the score is exact)
CHILD_TIMEOUT_S = 25
EDITABLE = "solution.py"


def points(seed: int, n: int = 100) -> tuple[list[float], list[float]]:
    rng = random.Random(seed)
    xs = [rng.uniform(0.0, 4.0) for _ in range(n)]
    return xs, [SLOPE * x + INTERCEPT + rng.gauss(0.0, NOISE) for x in xs]


def score() -> tuple[float | None, str, dict]:
    train, held = points(0), points(1)
    payload, why = protocol.run_child(__file__, EDITABLE, json.dumps(train).encode(), timeout_s=CHILD_TIMEOUT_S)
    if payload is None:
        return None, why, {}
    try:
        out = json.loads(payload)
        a, b, curve = float(out["a"]), float(out["b"]), [float(v) for v in out["curve"]]
    except (ValueError, KeyError, TypeError) as e:
        return None, f"fit() returned something other than (slope, intercept, curve): {e}", {}
    every = max(len(curve) // 10, 1)
    with open("curves.jsonl", "w") as f:
        for step in range(0, len(curve), every):
            f.write(json.dumps({"step": step + 1, "train_loss": curve[step]}) + "\n")
    if not (math.isfinite(a) and math.isfinite(b)):
        return None, f"the fit diverged: slope {a}, intercept {b} (training loss {curve[-1:]} at the end)", {}
    mse = math.fsum((a * x + b - y) ** 2 for x, y in zip(*held)) / len(held[0])
    if JITTER:
        mse *= math.exp(random.gauss(0.0, JITTER))
    falling = len(curve) > 1 and curve[-1] < curve[-2]
    return mse, f"held-out mse {mse:.4f}, slope {a:.3f}, intercept {b:.3f}", {
        "mse": mse, "train_loss": curve[-1] if curve else None, "still_falling": falling}


def child(payload: bytes) -> bytes:
    from solution import fit

    xs, ys = json.loads(payload)
    a, b, curve = fit(xs, ys)
    clean = [v if math.isfinite(v) else 1e308 for v in (float(c) for c in curve)]
    return json.dumps({"a": float(a), "b": float(b), "curve": clean}).encode()


if __name__ == "__main__":
    protocol.main(score, child)
