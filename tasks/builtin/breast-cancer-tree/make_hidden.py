"""Builds breast-cancer-tree's hidden files at first use (`arts.tasks.hidden`): the package ships this file, never grader/.

The hidden split is every row of scikit-learn's breast-cancer data that data/train.npz does not hold (169
rows), in the dataset's order.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer

TEST_PY = '''\
"""Final score of a breast-cancer classifier: fit on all of data/train.npz, accuracy on the hidden 169-row split."""

from pathlib import Path

from arts.tasks import protocol, tabular

EVALUATOR = Path(__file__).resolve().parent.parent / "evaluate.py"  # in the working copy

if __name__ == "__main__":
    protocol.main(lambda: tabular.test(EVALUATOR, "classification"), tabular.child)
'''

NEEDS = "the hidden rows come from scikit-learn's breast-cancer data; install the scikit-learn version in constraints.txt"
DIGESTS = {
    "grader/test.npz": "cfba6291b5c22f5164a659a581abea3d47409461fede6e7a02ea9ded8ebbdec5",
    "grader/test.py": "afff8df000d1677e80d27d95c64f4eb48ab954579ea9f01185ec1efc343f1e49",
}
"""sha256 of every file build() writes; `arts.tasks.hidden` refuses a build that differs."""


def build(dest: Path) -> None:
    """Write the hidden entries (grader/) under dest."""
    (dest / "grader").mkdir()
    (dest / "grader" / "test.py").write_text(TEST_PY)
    X, y = load_breast_cancer(return_X_y=True)
    train = np.load(Path(__file__).resolve().parent / "data" / "train.npz")["X"]
    seen = {row.tobytes() for row in train}
    keep = np.array([row.tobytes() not in seen for row in X])
    np.savez_compressed(dest / "grader" / "test.npz", X=X[keep], y=y[keep])
