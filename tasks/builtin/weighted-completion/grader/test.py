"""Final score of a schedule: the evaluator's procedure on five instances it never saw."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the working copy, which holds evaluate.py
import evaluate  # noqa: E402

from arts.tasks import protocol  # noqa: E402

TEST_SEEDS = (2001, 2002, 2003, 2004, 2005)

if __name__ == "__main__":
    protocol.main(lambda: evaluate.score(TEST_SEEDS), evaluate.child)
