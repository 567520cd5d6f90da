"""Final score of a character-level model: the evaluator's training run, scored on the hidden test text."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the working copy, which holds evaluate.py
import evaluate  # noqa: E402

from arts.tasks import protocol  # noqa: E402

if __name__ == "__main__":
    protocol.main(lambda: evaluate.score("grader/test.txt", "test_bpc"), evaluate.child)
