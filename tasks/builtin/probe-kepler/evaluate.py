"""Score a solver of Kepler's equation by the residuals of its answers (log10, mean over the orbits).

Trust boundary: the orbits (mean anomaly M, eccentricity e) are drawn here, from a fixed seed. The
candidate's `solve()` runs in a child process (`python evaluate.py --child`) in a scratch directory
holding only `solution.py` and this file, and returns one anomaly E per orbit as JSON on a stdout channel
that its own prints cannot reach. This parent never imports the candidate: it computes each residual
E - e sin(E) - M (modulo 2 pi) itself.
Not prevented here: a solver that uses another method than the seed's (Newton's, a series); any E is
scored by its residual alone. The score has no clock on it: a slow solver costs time (the task's
timeout), never score.
"""

from __future__ import annotations

import json
import math
import random

from arts.tasks import protocol

N_ORBITS = 64
SEED = 0  # the grader draws its orbits from another seed
FLOOR = 1e-13  # residuals below this count as this: rounding in E - e sin(E) - M lies below it
CHILD_TIMEOUT_S = 25  # under the task's 30 s, so a hung candidate still gets a clear result.json
EDITABLE = "solution.py"


def orbits(seed: int = SEED) -> list[tuple[float, float]]:
    """N_ORBITS (M, e): M uniform in [-pi, 3 pi), e uniform in [0.05, 0.95)."""
    rng = random.Random(seed)
    return [(rng.uniform(-math.pi, 3 * math.pi), rng.uniform(0.05, 0.95)) for _ in range(N_ORBITS)]


def log_residual(anomaly: float, mean_anomaly: float, eccentricity: float) -> float:
    """log10 of |E - e sin(E) - M| taken modulo 2 pi, floored at FLOOR."""
    residual = abs(math.remainder(anomaly - eccentricity * math.sin(anomaly) - mean_anomaly, 2 * math.pi))
    return math.log10(max(residual, FLOOR))


def score(seed: int = SEED) -> tuple[float | None, str, dict]:
    """Solve the orbits drawn from `seed`: (mean log10 residual or None, message, metrics)."""
    cases = orbits(seed)
    payload, why = protocol.run_child(
        __file__, EDITABLE, json.dumps(cases).encode(), timeout_s=CHILD_TIMEOUT_S
    )
    if payload is None:
        return None, why, {}
    try:
        anomalies = [float(x) for x in json.loads(payload)]
        if len(anomalies) != len(cases):
            raise ValueError(f"expected {len(cases)} anomalies, got {len(anomalies)}")
    except (ValueError, TypeError) as e:
        return None, f"solve() returned something other than one number per orbit: {e}", {}
    if not all(math.isfinite(x) for x in anomalies):
        return None, "solve() returned a non-finite anomaly", {}
    logs = [log_residual(x, m, e) for x, (m, e) in zip(anomalies, cases, strict=True)]
    mean = math.fsum(logs) / len(logs)
    metrics = {"log10_residual": mean, "worst_log10_residual": max(logs)}
    return mean, f"mean log10 residual {mean:.3f} over {len(cases)} orbits (worst {max(logs):.3f})", metrics


def child(payload: bytes) -> bytes:
    from solution import solve

    return json.dumps([float(solve(m, e)) for m, e in json.loads(payload)]).encode()


if __name__ == "__main__":
    protocol.main(score, child)
