"""Final check of a packing: the evaluator's own checks, with a tolerance of 1e-12 instead of 1e-9.

A packing that only fits thanks to the evaluator's rounding slack (circles overlapping by up to 1e-9)
is rejected here.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the working copy, which holds evaluate.py
import evaluate  # noqa: E402

from arts.tasks import protocol  # noqa: E402

STRICT_TOLERANCE = 1e-12

if __name__ == "__main__":
    protocol.main(lambda: evaluate.score(STRICT_TOLERANCE), evaluate.child)
