"""Score a single-machine schedule by its total weighted completion time, relative to the given order.

Trust boundary: the instances are drawn here, from fixed seeds. The candidate runs in a child process
(`python evaluate.py --child`) in a scratch directory holding only `solution.py` and this file; it calls
the candidate's `order()` once per instance and returns the orders as JSON on a stdout channel that the
candidate's prints cannot reach. This parent never imports the candidate: it checks that every order is
a permutation of the instance's jobs and computes the cost itself.
Not prevented here: an `order()` that reads this file to learn how instances are drawn; the hidden
test's instances come from other seeds.
"""

from __future__ import annotations

import json

import numpy as np

from arts.tasks import protocol

N_JOBS = 200
SEEDS = (0, 1, 2, 3, 4)  # the grader keeps its own, different seeds
CHILD_TIMEOUT_S = 50  # under the task's 60 s, so a hung candidate still gets a clear result.json
EDITABLE = "solution.py"


def make_instance(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """N_JOBS processing times (integers 1..100, log-uniform) and weights (integers 1..20)."""
    rng = np.random.default_rng(seed)
    p = np.round(np.exp(rng.uniform(0, np.log(100), N_JOBS))).astype(np.int64)
    w = rng.integers(1, 21, N_JOBS)
    return p, w


def cost(p: np.ndarray, w: np.ndarray, order: list[int]) -> float:
    """Total weighted completion time of running the jobs in `order`."""
    finish = np.cumsum(p[order])
    return float((w[order] * finish).sum())


def check_order(n: int, order: object) -> str:
    """Why `order` is not a permutation of range(n), or "" when it is one."""
    a = np.asarray(order)
    if a.shape != (n,) or a.dtype.kind not in "iu":
        return f"expected {n} integer job indices, got shape {a.shape} of {a.dtype}"
    if not np.array_equal(np.sort(a), np.arange(n)):
        return "the order is not a permutation: a job is missing or repeated"
    return ""


def score(seeds: tuple[int, ...] = SEEDS) -> tuple[float | None, str, dict]:
    """Schedule the instances drawn from `seeds`: (mean cost relative to the given order, message, metrics)."""
    instances = [make_instance(s) for s in seeds]
    payload = json.dumps([[p.tolist(), w.tolist()] for p, w in instances]).encode()
    payload, why = protocol.run_child(__file__, EDITABLE, payload, timeout_s=CHILD_TIMEOUT_S)
    if payload is None:
        return None, why, {}
    try:
        orders = json.loads(payload)
        if not isinstance(orders, list) or len(orders) != len(instances):
            raise ValueError(f"expected {len(instances)} orders")
    except ValueError as e:
        return None, f"the child returned unreadable output: {e}", {}
    ratios = []
    for seed, (p, w), order in zip(seeds, instances, orders, strict=True):
        if why := check_order(len(p), order):
            return None, f"instance {seed}: {why}", {}
        ratios.append(cost(p, w, order) / cost(p, w, list(range(len(p)))))
    ratio = float(np.mean(ratios))
    metrics = {"cost_ratio": ratio, "ratios": ratios}
    return (
        ratio,
        f"weighted completion time {ratio:.4f} x that of the given order, over {len(seeds)} instances",
        metrics,
    )


def child(payload: bytes) -> bytes:
    instances = json.loads(payload)
    from solution import order

    orders = []
    for p, w in instances:
        got = np.asarray(order(np.asarray(p, dtype=np.int64), np.asarray(w, dtype=np.int64)))
        orders.append(got.tolist() if got.dtype.kind in "biuf" else None)  # the parent says what is wrong
    return json.dumps(orders).encode()


if __name__ == "__main__":
    protocol.main(score, child)
