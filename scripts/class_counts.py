"""How often runs wrote and drew a class of moves, and whether one group of runs did so more than another.

Per run (a run folder of any method): the verbalized lists the scientist sampled, the lists that wrote
the class (a candidate whose hypothesis starts with it), the candidates that did, the draws of it
(experiments run on it), and the lists of the run's first round and those of them that wrote it. And
where the class's target was offered both ways (not held back by the compass poll, `scientist.poll`: the
run's `poll` events, or for a run made before them its holds recomputed from the nodes of the rounds
before, `search.compass.held`): the candidates that moved the target (`open_target`) and those of them
that wrote the class (`open_class`), its share (`open_share`): the scientist's own choice of direction,
which a forced one hides (its difference between groups: over the runs with any such candidate). Given `--versus GLOB`, the runs matched by it are a second
group (for instance a warm start against the base weights, seed by seed) and the difference of the
per-run means is printed with a bootstrap 95% interval over runs (each group resampled on its own, `search.bench.metrics.bootstrap_ci`).
Reads the stores only; no model is loaded.

Usage: .venv/bin/python scripts/class_counts.py RUN_DIR... --move "decrease TOL" [--versus "*-warm-*"]
       (--move "decrease": the verb on any target but the task's probe decoys; open: the target's other way not held)
       [--from-round R] [--csv out.csv]
"""

from __future__ import annotations

import argparse
import csv
import fnmatch
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from arts.search import compass  # noqa: E402
from arts.search.bench.metrics import bootstrap_ci, mean_ci  # noqa: E402
from arts.search.config import read_stored_config  # noqa: E402
from arts.search.store import Store  # noqa: E402
from arts.tasks.base import resolve_task  # noqa: E402
from arts.tasks.probe import in_class  # noqa: E402

FIELDS = (
    "lists",
    "lists_writing",
    "share_writing",
    "written",
    "drawn",
    "first_round_lists",
    "first_round_writing",
    "open_target",
    "open_class",
    "open_share",
)


def counts(run_dir: Path, move: str, from_round: int = 1) -> dict:
    with Store.open_readonly(run_dir) as store:
        state = store.load_state()
    rollouts = [r for r in state.rollouts.values() if r.round >= from_round]
    lists: dict[tuple, tuple] = {}
    for r in rollouts:
        lists.setdefault((r.group, tuple(r.tokens) or r.id), (r.round, r.candidates))
    probe = resolve_task(read_stored_config(run_dir / "config.toml").task).config.probe
    decoys = tuple(probe.decoys) if probe else ()  # a verb alone on a decoy is not of the class
    hits = [
        (k, sum(in_class(str(c.get("hypothesis", "")), move, decoys) for c in cands))
        for k, cands in lists.values()
    ]
    drawn = sum(bool(_drawn(r, move, decoys)) for r in rollouts)
    verb, *target = move.split(maxsplit=1)  # a verb alone: the class is that verb on any target
    held = holds(run_dir, state, {r.round for r in rollouts})
    opposite = {"increase": "decrease", "decrease": "increase"}.get(verb, "")
    moved = [
        h for k, cands in lists.values()
        for c in cands if len(h := str(c.get("hypothesis", "")).split()) > 1 and h[1] in (target or [h[1]])
        and f"{opposite} {h[1]}" not in held.get(k, set())
    ]  # fmt: skip
    hit = sum(h[0] == verb for h in moved)
    first = min((k for k, _ in hits), default=0)
    writing = sum(h > 0 for _, h in hits)
    return {"run": run_dir.name, "lists": len(lists), "lists_writing": writing,
            "share_writing": round(writing / len(lists), 4) if lists else 0.0,
            "written": sum(h for _, h in hits), "drawn": drawn,
            "first_round_writing": sum(h > 0 for k, h in hits if k == first),
            "first_round_lists": sum(k == first for k, _ in hits),
            "open_target": len(moved), "open_class": hit,
            "open_share": round(hit / len(moved), 4) if moved else 0.0}  # fmt: skip


def holds(run_dir: Path, state, rounds: set[int]) -> dict[int, set[str]]:
    """The directions the poll held back in each round: from its `poll` events, else recomputed from the
    nodes made before the round (under the run's task's direction; no model)."""
    with Store.open_readonly(run_dir) as store:
        events = [e.payload for e in store.events("poll")]
    if events:
        out: dict[int, set[str]] = {}
        for e in events:
            out.setdefault(e["round"], set()).update(e["held"])
        return out
    cfg = read_stored_config(run_dir / "config.toml")
    if not cfg.scientist.poll:
        return {}
    task = resolve_task(cfg.task)
    return {r: compass.held(before(state, r), task.normalise) for r in rounds}


def before(state, r: int):
    """The state as it was when round r began: the nodes of earlier rounds."""
    return state.model_copy(update={"nodes": {i: n for i, n in state.nodes.items() if n.round < r}})


def _drawn(rollout, move: str, decoys: tuple[str, ...] = ()) -> bool:
    cands = rollout.candidates
    return 0 <= rollout.drawn < len(cands) and in_class(
        str(cands[rollout.drawn].get("hypothesis", "")), move, decoys
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dirs", type=Path, nargs="+")
    ap.add_argument("--move", required=True, help='the class, as a hypothesis begins: "decrease TOL"')
    ap.add_argument("--versus", help="a glob on run folder names: those runs form the second group")
    ap.add_argument(
        "--from-round",
        type=int,
        default=1,
        help="count the lists and draws of this round on (2: after a TTT run's first update)",
    )
    ap.add_argument("--csv", type=Path)
    args = ap.parse_args()
    rows = [counts(d, args.move, args.from_round) for d in args.run_dirs]
    for row in rows:
        print("  ".join(f"{k} {row[k]}" for k in ("run", *FIELDS)))
    if args.csv:
        with args.csv.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["run", *FIELDS])
            w.writeheader()
            w.writerows(rows)
    if args.versus:
        b = [r for r in rows if fnmatch.fnmatch(r["run"], args.versus)]
        a = [r for r in rows if r not in b]
        for k in ("lists_writing", "share_writing", "written", "drawn", "first_round_writing", "open_share"):
            some = (
                (lambda r: r["open_target"] > 0) if k == "open_share" else (lambda r: True)
            )  # a share of none
            va, vb = [float(r[k]) for r in a if some(r)], [float(r[k]) for r in b if some(r)]
            if not va or not vb:
                continue
            diff = bootstrap_ci([vb, va], lambda p: np.mean(p[0], axis=-1) - np.mean(p[1], axis=-1))
            print(f"{k}: {args.versus} {mean_ci([vb]).fmt(2)} per run, the others {mean_ci([va]).fmt(2)}; "
                  f"difference {diff.fmt(2)}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
