"""How often the paying class would have been drawn at other tilts, from the draws TTT runs stored.

Each `draw` event of a run with a trained adapter stores its candidates (hypothesis, stated probability)
and each one's `move_log_ratios` (adapter over base, `training.tilt`). For every list of K candidates
(`scientist.candidates`) this script computes the expected number of draws of the task's paying class
(`[probe] paying`, without its decoys: `tasks.probe.in_class`) if the list had been drawn at tilt t, for
each t given: the stated probabilities, normalised in the list, times exp(t x log-ratio) with the
exponent capped as the run capped it. The adapters and lists are the ones the runs had: what changes is
the draw alone, so the figures say how much a tilt can move the draws toward what the adapter learned,
not what the runs would have done after (the next rounds would differ). Not counted: the cite boost of
`hypotheses.selection_weights` and candidates held inadmissible (the same at every tilt).
Reads the stores only; no model is loaded.

Usage: .venv/bin/python scripts/tilt_counterfactual.py RUN_DIR... [--tilts 0 1 2 3 5]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from arts.policy.sampler import normalise  # noqa: E402
from arts.search.config import read_stored_config  # noqa: E402
from arts.search.store import Store  # noqa: E402
from arts.tasks.base import resolve_task  # noqa: E402
from arts.tasks.probe import in_class  # noqa: E402


def expected_draws(run_dir: Path, tilts: list[float]) -> tuple[int, int, int, list[float]]:
    """(lists with log-ratios, lists writing the class, draws of it that happened, expected draws of it
    at each tilt) over the run's lists drawn under a trained adapter."""
    cfg = read_stored_config(run_dir / "config.toml")
    probe = resolve_task(cfg.task).config.probe
    if probe is None:
        raise SystemExit(f"{run_dir}: task {cfg.task} declares no [probe]: no paying class to count")
    k, cap = cfg.scientist.candidates, cfg.scientist.tilt_cap
    with Store.open_readonly(run_dir) as store:
        events = [e.payload for e in store.events("draw")]
    lists = writing = happened = 0
    expected = [0.0] * len(tilts)
    for e in events:
        ratios, cands = e.get("move_log_ratios"), e["candidates"]
        if not ratios or len(cands) % k:
            continue
        drawn = {d[0] for d in e["drawn"]}
        for at in range(0, len(cands), k):
            idx = range(at, at + k)
            pays = [in_class(str(cands[i]["hypothesis"]), probe.paying, probe.decoys) for i in idx]
            stated = normalise([cands[i].get("stated_probability") or cands[i]["probability"] for i in idx])
            lists, writing = lists + 1, writing + any(pays)
            happened += sum(p for p, i in zip(pays, idx) if i in drawn)
            for j, t in enumerate(tilts):
                w = [max(s, 1e-9) * math.exp(max(-cap, min(cap, t * ratios[i]))) for s, i in zip(stated, idx)]
                expected[j] += sum(x for x, p in zip(w, pays) if p) / sum(w)
    return lists, writing, happened, expected


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dirs", type=Path, nargs="+")
    ap.add_argument("--tilts", type=float, nargs="+", default=[0, 1, 2, 3, 5])
    args = ap.parse_args()
    total = [0, 0, 0, [0.0] * len(args.tilts)]
    for run in args.run_dirs:
        lists, writing, happened, expected = expected_draws(run, args.tilts)
        at = "  ".join(f"t={t:g}: {x:.2f}" for t, x in zip(args.tilts, expected))
        print(f"{run.name}  lists {lists}  writing {writing}  drawn {happened}  expected {at}")
        total = [total[0] + lists, total[1] + writing, total[2] + happened,
                 [a + b for a, b in zip(total[3], expected)]]  # fmt: skip
    lists = total[0] or 1
    at = "  ".join(f"t={t:g}: {x:.1f} ({x / lists:.3f} per list)" for t, x in zip(args.tilts, total[3]))
    print(f"all  lists {total[0]}  writing {total[1]}  drawn {total[2]}  expected {at}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
