"""What the harness shows the scientist about a node, and the one-line insight it keeps after each expansion.

An inspection report holds the node's code diff against its parent, its training curves, the tail of its
output and its result — all measured, none model-written. Insights are written by the harness from
measured numbers only, so memory never carries an invented figure. The node's folder is one the evaluated
program could write in: its files are read without following links (`tasks.workcopy.read_text`).
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

from arts.search.state import Insight, Node, SearchState
from arts.tasks.workcopy import read_text


def diff(parent: Node | None, node: Node, max_lines: int = 30) -> str:
    before = parent.files if parent else {}
    out: list[str] = []
    for name in sorted(set(before) | set(node.files)):
        a, b = before.get(name, "").splitlines(), node.files.get(name, "").splitlines()
        out += [
            ln
            for ln in difflib.unified_diff(a, b, name, name, n=1, lineterm="")
            if not ln.startswith(("---", "+++"))
        ]
    if len(out) > max_lines:
        out = out[:max_lines] + [f"... ({len(out) - max_lines} more diff lines)"]
    return "\n".join(out) or "(no change)"


def curves(node_dir: Path, points: int = 5) -> str:
    lines = [ln for ln in read_text(node_dir / "curves.jsonl", 256 << 10).splitlines() if ln.strip()]
    keep = lines if len(lines) <= points else [lines[0], *lines[-(points - 1) :]]
    return "\n".join(ln[:120] for ln in keep)


def tail(path: Path, lines: int = 4) -> str:
    return "\n".join(ln[:160] for ln in read_text(path, 64 << 10).splitlines()[-lines:])


def report(state: SearchState, node: Node, node_dir: Path) -> str:
    """The inspection report of one node (bounded: ~40 lines at most)."""
    parent = state.nodes.get(node.parent) if node.parent is not None else None
    status = f"score {node.raw_score:.5g}" if node.raw_score is not None else f"INVALID: {node.reason[:160]}"
    parts = [f"### node {node.id} (parent {node.parent}): {node.hypothesis[:120]}", f"result: {status}"]
    if parent is not None and parent.raw_score is not None:
        parts.append(f"parent score: {parent.raw_score:.5g}")
    parts.append("diff:\n" + diff(parent, node))
    for title, text in (("curves", curves(node_dir)), ("stderr tail", tail(node_dir / "stderr.txt"))):
        if text:
            parts.append(f"{title}:\n{text}")
    return "\n".join(parts)


NEGLIGIBLE = 1e-3
"""A regression smaller than this share of the parent's score is reported as negligible."""
CURVE_KEYS = ("train_loss", "loss", "val_loss")


def signals(state: SearchState, node: Node, node_dir: Path, deterministic: bool = False) -> list[str]:
    """What the harness measured about a failure, as facts the causes and the critic weigh: an exception, a
    time or memory limit, a non-finite result, the training curve's last move, the size of a regression,
    and whether the measurement is exact. Read from the node, its folder and its parent; no model."""
    out: list[str] = []
    text = f"{node.reason}\n{tail(node_dir / 'stderr.txt', 6)}"
    low = text.lower()
    if node.status == "invalid":
        if "traceback" in low or "error:" in low or "exception" in low:
            last = next((ln for ln in reversed(text.splitlines()) if "Error" in ln or "Exception" in ln), "")
            out.append(f"the program raised an exception{': ' + last.strip()[:100] if last else ''}")
        if "timed out" in low or "timeout" in low or "time limit" in low:
            out.append("it ran past its time limit")
        if "memory" in low:
            out.append("it hit the memory limit")
        if any(w in low for w in ("non-finite", "nan", "diverged", "inf,", "infinity")):
            out.append("its result was not a finite number (diverged)")
    values = _curve(node_dir)
    if len(values) >= 3:
        a, b, c = values[-3:]
        if not all(map(_finite, (a, b, c))) or c > 10 * max(abs(values[0]), 1e-12):
            out.append("its training curve blew up")
        elif c < b < a:
            out.append("its training curve was still falling at the end (under-trained?)")
        elif c > b > a:
            out.append("its training curve rose at the end")
        else:
            out.append("its training curve was flat at the end")
    parent = state.nodes.get(node.parent) if node.parent is not None else None
    if (
        node.score is not None
        and parent is not None
        and parent.score is not None
        and node.score < parent.score
    ):
        drop = (parent.score - node.score) / max(abs(parent.score), 1e-12)
        out.append(
            f"a negligible regression ({drop:.2%} of the parent's score)"
            if drop < NEGLIGIBLE
            else f"{drop:.0%} worse than its parent"
        )
    out.append(
        "the evaluator is deterministic: measuring again gives the same score"
        if deterministic
        else "the evaluator is not known to be deterministic: a score may move when measured again"
    )
    return out


def _finite(v: float) -> bool:
    return v == v and abs(v) != float("inf")


def _curve(node_dir: Path) -> list[float]:
    """The training curve's values (its first loss-like field) from the node's curves.jsonl."""
    values = []
    for line in read_text(node_dir / "curves.jsonl", 256 << 10).splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        key = next((k for k in CURVE_KEYS if isinstance(row, dict) and k in row), None)
        if key is not None and isinstance(row[key], int | float):
            values.append(float(row[key]))
    return values


def failure_report(state: SearchState, node: Node, node_dir: Path, deterministic: bool = False) -> str:
    """The node's report with the harness's `signals`: what attribution reads."""
    facts = signals(state, node, node_dir, deterministic)
    return report(state, node, node_dir) + "\nsignals:\n" + "\n".join(f"- {f}" for f in facts)


def failed_or_regressed(state: SearchState, node: Node) -> bool:
    if node.status == "invalid":
        return True
    parent = state.nodes.get(node.parent) if node.parent is not None else None
    return bool(parent and parent.score is not None and node.score is not None and node.score < parent.score)


def insight_for(state: SearchState, node: Node) -> str:
    """One short line: what was tried, the score reached or the failure mode, relative to the parent."""
    parent = state.nodes.get(node.parent) if node.parent is not None else None
    what = f"{node.axis or 'change'}: {node.hypothesis[:70]}"
    if node.status != "valid" or node.raw_score is None:
        return f"{what} -> invalid ({node.reason.splitlines()[0][:70] if node.reason else 'no result'})"
    if parent is None or parent.score is None:
        return f"{what} -> {node.raw_score:.5g}"
    verdict = "better" if node.score > parent.score else "worse" if node.score < parent.score else "same"
    return f"{what} -> {node.raw_score:.5g} ({verdict} than node {parent.id}: {parent.raw_score:.5g})"


def is_new_insight(state: SearchState, text: str) -> bool:
    """Equivalent insights (same text up to case and spacing) are not stored twice."""
    key = " ".join(text.lower().split())
    return all(" ".join(i.text.lower().split()) != key for i in state.insights.values() if i.active)


def memory_entry(state: SearchState, node: Node, round_: int) -> Insight | None:
    text = insight_for(state, node)
    return (
        Insight(text=text, kind="memory", node=node.id, round=round_) if is_new_insight(state, text) else None
    )


def result_summary(path: Path) -> str:
    try:
        return json.dumps(json.loads(read_text(path)))[:300]
    except (ValueError, RecursionError):
        return ""
