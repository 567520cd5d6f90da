"""Builds probe-jacobi's hidden files at first use (`arts.tasks.hidden`): the package ships this file, never grader/.

The grader is all there is: it runs the evaluator's procedure on systems the search never sees.
"""

from __future__ import annotations

from pathlib import Path

TEST_PY = '''\
"""Final score of a tridiagonal solver: the evaluator's procedure on 32 systems drawn from another seed."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the working copy, which holds evaluate.py
import evaluate  # noqa: E402

from arts.tasks import protocol  # noqa: E402

TEST_SEED = 1001

if __name__ == "__main__":
    protocol.main(lambda: evaluate.score(TEST_SEED), evaluate.child)
'''

DIGESTS = {
    "grader/test.py": "ea5381a738d57627381a9b4a993fc67a5f9361b53f33cdc5f24e2aeecd6e9893",
}
"""sha256 of every file build() writes; `arts.tasks.hidden` refuses a build that differs."""


def build(dest: Path) -> None:
    """Write the hidden entries (grader/) under dest."""
    (dest / "grader").mkdir()
    (dest / "grader" / "test.py").write_text(TEST_PY)
