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
