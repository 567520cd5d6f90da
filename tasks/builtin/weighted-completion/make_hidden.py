"""Builds weighted-completion's hidden files at first use (`arts.tasks.hidden`): the package ships this file, never grader/.

The grader is all there is: it runs the evaluator's procedure on instances the search never sees.
"""

from __future__ import annotations

from pathlib import Path

TEST_PY = '''\
"""Final score of a schedule: the evaluator's procedure on five instances it never saw."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the working copy, which holds evaluate.py
import evaluate  # noqa: E402

from arts.tasks import protocol  # noqa: E402

TEST_SEEDS = (2001, 2002, 2003, 2004, 2005)

if __name__ == "__main__":
    protocol.main(lambda: evaluate.score(TEST_SEEDS), evaluate.child)
'''

DIGESTS = {
    "grader/test.py": "077dcf8e3bb6981e8f543c48fbfec5c186727715fce71912bdcd519a2d5a6502",
}
"""sha256 of every file build() writes; `arts.tasks.hidden` refuses a build that differs."""


def build(dest: Path) -> None:
    """Write the hidden entries (grader/) under dest."""
    (dest / "grader").mkdir()
    (dest / "grader" / "test.py").write_text(TEST_PY)
