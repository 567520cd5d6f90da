"""The sections of a bench's `summary.md` about what the methods did beyond their scores: the test-time
training updates (`learning_section`), the credit check (did the adapters prefer what later paid off?) and
the investigation (what the decisions changed).

Each returns its lines, or none where no run has anything to show; `report.write_report` places them after
the score tables, which it builds itself. Nothing here writes a file or draws a figure (`figures` does).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from arts.search.bench.markdown import fmt, heading, mean, num, table
from arts.search.bench.metrics import mean_ci
from arts.search.bench.plan import BenchConfig
from arts.search.bench.results import INVESTIGATION


def learning_summary(updates: list[dict[str, Any]]) -> list[str]:
    """Per task and method, then over every task: what the updates had to learn from and what they did.
    Rounds without signal (every action rewarded alike) are skipped updates; the KL is that of the last
    applied update of each run before its step (how far the updates before it moved the adapter), the
    median over runs and the largest; the entropies are means over updates (a collapse shows as 0); the
    seconds are every update's against every round's (a skipped update costs nothing), then the median of
    an applied update's against its round's."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for u in updates:
        groups[(u["task"], u["method"])].append(u)
        groups[("all tasks", u["method"])].append(u)
    body = []
    for (task, method), us in sorted(groups.items(), key=lambda kv: kv[0][0] == "all tasks"):
        runs: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for u in us:
            runs[u["seed"] if task != "all tasks" else (u["task"], u["seed"])].append(u)
        applied = [u for u in us if u["applied"]]
        last_kl = [
            a[-1]["kl"] for a in ([u for u in r if u["applied"] and num(u["kl"])] for r in runs.values()) if a
        ]
        seconds = [sum(u[k] for u in us if num(u.get(k))) for k in ("update_s", "round_s")]
        each = [
            u["update_s"] / u["round_s"]
            for u in applied
            if num(u.get("update_s")) and num(u.get("round_s")) and u["round_s"]
        ]
        watched = [
            u["watch"] for u in us if num(u.get("watch")) and num(u.get("watch_k")) and u["watch_k"] >= 1
        ]
        body.append([
            task, method, str(len(runs)), str(len(us)), f"{len(us) - len(applied)} ({1 - len(applied) / len(us):.0%})",
            fmt(statistics.median(last_kl) if last_kl else None, 2), fmt(max(last_kl, default=None), 2),
            fmt(mean([u["entropy_targets"] for u in us]), 3), fmt(mean([u["entropy_parents"] for u in us]), 3),
            f"{fmt(seconds[0] / seconds[1] if seconds[1] else None, 2)}; {fmt(statistics.median(each) if each else None, 2)}",
            f"{fmt(statistics.median(watched), 2)} ({sum(w >= 2 for w in watched)}/{len(watched)})" if watched else "-",
            "/".join(str(int(sum(u[k] for u in us if num(u.get(k))))) for k in ("watched_drawn", "watched_written"))
            if any(num(u.get("watched_drawn")) for u in us) else "-",
        ])  # fmt: skip
    header = ["task", "method", "runs", "updates", "no signal (skipped)", "KL before the last (median)"]
    header += ["KL before the last (max)", "H(targets)", "H(parents)", "update s / round s (all; applied)"]
    header += ["watch, held out (median; >= 2x)", "watched class drawn / lists writing it"]
    return table(header, body)


def learning_section(updates: list[dict[str, Any]], pic: Any) -> list[str]:
    keys = ["mean_reward", "rewarded_fraction", "entropy_targets", "entropy_parents", "kl", "loss"]
    keys += ["update_s", "round_s", "watch"]
    body = [
        [u["task"], u["method"], str(u["seed"]), str(u["update"] if u["update"] is not None else "-"),
         str(u["round"]), "yes" if u["applied"] else "skipped", *(fmt(u.get(k), 3) for k in keys)]
        for u in updates
    ]  # fmt: skip
    header = ["task", "method", "seed", "update", "round", "applied", "mean reward", "rewarded"]
    lines = ["## Learning (test-time training)", "", "Per update, over the rounds since the previous one; "]
    lines[-1] += "entropies in bits over the candidates proposed; KL of the adapter to the base on the "
    lines[-1] += "update's actions (per token, before its step). In the "
    lines[-1] += (
        "figure, filled markers are applied updates, hollow ones updates skipped for lack of signal. "
    )
    lines[-1] += (
        "Watch: the watched class's draw probability under the adapter over the base's, on the round "
    )
    lines[-1] += (
        "the update is about to train on (held out), where that round's lists wrote it; in sum, over "
    )
    lines[-1] += "the watches after at least one applied update."
    header += ["H(targets)", "H(parents)", "KL", "loss", "update s", "round s", "watch"]
    lines += ["", "In sum:", "", *learning_summary(updates), "", "Every update:", "", *table(header, body)]
    return lines + (["", f"![learning]({pic.name})"] if pic else [])


def credit_section(cfg: BenchConfig, rows: list[dict[str, Any]]) -> list[str]:
    """Per method with TTT runs: the credit check's concordance, per task and pooled, with intervals."""
    checked = [r for r in rows if num(r.get("credit_concordance"))]
    if not checked:
        return []
    lines = heading(
        "Credit check (did training learn what pays off?)",
        "Per run, over pairs of differently rewarded actions of one proposal: the share where the adapter in "
        "force, trained on earlier rounds only, had raised the better action's log-probability over the base "
        "model's more than the worse one's (`arts credit`). 0.5 is no learning; an interval above 0.5 says the "
        "adapters preferred what later evaluations rewarded. Mean over runs, stratified bootstrap 95% interval.",
    )
    body = []
    for method in dict.fromkeys(r["method"] for r in checked):
        mine = [r for r in checked if r["method"] == method]
        tasks = list(dict.fromkeys(r["task"] for r in mine))
        strata = [[r["credit_concordance"] for r in mine if r["task"] == t] for t in tasks]
        for t, values in zip([*tasks, "all tasks"], [*([s] for s in strata), strata]):
            pairs = sum(r["credit_pairs"] or 0 for r in mine if t == "all tasks" or r["task"] == t)
            ci = mean_ci(values, n_resamples=cfg.bootstrap_resamples)
            body.append([t, method, str(sum(len(v) for v in values)), str(pairs), ci.fmt()])
    return lines + table(["task", "method", "runs", "pairs", "concordance [95% CI]"], body)


def investigation_section(rows: list[dict[str, Any]]) -> list[str]:
    """Per method with a dual space: the mean per run of what its investigation decided and did."""
    mine = [r for r in rows if r["status"] == "finished" and num(r.get("decisions"))]
    if not mine:
        return []
    lines = heading(
        "Investigation (what the decisions changed)",
        "Mean per run: decisions made (routes and reflections), follow-ups run on them (a decision that changed "
        "a later round), refinements run, pivots, hypotheses citing an observation, observations sought "
        "(probes) and observations that came as by-products.",
    )
    body = []
    for method in dict.fromkeys(r["method"] for r in mine):
        runs = [r for r in mine if r["method"] == method]
        body.append([method, str(len(runs)), *(fmt(mean([r[k] for r in runs]), 3) for k in INVESTIGATION)])
    return lines + table(["method", "runs", *(k.replace("_", " ") for k in INVESTIGATION)], body)
