"""The recovery benchmark: every scenario of `tasks/recovery/scenarios.toml` (a failed experiment of known
cause) under each method, over seeds; per method the routing accuracy against the known level and the
metrics-bearing recovery (a later experiment beats the failed node's parent within the budget), with
stratified bootstrap intervals (`search.bench.recovery`).

Resumable: `OUT/rows.csv` keeps one row per finished run and a second call runs only the rest; commit the
rows (not `OUT/runs/`) so that finished runs are never run again.

Usage: OMP_NUM_THREADS=1 .venv/bin/python scripts/recovery_bench.py --out bench/recovery [--seeds 5]
       [--evals 6] [--from-seed K] [--methods arts,arts-no-critic,arts-k1,arts-reflection,arts-no-attribution]
       [--scenarios lf-bug-name ...] [--model DIR] [--list] [--report]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from arts.search.bench.recovery import METHODS, append_row, load_scenarios, read_rows, run_scenario, summary  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out", type=Path, default=None, help="the benchmark folder (rows.csv, summary.md, runs/)"
    )
    ap.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1")
    ap.add_argument(
        "--from-seed", type=int, default=0, help="start at this seed (a second process on the same --out)"
    )
    ap.add_argument(
        "--evals", type=int, default=6, help="evaluations after the failed one (0: the route only)"
    )
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--scenarios", nargs="*", default=None, help="names or patterns, lo-* (default: all)")
    ap.add_argument("--model", default=None, help="scientist and executor model (default: the embedded one)")
    ap.add_argument(
        "--list", action="store_true", help="list the scenarios and their known levels, run nothing"
    )
    ap.add_argument("--report", action="store_true", help="run nothing: write summary.md from rows.csv")
    args = ap.parse_args()
    scenarios = load_scenarios(names=args.scenarios)
    if args.list:
        for s in scenarios:
            print(f"{s.name}  {s.level}  {s.hypothesis!r}: {s.why}")
        return 0
    if args.out is None:
        ap.error("--out is required (the benchmark folder)")
    methods = [m for m in args.methods.replace(",", " ").split() if m]
    rows_path = args.out / "rows.csv"
    args.out.mkdir(parents=True, exist_ok=True)
    done = {(r["scenario"], r["method"], int(r["seed"])) for r in read_rows(rows_path)}
    jobs = [
        (s, m, k)
        for k in range(args.from_seed, args.seeds)
        for s in scenarios
        for m in methods
        if (s.name, m, k) not in done
    ]
    print(f"recovery: {len(scenarios)} scenarios x {len(methods)} methods x {args.seeds} seeds, "
          f"{len(done)} runs already finished, {0 if args.report else len(jobs)} to run", flush=True)  # fmt: skip
    for i, (s, m, k) in enumerate([] if args.report else jobs, 1):
        row = run_scenario(s, m, k, args.evals, args.out, args.model)
        append_row(rows_path, row)
        print(f"[{i}/{len(jobs)}] {s.name} / {m} / seed {k}: route {row['route']} (known {s.level}), "
              f"recovered {row['recovered']}  {row['seconds']:.0f}s", flush=True)  # fmt: skip
    text = "\n".join(summary(read_rows(rows_path), methods))
    (args.out / "summary.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
