"""Builds circle-packing-26's hidden files at first use (`arts.tasks.hidden`): the package ships this file, never grader/.

The grader is all there is: it runs the evaluator's procedure on instances the search never sees.
"""

from __future__ import annotations

from pathlib import Path

TEST_PY = '''\
"""Final check of a packing: the evaluator's own checks, with a tolerance of 1e-12 instead of 1e-9.

A packing that only fits thanks to the evaluator's rounding slack (circles overlapping by up to 1e-9)
is rejected here.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the working copy, which holds evaluate.py
import evaluate  # noqa: E402

from arts.tasks import protocol  # noqa: E402

STRICT_TOLERANCE = 1e-12

if __name__ == "__main__":
    protocol.main(lambda: evaluate.score(STRICT_TOLERANCE), evaluate.child)
'''

DIGESTS = {
    "grader/test.py": "6ece738ec5a87c06bbc38c5c9468e8cac0011c104108c7563efa6fc7818383a5",
}
"""sha256 of every file build() writes; `arts.tasks.hidden` refuses a build that differs."""


def build(dest: Path) -> None:
    """Write the hidden entries (grader/) under dest."""
    (dest / "grader").mkdir()
    (dest / "grader" / "test.py").write_text(TEST_PY)
