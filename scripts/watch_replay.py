"""Recompute a finished TTT run's watch from its stored adapters: per update, the held-out probability of the
watched class of moves under the adapter then in force, against the base model's (`training.watch`).

A TTT run keeps every checkpoint (`adapters/<k>/`) and every list it sampled, so the watch can be taken
again after the run, exactly as the run takes it: for each `watch` event (round r, checkpoint k), round
r's rollouts (which checkpoint k never trained on) are measured by `training.watch.measure` with
checkpoint k loaded into a fresh adapter. This measures runs made before a change of `training.watch` with the current method.

With `--adapter PATH` (a warm start, `arts train`), every round of any run (with TTT or without) is
measured under that adapter instead: how much more a warm start trained on other tasks favours the class
than the base does, on lists of a task it never saw (transfer, held out by construction).

With `--slots`, a round's measure is instead, over every slot of its lists that allows the class (lists
written axis first), the probability of writing it there (`training.watch.slot_probabilities`), summed,
under the adapter against the base: it needs no list that wrote the class.

With `--tilt BETA`, the adapter's draw weights are tilted as a search's draw tilts them (`training.tilt`,
`scientist.tilt`; the cap is the run's `scientist.tilt_cap`); 0, the default, leaves them as stated.

Usage: OMP_NUM_THREADS=1 .venv/bin/python scripts/watch_replay.py RUN_DIR... [--move "decrease TOL"]
       [--adapter PATH] [--slots] [--tilt BETA] [--rounds N] [--csv out.csv]
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from arts.policy.backends.transformers import TransformersBackend  # noqa: E402
from arts.search.config import read_stored_config  # noqa: E402
from arts.search.store import Store  # noqa: E402
from arts.training.checkpoint import checkpoint_path, load_weights  # noqa: E402
from arts.training.grpo import lora_config  # noqa: E402
from arts.training.watch import measure, slot_measure  # noqa: E402

ADAPTER = "watched"


def replay(
    run_dir: Path, move: str | None, backend_cache: dict, adapter: Path | None = None, by_slot: bool = False,
    tilt: float = 0.0, first: int | None = None,
) -> list[dict]:  # fmt: skip
    cfg = read_stored_config(run_dir / "config.toml")
    with Store.open_readonly(run_dir) as store:
        state = store.load_state()
    events = [e.payload for e in state.events.values() if e.kind == "watch"]
    if adapter is not None:  # every round, under the one adapter
        rounds = sorted({r.round for r in state.rollouts.values()})
        events = [{"round": r, "k": str(adapter), "move": move} for r in rounds]
    events = [e for e in events if first is None or e["round"] <= first]
    if not events:
        print(f"{run_dir}: no watch events (not a TTT run, or nothing watched)", file=sys.stderr)
        return []
    key = (cfg.scientist_model.model, cfg.ttt.grpo.lora_rank)
    if key not in backend_cache:
        backend = TransformersBackend(cfg.scientist_model.model, dtype="float32", seed=cfg.seed)
        backend.add_adapter(ADAPTER, lora_config(cfg.ttt.grpo))
        backend_cache[key] = backend
    backend = backend_cache[key]
    rows = []
    for e in events:
        watched = move or e["move"]
        rollouts = sorted((r for r in state.rollouts.values() if r.round == e["round"]), key=lambda r: r.id)
        if not rollouts:
            continue
        load_weights(backend.model, ADAPTER, adapter or checkpoint_path(run_dir, e["k"]))
        label = str(adapter) if adapter else f"adapters/{e['k']}"
        if by_slot:
            got = slot_measure(backend, rollouts, watched, ADAPTER, cfg.scientist.temperature)
        else:
            tilted = (tilt, cfg.scientist.tilt_cap)
            got = measure(backend, rollouts, watched, ADAPTER, cfg.scientist.temperature, tilted)
        if got is None:
            print(f"  round {e['round']} {label}: {watched!r} not offered by any list", flush=True)
            continue
        rows.append({"run": run_dir.name, "round": e["round"], "k": e["k"], "move": watched,
                     **{k: float(f"{v:.4g}") if isinstance(v, float) else v for k, v in got.items()}})  # fmt: skip
        detail = (
            f" ({got['tuned']:.3g} against {got['base']:.3g} over {got['slots']} slots)" if by_slot else ""
        )
        print(f"  round {e['round']} {label}: {watched!r} x{got['ratio']:.3f} the base's "
              f"{got['measure']}{detail}", flush=True)  # fmt: skip
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dirs", type=Path, nargs="+")
    ap.add_argument("--move", default=None, help="the class to score (default: the one each run watched)")
    ap.add_argument("--adapter", type=Path, default=None, help="measure every round under this adapter")
    ap.add_argument("--slots", action="store_true", help="measure over every slot that allows the class")
    ap.add_argument(
        "--tilt", type=float, default=0.0, help="tilt the adapter's draw weights by this exponent"
    )
    ap.add_argument("--rounds", type=int, default=None, help="only the run's first this-many rounds")
    ap.add_argument("--csv", type=Path, default=None)
    args = ap.parse_args()
    if args.adapter and not args.move:
        ap.error("--adapter needs --move (the class to measure)")
    rows, cache = [], {}
    for run_dir in args.run_dirs:
        print(run_dir, flush=True)
        rows += replay(run_dir, args.move, cache, args.adapter, args.slots, args.tilt, args.rounds)
    if args.csv and rows:
        with args.csv.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
