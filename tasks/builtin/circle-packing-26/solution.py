"""Pack 26 circles in the unit square, maximising the sum of their radii (seed: a centre circle and two rings)."""

import numpy as np

INNER_COUNT = 8  # circles on the inner ring; the outer ring holds the remaining 25 - INNER_COUNT
INNER_RING = 0.3  # distance of inner-ring centres from the middle of the square
OUTER_RING = 0.7  # distance of outer-ring centres from the middle (clipped to the square)
MARGIN = 0.01  # closest a centre may come to a wall


def pack() -> tuple[np.ndarray, np.ndarray]:
    """Return centres, shape (26, 2), and radii, shape (26,): disjoint circles inside [0, 1]^2."""
    a = 2 * np.pi * np.arange(INNER_COUNT) / INNER_COUNT
    b = 2 * np.pi * np.arange(25 - INNER_COUNT) / (25 - INNER_COUNT)
    inner = 0.5 + INNER_RING * np.c_[np.cos(a), np.sin(a)]
    outer = 0.5 + OUTER_RING * np.c_[np.cos(b), np.sin(b)]
    centers = np.clip(np.vstack([[0.5, 0.5], inner, outer]), MARGIN, 1 - MARGIN)
    radii = np.minimum(centers, 1 - centers).min(axis=1)  # touch the nearest wall
    for i in range(len(radii)):  # shrink each overlapping pair in proportion until it only touches
        for j in range(i):
            d = np.linalg.norm(centers[i] - centers[j])
            if radii[i] + radii[j] > d:
                scale = d / (radii[i] + radii[j])
                radii[i] *= scale
                radii[j] *= scale
    return centers, radii
