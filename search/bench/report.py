"""The bench's report: `runs.parquet` and `runs.csv` (one row per run), `updates.csv` (one row per TTT
update), `curves.csv` (every run's best-so-far points), `summary.md`, and the figures (`figures`).

Per task, a run's normalised score puts the seed program at 0 and the reference at 1: the task's
`metric.best_known` where `task.toml` gives one, else the best score any run of this bench found (in the
task's direction). The score normalised is the run's best validation score, the one every run has (the
seed program is never test-scored). The seed's score is the median of the runs' measured seed scores (this machine, this
evaluator), falling back to `metric.baseline`. Across tasks, per method: the IQM and the optimality gap of
the normalised scores over runs x tasks, and for each pair of methods the difference of their IQMs over
the tasks both ran, each with a stratified bootstrap 95% interval (`metrics`). Failed runs are listed, not
scored: a crash says nothing about a method's search.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable
from itertools import combinations
from typing import Any

import pandas as pd

from arts.search.bench import figures
from arts.search.bench.markdown import fmt, mean, num, table
from arts.search.bench.metrics import (
    Interval,
    iqm_ci,
    iqm_difference_ci,
    normalised_score,
    optimality_gap_ci,
)
from arts.search.bench.plan import METHOD_ALIASES, WARM, BenchConfig
from arts.search.bench.results import INVESTIGATION, RunResult
from arts.search.bench.sections import credit_section, investigation_section, learning_section
from arts.search.bench.tables import write_curves
from arts.tasks.base import Task

COLUMNS = [
    "task", "method", "seed", "status", "best", "test_score", "baseline", "evaluations", "tokens", "seconds",
    "updates", "experiments", "valid", "credit_concordance", "credit_pairs", "normalised", "stopped_because",
    "run_dir", "error", *INVESTIGATION,
]  # fmt: skip

UPDATE_COLUMNS = [
    "task", "method", "seed", "update", "round", "applied", "groups", "mean_reward", "rewarded_fraction",
    "entropy_targets", "entropy_parents", "kl", "loss", "update_s", "round_s", "watch", "watch_k",
    "watched_drawn", "watched_written",
]  # fmt: skip


def normalise(tasks: dict[str, Task], results: list[RunResult]) -> dict[str, dict[str, Any]]:
    """Fill each finished row's `normalised`; returns per task name its seed, reference and their sources."""
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        by_task[r.row["task"]].append(r.row)
    norms = {}
    for task in tasks.values():
        rows = [r for r in by_task[task.name] if r["status"] == "finished"]
        metric = task.config.metric
        maximize = metric is None or metric.direction == "maximize"
        measured = [r["baseline"] for r in rows if r["baseline"] is not None]
        seed = statistics.median(measured) if measured else (metric.baseline if metric else None)
        seen = [r["best"] for r in rows if r["best"] is not None]
        if metric is not None and metric.best_known is not None:
            ref, source = metric.best_known, "best known"
        else:
            ref, source = ((max if maximize else min)(seen), "best seen") if seen else (None, "none")
        norms[task.name] = {
            "direction": metric.direction if metric else "none",
            "seed": seed,
            "seed_source": "measured" if measured else "task.toml",
            "reference": ref,
            "reference_source": source,
        }
        if task.config.kind == "answer":  # the search sees no score; the hidden grade is already 0 to 1
            norms[task.name].update(
                seed=0.0, seed_source="no answer", reference=1.0, reference_source="the truth"
            )
            for r in rows:
                r["normalised"] = r["test_score"] if num(r.get("test_score")) else math.nan
            continue
        for r in rows:
            scorable = seed is not None and ref is not None
            r["normalised"] = normalised_score(r["best"], seed, ref) if scorable else math.nan
    return norms


def strata(rows: list[dict[str, Any]], method: str, tasks: list[str]) -> list[list[float]]:
    """The method's normalised scores, one list per task (finished, scorable runs only)."""
    return [
        [
            r["normalised"]
            for r in rows
            if r["task"] == t and r["method"] == method and num(r.get("normalised"))
        ]
        for t in tasks
    ]


def _oriented(pair: tuple[str, str]) -> tuple[str, str]:
    """A pair of methods in listing order, except that a variant (`arts-ttt`, `arts-warm`) comes before its
    base (`arts`): the difference then reads as what the variant adds."""
    a, b = pair
    return (b, a) if METHOD_ALIASES.get(b, ("",))[0] == a or b == a + WARM else (a, b)


def aggregate(cfg: BenchConfig, rows: list[dict[str, Any]], names: list[str]) -> list[str]:
    kw = {"n_resamples": cfg.bootstrap_resamples, "seed": 0}
    lines = ["## Across tasks", ""]
    body = []
    for m in cfg.methods:
        mine = [r for r in rows if r["method"] == m and r["status"] == "finished"]
        st = strata(rows, m, names)
        body.append(
            [m, str(sum(map(len, st))), iqm_ci(st, **kw).fmt(), optimality_gap_ci(st, **kw).fmt()]
            + [fmt(mean([r[k] for r in mine])) for k in ("evaluations", "seconds", "tokens")]
        )
    lines += table(
        ["method", "runs", "IQM [95% CI]", "optimality gap [95% CI]", "evals", "seconds", "tokens"], body
    )
    lines += ["", "## Differences of IQM", ""]
    if len(cfg.methods) < 2:
        return lines + [f"One method ({cfg.methods[0]}): no pair to compare; add one to --methods."]
    lines += ["Over the tasks both methods ran; an interval above 0: A is better.", ""]
    diffs = []
    for a, b in map(_oriented, combinations(cfg.methods, 2)):
        sa, sb = strata(rows, a, names), strata(rows, b, names)
        both = [i for i in range(len(names)) if sa[i] and sb[i]]
        ci: Interval = iqm_difference_ci([sa[i] for i in both], [sb[i] for i in both], **kw)
        diffs.append([f"{a} − {b}", str(len(both)), ci.fmt()])
    return lines + table(["A − B", "tasks", "IQM(A) − IQM(B) [95% CI]"], diffs)


def _valid_share(rows: list[dict[str, Any]]) -> str:
    """Valid experiments of all the runs' experiments, e.g. `23/36 (64%)`; "-" for tables without them."""
    pairs = [
        (r["valid"], r["experiments"]) for r in rows if num(r.get("valid")) and num(r.get("experiments"))
    ]
    valid, total = sum(int(v) for v, _ in pairs), sum(int(t) for _, t in pairs)
    return f"{valid}/{total} ({100 * valid / total:.0f}%)" if total else "-"


def per_task(
    cfg: BenchConfig, rows: list[dict[str, Any]], norms: dict[str, dict[str, Any]], pics: dict
) -> list[str]:
    lines = ["## Per task"]
    for name, n in norms.items():
        lines += [
            "",
            f"### {name}",
            "",
            f"{n['direction']}; seed {fmt(n['seed'])} ({n['seed_source']}) = 0, "
            f"reference {fmt(n['reference'])} ({n['reference_source']}) = 1.",
            "",
        ]
        body = []
        for m in cfg.methods:
            mine = [r for r in rows if r["task"] == name and r["method"] == m and r["status"] == "finished"]
            best = [r["best"] for r in mine if num(r["best"])]
            test = [r["test_score"] for r in mine if num(r["test_score"])]
            norm = [r["normalised"] for r in mine if num(r.get("normalised"))]
            body.append(
                [m, str(len(mine)), fmt(statistics.median(best)) if best else "-",
                 f"{fmt(min(best))} – {fmt(max(best))}" if best else "-",
                 fmt(statistics.median(test)) if test else "-", fmt(mean(norm), 3),
                 fmt(statistics.median(norm), 3) if norm else "-", fmt(mean([r["seconds"] for r in mine])),
                 _valid_share(mine), f"{sum(x > 0 for x in norm)}/{len(norm)}"]
            )  # fmt: skip
        header = ["method", "runs", "best (median)", "best (range)", "test (median)", "normalised (mean)"]
        header += ["normalised (median)", "seconds (mean)", "valid experiments", "beat the seed"]
        lines += table(header, body)
        if name in pics:
            lines += ["", f"![best so far on {name}]({pics[name].name})"]
    return lines


def write_report(
    cfg: BenchConfig,
    tasks: dict[str, Task],
    results: list[RunResult],
    log: Callable[[str], None] = print,
    pending: int = 0,
) -> None:
    """The tables, figures and `summary.md` of the given runs; `pending` runs are still to come."""
    out = cfg.out
    norms = normalise(tasks, results)
    rows = [r.row for r in results]
    frame = pd.DataFrame([{c: r.get(c) for c in COLUMNS} for r in rows], columns=COLUMNS)
    frame.to_parquet(out / "runs.parquet", index=False)
    frame.to_csv(out / "runs.csv", index=False)
    updates = [{**{k: r.row[k] for k in ("task", "method", "seed")}, **u} for r in results for u in r.updates]
    pd.DataFrame(updates, columns=UPDATE_COLUMNS).to_csv(out / "updates.csv", index=False)
    write_curves(out, results)
    pics = {}
    for name in norms:
        mine = [r for r in results if r.row["task"] == name]
        if (pic := figures.curves(name, norms[name]["direction"], mine, out)) is not None:
            pics[name] = pic
    pic = figures.learning(updates, out) if updates else None
    names = list(norms)
    failed = [r for r in rows if r["status"] != "finished"]
    model = f"model {cfg.model}" if cfg.model else "the default model"
    sets = "; set: " + ", ".join(f"{k}={v}" for k, v in cfg.overrides.items()) if cfg.overrides else ""
    lines = [
        f"# Bench {out}",
        "",
        f"{len(rows)} runs: tasks {', '.join(names)}; methods {', '.join(cfg.methods)}; seeds "
        f"{', '.join(map(str, cfg.seeds))}; {cfg.evals} evaluations each; {model}{sets}. {len(failed)} failed."
        + (f" {pending} still to run: an interim report." if pending else ""),
        "",
        "Normalised score: the seed program = 0, the reference (best known, else the best any run here found) "
        "= 1. IQM and optimality gap over runs x tasks (as rliable defines them, reimplemented on scipy), "
        "with stratified bootstrap 95% intervals "
        f"({cfg.bootstrap_resamples} resamples, seed 0).",
        "",
        *aggregate(cfg, rows, names),
        "",
        *per_task(cfg, rows, norms, pics),
    ]
    if updates:
        lines += ["", *learning_section(updates, pic)]
    if credit := credit_section(cfg, rows):
        lines += ["", *credit]
    if investigated := investigation_section(rows):
        lines += ["", *investigated]
    if failed:
        lines += ["", "## Failed runs", ""]
        for r in failed:
            last = (r.get("error") or "").strip().splitlines()[-1:] or ["(no output)"]
            lines.append(
                f"- {r['task']} / {r['method']} / seed {r['seed']}: `{last[0]}` (log: {r['run_dir']}/bench.log)"
            )
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    log(f"bench: {out / 'summary.md'}, runs.parquet, runs.csv, {len(pics) + bool(pic)} figures")
