"""Compare windows: where a table's numeric columns leave the range of their first rows, and whether they
come back. A read-only probe an investigator runs over case material (metrics per minute, per epoch, per
request), so that a model too small to read a hundred numbers still sees which series changed first.

For each numeric column of a CSV file, the first `BASE_ROWS` rows set its usual range (median, and a
spread of 1.4826 x the median absolute deviation, at least `MIN_SPREAD` of the median); a departure is
the first row from which `HOLD` rows in a row lie more than `K_SPREADS` spreads from the median. It
"stays out" when it never comes back for `HOLD` rows, and is "back" at the row where it does. Measured on
generated incidents of incident-rca (`scripts/make_incidents.py`): the first series that stays out is
the root service's in 27 of 28 (seeds 54 and 101-106) and 50 of 60 (seed 0, the tests' calibration);
the first departure of any kind in 16 of 28 and 22 of 60.

Text only, no model, nothing run: the caller hands in the file contents (material it is allowed to read).
"""

from __future__ import annotations

import csv
import io
import statistics
from dataclasses import dataclass

BASE_ROWS = 10
K_SPREADS = 6.0
HOLD = 3
MIN_SPREAD = 0.02
MAX_LINES = 24
"""Lines of one comparison's output: the earliest departures first."""


@dataclass(frozen=True)
class Departure:
    file: str
    column: str
    at: str
    """The label (first column) of the row where the series left its range."""
    usual: float
    value: float
    back: str | None
    """The label of the row where it came back; None when it stays out."""
    row: int


def departures(name: str, text: str) -> list[Departure]:
    """The departures of one CSV file's numeric columns (none for a file that is not a table of numbers)."""
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error:
        return []
    if len(rows) < BASE_ROWS + HOLD + 1 or len(rows[0]) < 2:
        return []
    header, body = rows[0], [r for r in rows[1:] if len(r) == len(rows[0])]
    out = []
    for col in range(1, len(header)):
        try:
            xs = [float(r[col]) for r in body]
        except ValueError:
            continue
        if len(xs) < BASE_ROWS + HOLD:
            continue
        base = xs[:BASE_ROWS]
        med = statistics.median(base)
        spread = max(1.4826 * statistics.median(abs(x - med) for x in base), MIN_SPREAD * abs(med), 1e-12)
        out_ = [abs(x - med) > K_SPREADS * spread for x in xs]
        start = next((i for i in range(BASE_ROWS, len(xs) - HOLD + 1) if all(out_[i : i + HOLD])), None)
        if start is None:
            continue
        back = next((j for j in range(start + HOLD, len(xs) - HOLD + 1) if not any(out_[j : j + HOLD])), None)
        out.append(
            Departure(
                name,
                header[col],
                body[start][0],
                med,
                xs[start],
                None if back is None else body[back][0],
                start,
            )
        )
    return out


def compare(files: dict[str, str]) -> str:
    """The comparison of several CSV files (name -> text): series that stay out, earliest first, then those
    that came back; one line each."""
    found = [d for name, text in files.items() for d in departures(name, text)]
    if not found:
        return f"no numeric column of {', '.join(files) or 'these files'} leaves the range of its first {BASE_ROWS} rows"
    stays = sorted((d for d in found if d.back is None), key=lambda d: (d.row, d.file))
    back = sorted((d for d in found if d.back is not None), key=lambda d: (d.row, d.file))
    lines = ["stays out (earliest first):"] + [_line(d) for d in stays] if stays else []
    lines += ["back in range later:"] + [_line(d) for d in back] if back else []
    return "\n".join(lines[:MAX_LINES])


def first_out(files: dict[str, str]) -> tuple[str, str, list[str]] | None:
    """(file, row label, the columns that stay out from that row) of the one file whose series stays out
    earliest; None when none stays out or files tie for the earliest row (no single first)."""
    stays = [d for name, text in files.items() for d in departures(name, text) if d.back is None]
    if not stays:
        return None
    row = min(d.row for d in stays)
    first = [d for d in stays if d.row == row]
    if len({d.file for d in first}) > 1:
        return None
    return first[0].file, first[0].at, [d.column for d in first]


def _line(d: Departure) -> str:
    tail = "" if d.back is None else f", back at {d.back}"
    return f"{d.file}: {d.column} {d.usual:.4g} -> {d.value:.4g} at {d.at}{tail}"
