"""A bench run's results, read from its folder: the table row, the best-so-far curve and, under test-time
training, what each update saw.

The row's numbers come from the final `summary.json` (the run's own account); the curve and the learning figures
come from the store, since the summary keeps no history.

- The curve has one point per experiment: the evaluations spent once it ended (experiments run one after
  another, so an experiment's evaluations are those logged before the next one began), the seconds of
  work by then, and the best score so far (as the evaluator reported it). Seconds count only time a
  worker was running: a run resumed after its bench was killed does not count the time it lay dead
  (each worker session counts from its first record to its last; see `active_clock`).
- Per update: the updates' window is the rounds since the previous one. From the window's `rewards`
  events, the mean of the groups' mean rewards and the fraction of actions rewarded above 0; from its
  proposals (each group's candidate list, once), the entropy in bits of the candidates' targets (the
  name a directed hypothesis changes, else the axis) and of their parent nodes, where a fall towards 0
  shows the proposals collapsing onto one move; the update's KL of the adapter to the base on the
  window's sampled actions (measured by every update, whatever `ttt.grpo.kl_coef`); and the update's
  seconds beside the mean seconds of the window's rounds.
"""

from __future__ import annotations

import bisect
import json
import math
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arts.search.bench.plan import SESSIONS_FILE, Job, final_summary
from arts.search.state import Node, SearchState
from arts.search.store import Store, StoreError


@dataclass
class RunResult:
    row: dict[str, Any]
    """task, method, seed, status, best, test_score, baseline, evaluations, tokens, seconds, updates,
    experiments (nodes but the seed), valid (of those, the valid ones), the credit check, the counts of
    `investigation`, ..."""
    curve: list[tuple[int, float, float | None]] = field(default_factory=list)
    """(evaluations, seconds, best score so far), from the seed program (0, 0, its score) on."""
    updates: list[dict[str, Any]] = field(default_factory=list)
    """One dict per TTT update (applied or skipped), in order."""


def read_run(job: Job, task: str, error: str = "") -> RunResult:
    """The run's results under the task name `task`; a run without a final summary gives a failed row."""
    # the run folder relative to the bench folder: the tables hold no machine's absolute paths
    row: dict[str, Any] = {
        "task": task,
        "method": job.method,
        "seed": job.seed,
        "run_dir": f"runs/{job.run_dir.name}",
    }
    s = final_summary(job.run_dir)
    if s is None:
        return RunResult(row | {"status": "failed", "error": error})
    row |= {
        "status": "finished",
        "best": s["best"]["score"],
        "test_score": s["best"]["test_score"],
        "baseline": s["baseline"],
        "evaluations": s["evals"],
        "tokens": sum(s["tokens"].values()),
        "seconds": s["wall_s"],
        "updates": s.get("updates", {}).get("count", 0),
        "experiments": s["nodes"],  # the summary counts nodes but the seed: experiments
        "valid": s["valid_nodes"],
        "stopped_because": s["stopped_because"],
        **_credit(job.run_dir, s),
        **investigation(s),
    }
    try:
        with Store.open(job.run_dir, create=False) as store:
            state = store.load_state()
    except StoreError as e:  # e.g. someone continued the run by hand: the row stands without its history
        return RunResult(row | {"error": f"store not read: {e}"})
    starts = _sessions(job.run_dir)
    return RunResult(row, curve(state, starts), learning(state, run_clock(state, starts)))


INVESTIGATION = ("decisions", "followed_up", "refinements_run", "pivots", "citing", "sought", "byproducts")
"""The investigation's counts per run (`investigation`)."""


def investigation(summary: dict[str, Any]) -> dict[str, Any]:
    """What the investigation did, from the run's summary (`search.summary.acted`): decisions made, follow-ups
    run on them (the decisions that changed a later round), refinements run, pivots, hypotheses citing an
    observation, and observations sought (probes) against by-products. Empty for a run without a dual
    space (greedy, mutate) or from before these counts."""
    acted, obs = summary.get("acted"), summary.get("observations") or {}
    if not acted or "sources" not in obs or not summary.get("hypotheses"):  # no hypothesis space
        return {}
    sought = obs["sources"].get("probe", 0)
    return {
        "decisions": acted["decisions"],
        "followed_up": sum(acted["followed_up"].values()),
        "refinements_run": acted["refinements_run"],
        "pivots": acted["pivots"],
        "citing": acted["citing"],
        "sought": sought,
        "byproducts": obs["count"] - sought,
    }


def _credit(run_dir: Path, summary: dict[str, Any]) -> dict[str, Any]:
    """The credit check of a TTT run (`training.credit`): from its summary, or from `arts credit`'s
    `credit.json` for a run whose summary has none (made before the check existed)."""
    check = summary.get("credit")
    if check is None and (run_dir / "credit.json").is_file():
        check = json.loads((run_dir / "credit.json").read_text())
    if not check:
        return {}
    return {"credit_concordance": check.get("concordance"), "credit_pairs": check.get("pairs")}


def _sessions(run_dir: Path) -> list[float]:
    path = run_dir / SESSIONS_FILE
    if not path.exists():
        return []
    return [json.loads(line)["start"] for line in path.read_text().splitlines() if line.strip()]


def active_clock(stamps: Sequence[float], starts: Sequence[float]) -> Callable[[float], float]:
    """Seconds of work up to time t. Session k runs from its first record (stamp) to its last; sessions
    begin at `starts` (a worker's start; the first session also takes any earlier stamps)."""
    cuts = sorted(starts)[1:]
    spans: list[tuple[float, float]] = []
    for lo, hi in zip([-math.inf, *cuts], [*cuts, math.inf]):
        inside = [x for x in stamps if lo <= x < hi]
        if inside:
            spans.append((min(inside), max(inside)))

    def clock(t: float) -> float:
        return sum(max(0.0, min(t, b) - a) for a, b in spans)

    return clock


def _end(node: Node) -> float:
    return node.created + node.exec_s + node.eval_s  # exec_s is the node's time less its evaluations


def run_clock(state: SearchState, starts: Sequence[float] = ()) -> Callable[[float], float]:
    """The run's `active_clock`, from every time the store records (events, node starts and ends)."""
    stamps = [e.ts for e in state.events.values()]
    stamps += [t for n in state.nodes.values() for t in (n.created, _end(n))]
    return active_clock(stamps, starts)


def curve(state: SearchState, starts: Sequence[float] = ()) -> list[tuple[int, float, float | None]]:
    """Best score so far after each experiment, against evaluations and seconds (module docstring)."""
    nodes = sorted(state.nodes.values(), key=lambda n: n.id)
    if not nodes:
        return []
    root = next((n for n in nodes if n.parent is None), None)
    done = [n for n in nodes if n.parent is not None]
    evals = sorted(e.ts for e in state.events.values() if e.kind == "eval")
    ends = [_end(n) for n in done]
    clock = run_clock(state, starts)
    best = root if root is not None and root.score is not None else None
    points = [(0, 0.0, best.raw_score if best else None)]
    for i, n in enumerate(done):
        following = done[i + 1].created if i + 1 < len(done) else math.inf
        if n.status == "valid" and n.score is not None and (best is None or n.score > best.score):
            best = n
        points.append(
            (bisect.bisect_left(evals, following), clock(ends[i]), best.raw_score if best else None)
        )
    return points


def entropy(values: Sequence[Hashable]) -> float:
    """Shannon entropy in bits of the values' empirical distribution (NaN for none)."""
    if not values:
        return math.nan
    counts = Counter(values).values()
    n = sum(counts)
    return float(-sum(c / n * math.log2(c / n) for c in counts) + 0.0)


def _target(candidate: dict[str, Any]) -> str:
    from arts.policy.edits.moves import directed_target

    found = directed_target(str(candidate.get("hypothesis", "")))
    return found[1] if found else str(candidate.get("axis", ""))


def _hypothesis(action: str) -> str:
    try:
        return str(json.loads(action).get("hypothesis", ""))
    except (ValueError, AttributeError):
        return ""


def learning(state: SearchState, clock: Callable[[float], float] | None = None) -> list[dict[str, Any]]:
    """Per TTT update (applied or skipped), what the rounds since the previous one showed; with the run's
    clock, also the mean seconds of those rounds (from the first one's start to the update's, less the
    update's own seconds), to weigh what an update costs against a round."""
    clock = clock or (lambda t: t)
    events = sorted(state.events.values(), key=lambda e: e.id)
    starts = {e.payload.get("round"): e.ts for e in events if e.kind == "round_start"}
    ups = sorted(
        (e for e in events if e.kind in ("update", "update_skipped")),
        key=lambda e: (e.payload.get("round", 0), e.id),
    )
    rewards = [e.payload for e in events if e.kind == "rewards"]
    watched = {
        e.payload.get("round"): e.payload for e in events if e.kind == "watch" and e.payload.get("scored")
    }
    move = next((str(e.payload["move"]) for e in events if e.kind == "watch" and e.payload.get("move")), None)
    out, since = [], 0
    for u in ups:
        until = int(u.payload.get("round", 0))
        window = [p["rewards"] for p in rewards if since < p.get("round", 0) <= until and p.get("rewards")]
        flat = [x for g in window for x in g]
        proposals: dict[int, list[dict[str, Any]]] = {}
        drawn = [r for r in sorted(state.rollouts.values(), key=lambda r: r.id) if since < r.round <= until]
        for r in drawn:
            proposals.setdefault(r.group, r.candidates)
        cands = [c for cs in proposals.values() for c in cs]
        lists = {(r.group, tuple(r.tokens) or r.id): r.candidates for r in drawn}  # each sampled list once
        p = u.payload
        first = starts.get(since + 1)
        busy = clock(u.ts) - clock(first) - (p.get("seconds") or 0.0) if first is not None else math.nan
        out.append(
            {
                "update": p.get("k"),
                "round": until,
                "applied": u.kind == "update",
                "groups": len(window),
                "mean_reward": sum(sum(g) / len(g) for g in window) / len(window) if window else math.nan,
                "rewarded_fraction": sum(x > 0 for x in flat) / len(flat) if flat else math.nan,
                "entropy_targets": entropy([_target(c) for c in cands]),
                "entropy_parents": entropy([c.get("parent") for c in cands]),
                "kl": p.get("kl"),
                "loss": p.get("loss"),
                "update_s": p.get("seconds"),
                "round_s": busy / (until - since) if until > since else math.nan,
                # the watched class's draw probability before this update, over the base's, on the newest
                # round (held out), and the updates the adapter had then
                "watch": watched.get(until, {}).get("ratio", math.nan),
                "watch_k": watched.get(until, {}).get("k", math.nan),
                # the watched class: drawn actions of it (what the update could learn it from), and lists
                # that wrote it
                "watched_drawn": sum(_hypothesis(r.action).startswith(move) for r in drawn)
                if move
                else math.nan,
                "watched_written": sum(
                    any(str(c.get("hypothesis", "")).startswith(move) for c in cs) for cs in lists.values()
                )
                if move
                else math.nan,  # fmt: skip
            }
        )
        since = until
    return out
