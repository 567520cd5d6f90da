"""Builds probe-kepler's hidden files at first use (`arts.tasks.hidden`): the package ships this file, never grader/.

The grader is all there is: it runs the evaluator's procedure on orbits the search never sees.
"""

from __future__ import annotations

from pathlib import Path

TEST_PY = '''\
"""Final score of a Kepler solver: the evaluator's procedure on 64 orbits drawn from another seed."""

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
    "grader/test.py": "8f6d9885909eb931990805fc40c709e5c29b4dce8d0e3862eb0295bb494e7458",
}
"""sha256 of every file build() writes; `arts.tasks.hidden` refuses a build that differs."""


def build(dest: Path) -> None:
    """Write the hidden entries (grader/) under dest."""
    (dest / "grader").mkdir()
    (dest / "grader" / "test.py").write_text(TEST_PY)
