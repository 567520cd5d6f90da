"""Score a quadrature rule by the digits of accuracy of its integrals of smooth functions over [0, 1].

Trust boundary: the integrands and their exact integrals are defined here. The candidate's `integrate()`
runs in a child process (`python evaluate.py --child`) in a scratch directory holding only `solution.py`
and this file; it gets each integrand as a callable that counts its calls, and returns one number per
integrand, with the count, as JSON on a stdout channel that its own prints cannot reach. This parent never
imports the candidate: it compares each number with the exact integral itself.
Not prevented here: a child that computes an integral in closed form instead of sampling the integrand;
its answer is still scored against the exact value. The score has no clock on it: a slow rule costs time
(the task's timeout), never accuracy.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable

from arts.tasks import protocol

INTEGRANDS: dict[str, tuple[Callable[[float], float], float]] = {
    "exp": (math.exp, math.e - 1),
    "inverse": (lambda x: 1 / (1 + x), math.log(2)),
    "cosine": (math.cos, math.sin(1)),
    "root": (lambda x: math.sqrt(1 + x), (2 / 3) * (2**1.5 - 1)),
    "arctan": (lambda x: 1 / (1 + x * x), math.pi / 4),
    "gauss": (lambda x: x * math.exp(-x * x), (1 - math.exp(-1)) / 2),
}
"""name -> (integrand, its exact integral over [0, 1])."""
VALIDATION = ("exp", "inverse", "cosine")  # the grader keeps the others
DIGITS_CAP = 12.0  # an estimate within 1e-12 of the truth (relative) scores the cap: rounding lies below
CHILD_TIMEOUT_S = 25  # under the task's 30 s, so a hung candidate still gets a clear result.json
EDITABLE = "solution.py"


def digits(estimate: float, exact: float) -> float:
    """Correct significant digits of `estimate`: -log10 of its relative error, capped at DIGITS_CAP."""
    error = abs(estimate - exact) / abs(exact)
    return DIGITS_CAP if error <= 10**-DIGITS_CAP else min(DIGITS_CAP, -math.log10(error))


def score(names: tuple[str, ...] = VALIDATION) -> tuple[float | None, str, dict]:
    """Integrate the named integrands: (mean digits or None, message, metrics)."""
    payload, why = protocol.run_child(
        __file__, EDITABLE, json.dumps(names).encode(), timeout_s=CHILD_TIMEOUT_S
    )
    if payload is None:
        return None, why, {}
    try:
        out = json.loads(payload)
        estimates = [float(x) for x in out["estimates"]]
        calls = int(out["calls"])
        if len(estimates) != len(names):
            raise ValueError(f"expected {len(names)} estimates, got {len(estimates)}")
    except (ValueError, KeyError, TypeError) as e:
        return None, f"integrate() returned something other than one number per integrand: {e}", {}
    if not all(math.isfinite(x) for x in estimates):
        return None, f"integrate() returned a non-finite estimate: {estimates}", {}
    per = {n: digits(x, INTEGRANDS[n][1]) for n, x in zip(names, estimates, strict=True)}
    mean = math.fsum(per.values()) / len(per)
    metrics = {"digits": mean, "per_integrand": per, "integrand_calls": calls}
    return (
        mean,
        f"{mean:.3f} correct digits on average over {len(names)} integrals, {calls} integrand calls",
        metrics,
    )


def child(payload: bytes) -> bytes:
    from solution import integrate

    calls = 0

    def counted(f: Callable[[float], float]) -> Callable[[float], float]:
        def g(x: float) -> float:
            nonlocal calls
            calls += 1
            return f(x)

        return g

    estimates = [integrate(counted(INTEGRANDS[name][0])) for name in json.loads(payload)]
    return json.dumps({"estimates": [float(x) for x in estimates], "calls": calls}).encode()


if __name__ == "__main__":
    protocol.main(score, child)
