"""Builds probe-ridge's hidden files at first use (`arts.tasks.hidden`): the package ships this file, never grader/.

The grader is all there is: it runs the evaluator's procedure on held-out rows the search never sees.
"""

from __future__ import annotations

from pathlib import Path

TEST_PY = '''\
"""Final score of a ridge fit: the evaluator's procedure on 400 rows it never scored."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the working copy, which holds evaluate.py
import evaluate  # noqa: E402

from arts.tasks import protocol  # noqa: E402

if __name__ == "__main__":
    protocol.main(lambda: evaluate.score(evaluate.TEST_SEED), evaluate.child)
'''

DIGESTS = {
    "grader/test.py": "44370aa292d12d31e974d41ea5ebbdcfc18489895bd5e6e0c11356f8c2df04eb",
}
"""sha256 of every file build() writes; `arts.tasks.hidden` refuses a build that differs."""


def build(dest: Path) -> None:
    """Write the hidden entries (grader/) under dest."""
    (dest / "grader").mkdir()
    (dest / "grader" / "test.py").write_text(TEST_PY)
