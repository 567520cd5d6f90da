"""Builds friedman-regression's hidden files at first use (`arts.tasks.hidden`): the package ships this file, never grader/.

The hidden split is 2,000 rows of scikit-learn's make_friedman1 (noise 1.0) from random_state 1; data/train.npz
holds 400 rows from random_state 0.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sklearn.datasets import make_friedman1

TEST_PY = '''\
"""Final score of a Friedman #1 regressor: fit on all of data/train.npz, RMSE on 2,000 hidden test rows."""

from pathlib import Path

from arts.tasks import protocol, tabular

EVALUATOR = Path(__file__).resolve().parent.parent / "evaluate.py"  # in the working copy

if __name__ == "__main__":
    protocol.main(lambda: tabular.test(EVALUATOR, "regression"), tabular.child)
'''

NEEDS = "the hidden rows come from scikit-learn's make_friedman1; install the scikit-learn version in constraints.txt"
DIGESTS = {
    "grader/test.npz": "2ddd32f1ca745a5137966e547349f26feab1bbab6eb9aa643a1e381051aefb5d",
    "grader/test.py": "c82ea2c4012c45e4079b3cb97cc033cad184b838300b2a8de77b187a8e910a55",
}
"""sha256 of every file build() writes; `arts.tasks.hidden` refuses a build that differs."""


def build(dest: Path) -> None:
    """Write the hidden entries (grader/) under dest."""
    (dest / "grader").mkdir()
    (dest / "grader" / "test.py").write_text(TEST_PY)
    X, y = make_friedman1(n_samples=2000, n_features=10, noise=1.0, random_state=1)
    np.savez_compressed(dest / "grader" / "test.npz", X=X, y=y)
