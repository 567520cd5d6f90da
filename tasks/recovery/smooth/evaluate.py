"""Score a denoiser by its root mean squared error against the clean signal.

Trust boundary: the clean curve, the noise and the spikes are made here from a fixed seed; the candidate's
`smooth()` runs in a child process and gets only the noisy samples; this parent compares its output with
the clean curve. JITTER > 0 makes the measurement noisy on purpose (a flawed protocol, for the recovery
scenarios): each evaluation scales the error by a random factor.
"""

from __future__ import annotations

import json
import math
import random

from arts.tasks import protocol

N, SPIKES, NOISE = 400, 12, 0.3
JITTER = 0.0  # relative sd of the measurement's own noise (0: the score is exact)
CHILD_TIMEOUT_S = 25
EDITABLE = "solution.py"


def signal(seed: int = 0) -> tuple[list[float], list[float]]:
    """(clean, noisy): a slow curve, Gaussian noise and SPIKES samples pushed up by 4."""
    rng = random.Random(seed)
    clean = [math.sin(2 * math.pi * 2 * i / N) + 0.5 * math.sin(2 * math.pi * 5 * i / N) for i in range(N)]
    noisy = [c + rng.gauss(0.0, NOISE) for c in clean]
    for i in rng.sample(range(N), SPIKES):
        noisy[i] += 4.0
    return clean, noisy


def score() -> tuple[float | None, str, dict]:
    clean, noisy = signal()
    payload, why = protocol.run_child(__file__, EDITABLE, json.dumps(noisy).encode(), timeout_s=CHILD_TIMEOUT_S)
    if payload is None:
        return None, why, {}
    try:
        out = [float(v) for v in json.loads(payload)]
    except (ValueError, TypeError) as e:
        return None, f"smooth() returned something other than a list of numbers: {e}", {}
    if len(out) != N:
        return None, f"smooth() returned {len(out)} values for {N} samples", {}
    if not all(math.isfinite(v) for v in out):
        return None, "smooth() returned a non-finite value", {}
    rmse = math.sqrt(math.fsum((o - c) ** 2 for o, c in zip(out, clean)) / N)
    if JITTER:
        rmse *= math.exp(random.gauss(0.0, JITTER))
    worst = max(range(N), key=lambda i: abs(out[i] - clean[i]))
    return rmse, f"rmse {rmse:.4f}, largest error {abs(out[worst] - clean[worst]):.3f} at sample {worst}", {
        "rmse": rmse, "largest_error": abs(out[worst] - clean[worst])}


def child(payload: bytes) -> bytes:
    from solution import smooth

    return json.dumps([float(v) for v in smooth(json.loads(payload))]).encode()


if __name__ == "__main__":
    protocol.main(score, child)
