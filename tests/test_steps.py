"""Smaller steps (`search.investigation.steps`): the values a local refinement's line search tries."""

from __future__ import annotations

import pytest

from arts.search.investigation.steps import smaller_steps
from arts.search.state import Node


def _node(src: str) -> Node:
    return Node(files={"solution.py": src}, hypothesis="", axis="")


@pytest.mark.parametrize(
    ("parent", "failed", "expected"),
    [
        ("LR = 0.05\nSTEPS = 30\n", "LR = 0.5\nSTEPS = 30\n", [("LR", 0.16), ("LR", 0.089)]),  # log scale
        ("WINDOW = 3\n", "WINDOW = 151\n", [("WINDOW", 21), ("WINDOW", 8)]),  # integers stay integers
        ("K = 1.0\n", "K = 0.0\n", [("K", 0.5), ("K", 0.75)]),  # through zero: linear
        ("W = 9\n", "W = 9\nMEDIAN = 101\n", [("MEDIAN", 10), ("MEDIAN", 1010)]),  # new: its scale unknown
        ("X = 1\n", "X = 1\nCEILING = 0.2\n", [("CEILING", 0.02), ("CEILING", 2.0)]),
        ("X = 1\n", "X = 1\nMEDIAN = 5\n", [("MEDIAN", 50)]),  # a tenth rounds to 0: the term off
        ("A = 2.0\nB = 1.0\n", "A = 2.2\nB = 100.0\n", [("B", 10.0), ("B", 3.2)]),  # the furthest move
        ("LR = 0.05\n", "LR = 0.1\n", []),  # a menu step: the executor's next menu step is smaller
        ("K = 1\n", "K = 7\n", [("K", 3), ("K", 2)]),
        ("X = 1\n", "X = 1\nY = 'a'\n", []),  # no number moved
    ],
)
def test_the_values_tried_lie_back_along_the_failed_move(parent, failed, expected):
    assert smaller_steps(_node(failed), _node(parent)) == expected
