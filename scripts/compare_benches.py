"""IQM of normalised scores of two methods taken from committed bench tables (`runs.csv`, one row per run),
and the difference with its stratified bootstrap interval (`search.bench.metrics`, the bench report's own).

For a method measured again at a later commit against a baseline whose runs an earlier bench already holds
(and whose path the change does not touch: check by rerunning a seed or two of it):

    python scripts/compare_benches.py docs/bench-probes/jacobi-tilt/runs.csv:arts-warm \
        docs/bench-probes/jacobi-warm/runs.csv:arts

A side may list several tables, comma-separated (CSV,CSV:METHOD), e.g. one per task; the strata are tasks.
"""

from __future__ import annotations

import argparse
import csv
from collections import defaultdict

from arts.search.bench.metrics import iqm_ci, iqm_difference_ci


def strata(spec: str) -> tuple[str, list[list[float]]]:
    """CSV[,CSV...]:METHOD -> (label, one list of finished runs' normalised scores per task)."""
    path, _, method = spec.rpartition(":")
    if not path:
        raise SystemExit(f"{spec!r}: write CSV:METHOD, e.g. docs/bench-ttt/runs.csv:arts")
    by_task: dict[str, list[float]] = defaultdict(list)
    for one in path.split(","):
        with open(one, newline="") as f:
            for row in csv.DictReader(f):
                if row["method"] == method and row["status"] == "finished" and row["normalised"] != "":
                    by_task[row["task"]].append(float(row["normalised"]))
    if not by_task:
        raise SystemExit(f"{path}: no finished run of method {method!r}")
    return f"{method} ({path})", [by_task[t] for t in sorted(by_task)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", help="CSV:METHOD")
    ap.add_argument("b", help="CSV:METHOD")
    args = ap.parse_args()
    (la, a), (lb, b) = strata(args.a), strata(args.b)
    for label, s in ((la, a), (lb, b)):
        ci = iqm_ci(s)
        print(f"{label}: {sum(map(len, s))} runs, IQM {ci.point:.3f} [{ci.lo:.3f}, {ci.hi:.3f}]")
    d = iqm_difference_ci(a, b)
    verdict = "" if d.lo > 0 or d.hi < 0 else ", not significant"
    print(f"A - B: {d.point:.3f} [{d.lo:.3f}, {d.hi:.3f}]{verdict}")


if __name__ == "__main__":
    main()
