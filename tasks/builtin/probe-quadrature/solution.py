"""Estimate the integral of a smooth function over [0, 1] with a composite rule (seed: the midpoint rule)."""

import math

NODE = 0.5  # where each panel is sampled, as a fraction of its width
CHUNK = 64  # panels evaluated per block
STEPS = 8  # panels of the rule
REPEAT = 1  # passes over the panels; the median pass is returned


def integrate(f):
    """The integral of `f` over [0, 1]: one number."""
    h = 1.0 / STEPS
    passes = []
    for _ in range(REPEAT):
        terms = []
        for start in range(0, STEPS, CHUNK):
            terms.extend(f((i + NODE) * h) for i in range(start, min(start + CHUNK, STEPS)))
        passes.append(math.fsum(terms) * h)
    passes.sort()
    middle = passes[(len(passes) - 1) // 2 : len(passes) // 2 + 1]
    estimate = math.fsum(middle) / len(middle)
    return estimate
