"""Score a solver of tridiagonal linear systems by the residuals of its answers (log10, mean over systems).

Trust boundary: the systems (three diagonals and a right-hand side) are drawn here, from a fixed seed.
The candidate's `solve()` runs in a child process (`python evaluate.py --child`) in a scratch directory
holding only `solution.py` and this file, and returns one vector per system as JSON on a stdout channel
that its own prints cannot reach. This parent never imports the candidate: it computes each residual
max_i |(A x - b)_i| itself.
Not prevented here: a solver that uses another method than the seed's (elimination, Gauss-Seidel); any
x is scored by its residual alone. The score has no clock on it: a slow solver costs time (the task's
timeout), never score.
"""

from __future__ import annotations

import json
import math
import random

from arts.tasks import protocol

N_SYSTEMS = 32
SIZE = 12
SEED = 0  # the grader draws its systems from another seed
FLOOR = 1e-13  # residuals below this count as this
CHILD_TIMEOUT_S = 25  # under the task's 30 s, so a hung candidate still gets a clear result.json
EDITABLE = "solution.py"

System = tuple[list[float], list[float], list[float], list[float]]


def systems(seed: int = SEED) -> list[System]:
    """N_SYSTEMS (lower, diagonal, upper, rhs) of SIZE unknowns, each row's diagonal 1.05-1.4 times the
    sum of its off-diagonal sizes (strictly dominant, so the Jacobi iteration converges), sign at random."""
    rng = random.Random(seed)
    out = []
    for _ in range(N_SYSTEMS):
        lower = [rng.uniform(-1, 1) for _ in range(SIZE)]
        upper = [rng.uniform(-1, 1) for _ in range(SIZE)]
        diagonal = [
            (abs(lower[i]) + abs(upper[i])) * rng.uniform(1.05, 1.4) * rng.choice([-1, 1]) for i in range(SIZE)
        ]
        out.append((lower, diagonal, upper, [rng.uniform(-1, 1) for _ in range(SIZE)]))
    return out


def log_residual(x: list[float], system: System) -> float:
    """log10 of max_i |(A x - b)_i|, floored at FLOOR."""
    lower, diagonal, upper, rhs = system
    n = len(rhs)
    residual = max(
        abs((lower[i] * x[i - 1] if i else 0.0) + diagonal[i] * x[i] + (upper[i] * x[i + 1] if i < n - 1 else 0.0) - rhs[i])
        for i in range(n)
    )
    return math.log10(max(residual, FLOOR))


def score(seed: int = SEED) -> tuple[float | None, str, dict]:
    """Solve the systems drawn from `seed`: (mean log10 residual or None, message, metrics)."""
    cases = systems(seed)
    payload, why = protocol.run_child(
        __file__, EDITABLE, json.dumps(cases).encode(), timeout_s=CHILD_TIMEOUT_S
    )
    if payload is None:
        return None, why, {}
    try:
        answers = [[float(v) for v in x] for x in json.loads(payload)]
        if len(answers) != len(cases) or any(len(x) != SIZE for x in answers):
            raise ValueError(f"expected {len(cases)} vectors of {SIZE} numbers")
    except (ValueError, TypeError) as e:
        return None, f"solve() returned something other than one vector per system: {e}", {}
    if not all(math.isfinite(v) for x in answers for v in x):
        return None, "solve() returned a non-finite unknown (did the iteration diverge?)", {}
    logs = [log_residual(x, s) for x, s in zip(answers, cases, strict=True)]
    mean = math.fsum(logs) / len(logs)
    metrics = {"log10_residual": mean, "worst_log10_residual": max(logs)}
    return mean, f"mean log10 residual {mean:.3f} over {len(cases)} systems (worst {max(logs):.3f})", metrics


def child(payload: bytes) -> bytes:
    from solution import solve

    return json.dumps([[float(v) for v in solve(*s)] for s in json.loads(payload)]).encode()


if __name__ == "__main__":
    protocol.main(score, child)
