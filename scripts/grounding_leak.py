"""How many invented numbers the report's grounding lets through, on real runs' stores.

For each run, `search.report.claims.leak_rates`: random numbers of three kinds (2-decimal values in
[0, 1], integers 1-20, integer percentages) written into sentences about results
(`claims.LEAK_TEMPLATES`), each about a random node of the run, and the share that stand.

Usage: .venv/bin/python scripts/grounding_leak.py RUN_DIR... [--samples 400] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from arts.search.report.claims import leak_rates, record  # noqa: E402
from arts.search.store import Store  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dirs", type=Path, nargs="+")
    ap.add_argument("--samples", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    worst: dict[str, float] = {}
    for run_dir in args.run_dirs:
        with Store.open_readonly(run_dir) as store:
            state = store.load_state()
        rates = leak_rates(record(state), args.samples, args.seed)
        print(f"{run_dir.name} ({len(state.nodes)} nodes): "
              + ", ".join(f"{kind} {rate:.1%}" for kind, rate in rates.items()))  # fmt: skip
        worst = {k: max(worst.get(k, 0.0), v) for k, v in rates.items()}
    if len(args.run_dirs) > 1:
        print("worst: " + ", ".join(f"{kind} {rate:.1%}" for kind, rate in worst.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
