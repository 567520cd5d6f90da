"""Builds probe-quadrature's hidden files at first use (`arts.tasks.hidden`): the package ships this file, never grader/.

The grader is all there is: it runs the evaluator's procedure on integrands the search never sees.
"""

from __future__ import annotations

from pathlib import Path

TEST_PY = '''\
"""Final score of a quadrature rule: the evaluator's procedure on three integrands it never scored."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the working copy, which holds evaluate.py
import evaluate  # noqa: E402

from arts.tasks import protocol  # noqa: E402

TEST_INTEGRANDS = ("root", "arctan", "gauss")

if __name__ == "__main__":
    protocol.main(lambda: evaluate.score(TEST_INTEGRANDS), evaluate.child)
'''

DIGESTS = {
    "grader/test.py": "af14563df7e2691e58efa64e67af97fa2fff99e610e0012c95239882f3864a5c",
}
"""sha256 of every file build() writes; `arts.tasks.hidden` refuses a build that differs."""


def build(dest: Path) -> None:
    """Write the hidden entries (grader/) under dest."""
    (dest / "grader").mkdir()
    (dest / "grader" / "test.py").write_text(TEST_PY)
