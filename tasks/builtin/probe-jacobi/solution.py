"""Solve tridiagonal linear systems A x = b (seed: Jacobi iteration, one sweep updates every unknown)."""

import math

RELAX = 1.0  # each sweep moves x this far toward the Jacobi update (1.0: the plain update)
PIVOT_MIN = 1e-12  # a diagonal entry smaller than this in size has no Jacobi step: the system is refused
TOL = 0.001  # the iteration stops once a sweep moves no unknown by TOL or more
MAX_SWEEPS = 100000  # sweeps allowed per system


def solve(lower, diagonal, upper, rhs):
    """x with lower[i] x[i-1] + diagonal[i] x[i] + upper[i] x[i+1] = rhs[i] (lower[0], upper[-1] unused)."""
    n = len(rhs)
    if any(abs(d) < PIVOT_MIN for d in diagonal):
        raise ValueError("a diagonal entry is too small for a Jacobi step")
    x = [0.0] * n
    for _ in range(MAX_SWEEPS):
        new = []
        for i in range(n):
            off = (lower[i] * x[i - 1] if i > 0 else 0.0) + (upper[i] * x[i + 1] if i < n - 1 else 0.0)
            new.append(x[i] + RELAX * ((rhs[i] - off) / diagonal[i] - x[i]))
        moved = max(abs(a - b) for a, b in zip(new, x))
        x = new
        if moved < TOL or not math.isfinite(moved):
            break  # converged, or diverged (the answer is then not finite)
    return x
