"""Online bin packing of Weibull-sized items: score the candidate bins for each item (seed: first fit)."""

import numpy as np


def priority(item: int, bins: np.ndarray) -> np.ndarray:
    """Return one score per entry of `bins`; the item goes to the bin with the highest score.

    `bins` holds the remaining capacities of the open bins that can hold `item`, in the order they were
    opened, followed by one empty bin (capacity 100): choosing that last entry opens a new bin.
    """
    return -np.arange(len(bins), dtype=float)  # first fit: the earliest opened bin that fits
