"""A bench's results that outlive its run folders: `runs.csv`, `updates.csv` and `curves.csv` in the bench
folder hold everything the report reads from a finished run (its row, its per-update figures, its
best-so-far curve). They are small, so a bench folder can be committed without its `runs/` (which holds
each run's store, prompts and programs, and which `.gitignore` leaves out). A bench continued on a machine
without the run folders keeps every run the tables list as finished: it is neither rerun nor lost, and
its figures and statistics come from the tables.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from arts.search.bench.results import INVESTIGATION, RunResult

RUNS, UPDATES, CURVES = "runs.csv", "updates.csv", "curves.csv"
KEY = ("task", "method", "seed")
CURVE_COLUMNS = ["task", "method", "seed", "evaluations", "seconds", "best"]
COUNTS = ("seed", "evaluations", "tokens", "updates", "credit_pairs", "update", "round", "groups", "experiments",
          "valid", *INVESTIGATION)  # fmt: skip
"""Integer columns, read back as floats where a column has an empty cell."""


def _clean(value: Any) -> Any:
    """A CSV cell as the report expects it: NaN (an empty cell) is None, integral floats stay floats."""
    if isinstance(value, float) and math.isnan(value):
        return None
    return value.item() if hasattr(value, "item") else value


def _records(path: Path) -> list[dict[str, Any]]:
    if not path.is_file() or path.stat().st_size == 0:
        return []
    frame = pd.read_csv(path)
    rows = [{k: _clean(v) for k, v in row.items()} for row in frame.to_dict("records")]
    for row in rows:
        row.update({k: int(row[k]) for k in COUNTS if isinstance(row.get(k), float)})
    return rows


def kept_results(out: Path) -> dict[tuple[str, str, int], RunResult]:
    """The finished runs the bench folder's tables hold, by (task name, method, seed)."""
    rows = [r for r in _records(out / RUNS) if r.get("status") == "finished"]
    kept = {}
    updates, curves = _records(out / UPDATES), _records(out / CURVES)
    for row in rows:
        key = (str(row["task"]), str(row["method"]), int(row["seed"]))

        def mine(r: dict[str, Any], key: tuple = key) -> bool:
            return (str(r["task"]), str(r["method"]), int(r["seed"])) == key

        ups = [{k: v for k, v in u.items() if k not in KEY} for u in updates if mine(u)]
        for u in ups:
            u["applied"] = bool(u.get("applied"))
        points = [(int(c["evaluations"]), float(c["seconds"]), c["best"]) for c in curves if mine(c)]
        kept[key] = RunResult(row | {"seed": key[2], "kept_from": RUNS}, points, ups)
    return kept


def write_curves(out: Path, results: list[RunResult]) -> None:
    """`curves.csv`: every run's best-so-far points."""
    rows = [
        {"task": r.row["task"], "method": r.row["method"], "seed": r.row["seed"], "evaluations": e,
         "seconds": s, "best": b}
        for r in results for e, s, b in r.curve
    ]  # fmt: skip
    pd.DataFrame(rows, columns=CURVE_COLUMNS).to_csv(out / CURVES, index=False)
