"""Benchmark a bench whose searches run as Ray tasks against the same bench run one search at a time.

Runs `arts bench` twice through the `arts` command, into two fresh folders, with the same tasks,
methods, seeds, evaluations and model: once with `--jobs 1` (no Ray), once with `--ray --jobs J
--ray-cpus 1` on a local Ray started by the bench (this machine's cores). It prints each bench's wall
seconds, their ratio, and how many runs reached the same best score in both (the same searches with the
same seeds: a difference would mean that a search depends on what runs beside it). One run each: a
benchmark of a shared machine, quoted as a ratio.

Usage: .venv/bin/python scripts/bench_ray.py [--tasks weighted-completion docs/bench-shapes/tasks/quadrature]
       [--methods arts mutate] [--seeds 2] [--evals 4] [--jobs 2] [--out DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ARTS = str(Path(sys.executable).with_name("arts"))


def bench(out: Path, args: argparse.Namespace, ray: bool) -> dict:
    """One `arts bench` into `out`: its wall seconds and each run's best score by (task, method, seed)."""
    argv = [ARTS, "bench", "--tasks", *args.tasks, "--methods", *args.methods, "--seeds", str(args.seeds)]
    argv += ["--evals", str(args.evals), "--out", str(out)]
    argv += ["--ray", "--jobs", str(args.jobs), "--ray-cpus", "1"] if ray else ["--jobs", "1"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    rows = list(csv.DictReader((out / "runs.csv").open()))
    failed = [r for r in rows if r["status"] != "finished"]
    if failed:
        raise SystemExit(f"{out}: {len(failed)} runs did not finish: {failed[0].get('error', '')}")
    return {
        "wall_s": round(wall, 1),
        "best": {f"{r['task']}/{r['method']}/{r['seed']}": r["best"] for r in rows},
    }


def run(args: argparse.Namespace) -> dict:
    root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench-ray-"))
    root.mkdir(parents=True, exist_ok=True)
    one = bench(root / "jobs1", args, ray=False)
    spread = bench(root / "ray", args, ray=True)
    same = sum(spread["best"].get(k) == v for k, v in one["best"].items())
    return {
        "runs": len(one["best"]),
        "jobs1_wall_s": one["wall_s"],
        "ray_wall_s": spread["wall_s"],
        "ray_over_jobs1": round(spread["wall_s"] / one["wall_s"], 3),
        "same_best": same,
        "out": str(root),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--tasks", nargs="+", default=["weighted-completion", "docs/bench-shapes/tasks/quadrature"]
    )
    p.add_argument("--methods", nargs="+", default=["arts", "mutate"])
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--evals", type=int, default=4)
    p.add_argument("--jobs", type=int, default=2, help="searches at once on Ray (each declares one CPU)")
    p.add_argument("--out", default=None, help="where the two benches go (default a temporary folder)")
    p.add_argument("--json", default=None, help="also write the figures to this file")
    args = p.parse_args(argv)
    res = run(args)
    print(json.dumps(res, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
