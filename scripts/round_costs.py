"""Where a run's wall time went, step by step: the seconds between each event of a run's store and the one
before it, summed by the later event's kind (a scientist's or executor's call by its purpose). A step that
ends by recording an event is charged with the time since the previous one: `watch` the held-out watch
(`training.watch`), `update` an applied GRPO update, `rewards` the drawn lists' old log-probs and the
rewards (`search.learning`), `draw` the sampled lists' draw with its tilt (`training.tilt`),
`credit_check` the end-of-run credit check, `usage:propose` the scientist's proposals.

Reads the store without its lock (`Store.open_readonly`): a run still going can be read.

Usage: .venv/bin/python scripts/round_costs.py RUN_DIR... [--top 12]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from arts.search.store import Store  # noqa: E402


def costs(events: list[tuple[float, str, str | None]]) -> tuple[Counter, Counter, float]:
    """(seconds by step, events by step, the span from first to last) of (time, kind, purpose) events in
    the order they were recorded."""
    seconds, count = Counter(), Counter()
    for (before, _, _), (ts, kind, purpose) in zip(events, events[1:]):
        step = f"{kind}:{purpose}" if purpose else kind
        seconds[step] += ts - before
        count[step] += 1
    return seconds, count, (events[-1][0] - events[0][0]) if events else 0.0


def main(args: argparse.Namespace) -> int:
    for run in args.runs:
        store = Store.open_readonly(run)
        try:
            state = store.load_state()
        finally:
            store.close()
        ordered = sorted(state.events.values(), key=lambda e: e.id)
        seconds, count, span = costs([(e.ts, e.kind, e.payload.get("purpose")) for e in ordered])
        print(f"{run}: {span:.0f} s from the first event to the last")
        for step, s in seconds.most_common(args.top):
            print(f"  {step:24s} {s:8.0f} s  {s / span if span else 0:6.1%}  {count[step]:4d} x")
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", type=Path, nargs="+")
    ap.add_argument("--top", type=int, default=12)
    raise SystemExit(main(ap.parse_args()))
