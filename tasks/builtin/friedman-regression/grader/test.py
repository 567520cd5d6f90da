"""Final score of a Friedman #1 regressor: fit on all of data/train.npz, RMSE on 2,000 hidden test rows."""

from pathlib import Path

from arts.tasks import protocol, tabular

EVALUATOR = Path(__file__).resolve().parent.parent / "evaluate.py"  # in the working copy

if __name__ == "__main__":
    protocol.main(lambda: tabular.test(EVALUATOR, "regression"), tabular.child)
