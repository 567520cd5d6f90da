"""The best score of each run at equal evaluations: two methods compared where both had spent as much,
including runs still going or stopped midway (a bench's `curves.csv` holds finished runs only).

Reads each run's store without its lock (`Store.open_readonly`) and its best-so-far curve
(`search.bench.results.curve`); a mark past the evaluations a run has spent is left empty.

Usage: .venv/bin/python scripts/best_at.py RUN_DIR... [--at 10 20 25 30 35 40] [--csv best-at.csv]
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from arts.search.bench.results import curve  # noqa: E402
from arts.search.store import Store  # noqa: E402


def best_at(points: list[tuple[int, float, float | None]], marks: list[int]) -> list[float | None]:
    """The best raw score once `mark` evaluations were spent, for each mark (None past the curve's end)."""
    spent = max((e for e, _, _ in points), default=0)
    out = []
    for mark in marks:
        seen = [b for e, _, b in points if e <= mark and b is not None]
        out.append(seen[-1] if seen and mark <= spent else None)
    return out


def main(args: argparse.Namespace) -> int:
    rows = []
    for run in args.runs:
        store = Store.open_readonly(run)
        try:
            points = curve(store.load_state())
        finally:
            store.close()
        values = best_at(points, args.at)
        rows.append({"run": run.name, "evaluations": max(e for e, _, _ in points),
                     **{str(m): v for m, v in zip(args.at, values)}})  # fmt: skip
        shown = " ".join(f"{m}:{v:.4f}" if v is not None else f"{m}:-" for m, v in zip(args.at, values))
        print(f"{run.name} {rows[-1]['evaluations']} evals  {shown}")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", type=Path, nargs="+")
    ap.add_argument("--at", type=int, nargs="+", default=[10, 20, 25, 30, 35, 40])
    ap.add_argument("--csv", type=Path, default=None)
    raise SystemExit(main(ap.parse_args()))
