"""Order jobs on one machine to minimise their total weighted completion time (seed: the given order)."""

import numpy as np


def order(p: np.ndarray, w: np.ndarray) -> list[int]:
    """Return the order in which the jobs run: a permutation of range(len(p)).

    Job j takes p[j] time units and has weight w[j]; it completes when every job before it and itself
    have run. The cost is the sum over jobs of w[j] times its completion time.
    """
    return list(range(len(p)))
