"""The bench's pictures (PNG): best-so-far curves per task, and the learning figures of TTT runs.

Figures are drawn on matplotlib's Agg canvas directly (`Figure` + `FigureCanvasAgg`, no pyplot), so a
bench on a machine without a display draws the same files, and no global plotting state is touched.

Per task, one file with two panels: the best score so far against evaluations and against seconds of
work. Each run is a thin step line in its method's colour; against evaluations, the median over the
method's runs is drawn thick on top (against seconds, runs do not share a time grid, so none is).
"""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from arts.search.bench.results import RunResult

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-") or "task"


def _save(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=110)
    return path


def _on_grid(points: list[tuple[int, float, float | None]], grid: np.ndarray) -> np.ndarray:
    """The step function best(evaluations) sampled at `grid` (NaN before the first score)."""
    xs = [p[0] for p in points if p[2] is not None]
    ys = [p[2] for p in points if p[2] is not None]
    out = np.full(grid.shape, np.nan)
    for i, g in enumerate(grid):
        j = np.searchsorted(xs, g, side="right") - 1
        out[i] = ys[j] if j >= 0 else np.nan
    return out


def curves(task: str, direction: str, results: list[RunResult], out: Path) -> Path | None:
    """`curves-<task>.png`: best so far against evaluations and against seconds, per run and method."""
    runs = [r for r in results if r.curve and any(p[2] is not None for p in r.curve)]
    if not runs:
        return None
    methods = list(dict.fromkeys(r.row["method"] for r in runs))
    fig = Figure(figsize=(11, 4.2))
    by_evals, by_secs = fig.subplots(1, 2)
    top = max(p[0] for r in runs for p in r.curve)
    grid = np.arange(0, top + 1)
    for i, m in enumerate(methods):
        color = COLORS[i % len(COLORS)]
        mine = [r for r in runs if r.row["method"] == m]
        for r in mine:
            pts = [p for p in r.curve if p[2] is not None]
            by_evals.step(
                [p[0] for p in pts], [p[2] for p in pts], where="post", color=color, alpha=0.3, lw=0.8
            )
            by_secs.step(
                [p[1] for p in pts], [p[2] for p in pts], where="post", color=color, alpha=0.5, lw=0.9
            )
        stacked = np.vstack([_on_grid(r.curve, grid) for r in mine])
        with warnings.catch_warnings():  # a column with no score yet stays NaN (not drawn)
            warnings.simplefilter("ignore", RuntimeWarning)
            median = np.nanmedian(stacked, axis=0)
        by_evals.step(grid, median, where="post", color=color, lw=2.2, label=f"{m} (median of {len(mine)})")
        by_secs.plot([], [], color=color, label=m)
    better = "higher" if direction != "minimize" else "lower"
    by_evals.set(xlabel="evaluations", ylabel=f"best score so far ({better} is better)", title=task)
    by_evals.xaxis.set_major_locator(MaxNLocator(integer=True))
    by_secs.set(xlabel="seconds of work", title=f"{task}: against time")
    for ax in (by_evals, by_secs):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, out / f"curves-{_slug(task)}.png")


PANELS = [
    ("mean_reward", "mean group reward"),
    ("rewarded_fraction", "fraction of actions rewarded"),
    ("entropy_targets", "entropy over targets (bits)"),
    ("entropy_parents", "entropy over parents (bits)"),
    ("kl", "KL to the base"),
    ("loss", "GRPO loss"),
]


def _value(y: Any) -> float:
    return float(y) if isinstance(y, (int, float)) and not math.isnan(y) else np.nan


def learning(updates: list[dict[str, Any]], out: Path) -> Path:
    """`learning.png`: per update, the reward, the rewarded fraction, the proposals' entropies, the KL and
    the loss, one line per TTT run (colour by task), against the round each update came after."""
    fig = Figure(figsize=(12, 6.5))
    axes = fig.subplots(2, 3).ravel()
    tasks = list(dict.fromkeys(u["task"] for u in updates))
    runs: dict[tuple, list[dict[str, Any]]] = {}
    for u in updates:
        runs.setdefault((u["task"], u["method"], u["seed"]), []).append(u)
    for ax, (key, title) in zip(axes, PANELS):
        shown = set()
        for (task, *_), us in runs.items():
            ys = [_value(u.get(key)) for u in us]
            if all(np.isnan(ys)):
                continue
            color = COLORS[tasks.index(task) % len(COLORS)]
            xs = [u["round"] for u in us]
            ax.plot(xs, ys, color=color, alpha=0.6, label=None if task in shown else task)
            shown.add(task)
            for x, y, u in zip(xs, ys, us):  # filled: the update was applied; hollow: skipped (no signal)
                ax.plot([x], [y], "o", ms=4, color=color, mfc=color if u["applied"] else "white")
        ax.set(title=title, xlabel="round of the update")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        if shown:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "not recorded", ha="center", va="center", transform=ax.transAxes)
    fig.tight_layout()
    return _save(fig, out / "learning.png")
