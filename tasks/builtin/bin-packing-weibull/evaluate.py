"""Score an online bin-packing heuristic by its excess bins over the L1 lower bound on Weibull instances.

Trust boundary: the item sequences are drawn here, from fixed seeds. The packing loop runs in a child
process (`python evaluate.py --child`) in a scratch directory holding only `solution.py` and this file;
it calls the candidate's `priority()` once per item and returns the bin chosen for every item as JSON on
a stdout channel that the candidate's prints cannot reach. This parent never imports the candidate: it
checks that the assignment covers every item and overfills no bin, and counts the bins itself.
Not prevented here: a child that packs its items by some other rule than `priority()` (say, an offline
algorithm); its packing is still checked as feasible, but it is not an online heuristic.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import numpy as np

CAPACITY = 100
N_ITEMS = 5000
SEEDS = (0, 1, 2, 3, 4)  # the grader keeps its own, different seeds
CHILD_TIMEOUT_S = 50  # under the task's 60 s, so a hung candidate still gets a clear result.json
EDITABLE = "solution.py"


def make_instance(seed: int) -> np.ndarray:
    """N_ITEMS item sizes: 45 * Weibull(shape 3), rounded and clipped to [1, CAPACITY]."""
    rng = np.random.default_rng(seed)
    return np.clip(np.round(45 * rng.weibull(3.0, N_ITEMS)), 1, CAPACITY).astype(np.int64)


def run_child(stdin: bytes = b"") -> tuple[bytes | None, str]:
    """Run this file's child side on the candidate in a scratch directory: (payload, "") or (None, why)."""
    here = Path(__file__).resolve().parent
    with tempfile.TemporaryDirectory() as scratch:
        for name in (Path(__file__).name, EDITABLE):
            shutil.copy(here / name, scratch)
        try:
            proc = subprocess.run(
                [sys.executable, Path(__file__).name, "--child"],
                cwd=scratch,
                input=stdin,
                capture_output=True,
                timeout=CHILD_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            return None, f"the candidate ran past {CHILD_TIMEOUT_S} s and was stopped"
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        return (
            None,
            f"the candidate crashed (exit code {proc.returncode}): {err[-1] if err else 'no error output'}",
        )
    if not proc.stdout:
        return None, "the candidate exited without returning anything (sys.exit or os._exit in the program?)"
    return proc.stdout, ""


def reserve_stdout() -> BinaryIO:
    """Keep the real stdout for the payload; whatever the candidate prints goes to stderr instead."""
    sys.stdout.flush()
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    return channel


def write_result(score: float | None, message: str, metrics: dict | None = None) -> None:
    """Write result.json; a missing score means the candidate is invalid."""
    out = Path("result.json")
    out.unlink(missing_ok=True)
    valid = score is not None
    out.write_text(json.dumps({"score": score, "valid": valid, "metrics": metrics or {}, "message": message}))


def pack_online(priority: Callable[[int, np.ndarray], np.ndarray], items: np.ndarray) -> list[int]:
    """Put each item, in order, into the option that `priority` scores highest; return each item's bin."""
    remaining = np.empty(len(items), dtype=np.int64)  # capacity left in each opened bin
    n_open = 0
    chosen = []
    for item in items.tolist():
        fits = np.flatnonzero(remaining[:n_open] >= item)
        options = np.append(remaining[fits], CAPACITY)  # a copy: the candidate cannot alter the state
        scores = np.asarray(priority(item, options), dtype=float)
        if scores.shape != options.shape or not np.isfinite(scores).all():
            raise ValueError(f"priority() must return {len(options)} finite scores, got {scores!r:.80}")
        k = int(np.argmax(scores))
        if k == len(fits):
            remaining[n_open] = CAPACITY
            n_open += 1
            b = n_open - 1
        else:
            b = int(fits[k])
        remaining[b] -= item
        chosen.append(b)
    return chosen


def count_bins(items: np.ndarray, assignment: object) -> tuple[int | None, str]:
    """Bins used by a feasible assignment of items to bins, or (None, why it is infeasible)."""
    a = np.asarray(assignment)
    if a.shape != items.shape or a.dtype.kind != "i" or (a < 0).any():
        return (
            None,
            f"expected one non-negative integer bin index per item ({len(items)}), got {a.shape} {a.dtype}",
        )
    loads = np.bincount(a, weights=items)
    if (loads > CAPACITY).any():
        b = int(np.argmax(loads))
        return None, f"bin {b} holds {loads[b]:.0f} > capacity {CAPACITY}"
    return int((loads > 0).sum()), ""


def score(seeds: tuple[int, ...] = SEEDS) -> tuple[float | None, str, dict]:
    """Pack the instances drawn from `seeds`: (mean % excess bins or None, message, metrics)."""
    instances = [make_instance(s) for s in seeds]
    payload, why = run_child(json.dumps([x.tolist() for x in instances]).encode())
    if payload is None:
        return None, why, {}
    try:
        assignments = json.loads(payload)
        if not isinstance(assignments, list) or len(assignments) != len(instances):
            raise ValueError(f"expected {len(instances)} assignments")
    except ValueError as e:
        return None, f"the packing loop returned unreadable output: {e}", {}
    bins, bounds = [], []
    for seed, items, assignment in zip(seeds, instances, assignments, strict=True):
        n, why = count_bins(items, assignment)
        if n is None:
            return None, f"instance {seed}: {why}", {}
        bins.append(n)
        bounds.append(math.ceil(items.sum() / CAPACITY))
    excess = float(np.mean([100 * (n - lb) / lb for n, lb in zip(bins, bounds, strict=True)]))
    metrics = {"excess_bins_pct": excess, "bins": bins, "lower_bounds": bounds}
    return (
        excess,
        f"{sum(bins)} bins for {len(seeds)} instances; {excess:.3f}% above the lower bound",
        metrics,
    )


def _child() -> None:
    channel = reserve_stdout()
    instances = json.loads(sys.stdin.read())
    from solution import priority

    channel.write(
        json.dumps([pack_online(priority, np.asarray(x, dtype=np.int64)) for x in instances]).encode()
    )


def main() -> None:
    Path("result.json").unlink(missing_ok=True)
    write_result(*score())


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        _child()
    else:
        main()
