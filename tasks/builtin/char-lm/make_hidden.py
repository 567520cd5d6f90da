"""Builds char-lm's hidden files at first use (`arts.tasks.hidden`): the package ships this file, never grader/.

The hidden text follows data/README.md's recipe: the help() topics of Python 3.11.7 (`pydoc_data.topics`)
joined in sorted key order, made ASCII, cut into blocks of 5,000 characters; blocks i % 10 == 8.
"""

from __future__ import annotations

from pathlib import Path
from pydoc_data.topics import topics

ASCII = {
    "\u2018": "'",
    "\u2019": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u2013": "-",
    "\u2014": "-",
    "\u2026": "...",
}
BLOCK = 5000

TEST_PY = '''\
"""Final score of a character-level model: the evaluator's training run, scored on the hidden test text."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the working copy, which holds evaluate.py
import evaluate  # noqa: E402

from arts.tasks import protocol  # noqa: E402

if __name__ == "__main__":
    protocol.main(lambda: evaluate.score("grader/test.txt", "test_bpc"), evaluate.child)
'''

NEEDS = "char-lm's hidden text is cut from Python 3.11.7's help() topics; run its --test under Python 3.11.7"
DIGESTS = {
    "grader/test.py": "967aba4fb809ede4b940508fc8b2e62b7cc18219a2db6d044dfa6027a41573ae",
    "grader/test.txt": "c3b42d82cca29c177c4b8261fc5c1053f2496dce50a355cec2f2ff476a77bfbc",
}
"""sha256 of every file build() writes; `arts.tasks.hidden` refuses a build that differs."""


def build(dest: Path) -> None:
    """Write the hidden entries (grader/) under dest."""
    (dest / "grader").mkdir()
    (dest / "grader" / "test.py").write_text(TEST_PY)
    text = "".join(topics[k] for k in sorted(topics))
    for a, b in ASCII.items():
        text = text.replace(a, b)
    text = "".join(c if 32 <= ord(c) < 127 or c == "\n" else "?" for c in text)
    blocks = [text[i : i + BLOCK] for i in range(0, len(text), BLOCK)]
    (dest / "grader" / "test.txt").write_text("".join(b for i, b in enumerate(blocks) if i % 10 == 8))
