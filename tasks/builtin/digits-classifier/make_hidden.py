"""Builds digits-classifier's hidden files at first use (`arts.tasks.hidden`): the package ships this file, never grader/.

The hidden split is the test side of a stratified train_test_split of scikit-learn's digits (540 rows,
random_state 0); data/train.npz is its other side.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

TEST_PY = '''\
"""Final score of a digits classifier: fit on all of data/train.npz, accuracy on the hidden 540-row test split."""

from pathlib import Path

from arts.tasks import protocol, tabular

EVALUATOR = Path(__file__).resolve().parent.parent / "evaluate.py"  # in the working copy

if __name__ == "__main__":
    protocol.main(lambda: tabular.test(EVALUATOR, "classification"), tabular.child)
'''

NEEDS = "the hidden rows come from scikit-learn's digits data; install the scikit-learn version in constraints.txt"
DIGESTS = {
    "grader/test.npz": "537be11924510c844858c177c93e71f23419b6b1ee4890eb542a0b3dd9bd98a9",
    "grader/test.py": "a2d72f262aa871c628720ba37e588a826ebbe52e929e392d56205e49584d2c53",
}
"""sha256 of every file build() writes; `arts.tasks.hidden` refuses a build that differs."""


def build(dest: Path) -> None:
    """Write the hidden entries (grader/) under dest."""
    (dest / "grader").mkdir()
    (dest / "grader" / "test.py").write_text(TEST_PY)
    X, y = load_digits(return_X_y=True)
    _, X_test, _, y_test = train_test_split(X.astype(np.uint8), y, test_size=540, random_state=0, stratify=y)
    np.savez_compressed(dest / "grader" / "test.npz", X=X_test, y=y_test)
