"""The Markdown of a bench's `summary.md`: table cells, tables and section headings.

Cells come from CSV rows, where a missing value is None or NaN: both show as "-", and means skip them.
What goes into a table is `report` and `sections`; nothing here reads a run.
"""

from __future__ import annotations

import math
from typing import Any


def num(x: Any) -> bool:
    """Whether `x` is a number to show: an int or a float other than NaN (an empty cell)."""
    return isinstance(x, (int, float)) and not math.isnan(x)


def fmt(x: Any, digits: int = 4) -> str:
    """`x` to `digits` significant digits; "-" where it is no number."""
    return f"{x:.{digits}g}" if num(x) else "-"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """The lines of a Markdown table."""
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def mean(xs: list[Any]) -> float:
    """The mean of the numbers among `xs` (NaN when there are none)."""
    xs = [x for x in xs if num(x)]
    return sum(xs) / len(xs) if xs else math.nan


def heading(title: str, prose: str) -> list[str]:
    """A section's opening lines: its title and the paragraph that says how to read its table."""
    return [f"## {title}", "", prose, ""]
