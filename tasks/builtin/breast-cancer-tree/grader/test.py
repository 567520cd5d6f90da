"""Final score of a breast-cancer classifier: fit on all of data/train.npz, accuracy on the hidden 169-row split."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the working copy, which holds evaluate.py
import evaluate  # noqa: E402


def score() -> tuple[float | None, str, dict]:
    X, y = evaluate.load("data/train.npz")
    X_test, y_test = evaluate.load("grader/test.npz")
    acc, why = evaluate.accuracy([(X, y, X_test)], [y_test])
    if acc is None:
        return None, why, {}
    return acc, f"test accuracy {acc:.4f} on {len(y_test)} hidden rows", {"accuracy": acc}


if __name__ == "__main__":
    Path("result.json").unlink(missing_ok=True)
    evaluate.write_result(*score())
