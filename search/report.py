"""The run report: one self-contained HTML file (no scripts, no network) built from the store alone.

It shows what people would rather see than read: the best-so-far curve against evaluations, the
score of every node, the tree, the audit notes and memory, and the TTT updates. Every number comes
from the store; model-written text is escaped and shown as the model's words, never as a result.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from search.state import Node, SearchState

CSS = """body{font:14px system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}table{border-collapse:collapse;width:100%}
td,th{border-bottom:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
.bad{color:#b00}.ok{color:#070}.mono{font-family:monospace;font-size:12px}
.kv span{display:inline-block;margin-right:18px}"""


def _e(x: object) -> str:
    return html.escape(str(x))


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.6g}"


def curve_svg(nodes: list[Node], width: int = 640, height: int = 220) -> str:
    """Every node's score (dots) and the best-so-far line, in node order (direction-normalised)."""
    pts = [(i, n.score, n.raw_score) for i, n in enumerate(nodes) if n.score is not None]
    if not pts:
        return "<p>No valid node yet.</p>"
    lo, hi = min(p[1] for p in pts), max(p[1] for p in pts)
    span = (hi - lo) or 1.0
    n = max(len(nodes) - 1, 1)

    def xy(i: int, s: float) -> tuple[float, float]:
        return 40 + (width - 60) * i / n, height - 25 - (height - 45) * (s - lo) / span

    dots = "".join(
        f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="#48c"><title>node {nodes[i].id}: {_fmt(raw)}</title></circle>'
        for i, s, raw in pts
        for x, y in [xy(i, s)]
    )
    best, line = None, []
    for i, s, _ in pts:
        best = s if best is None or s > best else best
        line.append("{:.1f},{:.1f}".format(*xy(i, best)))
    best_raw = max(pts, key=lambda p: p[1])[2]
    worst_raw = min(pts, key=lambda p: p[1])[2]
    return (
        f'<svg width="{width}" height="{height}" role="img" aria-label="best-so-far curve">'
        f'<polyline points="{" ".join(line)}" fill="none" stroke="#c40" stroke-width="2"/>{dots}'
        f'<text x="4" y="18" font-size="11">{_fmt(best_raw)}</text>'
        f'<text x="4" y="{height - 20}" font-size="11">{_fmt(worst_raw)}</text>'
        f'<text x="{width - 140}" y="{height - 4}" font-size="11">node order → ({len(nodes)} nodes)</text></svg>'
    )


def node_rows(state: SearchState) -> str:
    rows = []
    for n in sorted(state.nodes.values(), key=lambda n: n.id):
        cls = "ok" if n.status in ("valid", "seed") and n.score is not None else "bad"
        result = _fmt(n.raw_score) if n.score is not None else f"invalid: {n.reason[:120]}"
        rows.append(
            f"<tr><td>{n.id}</td><td>{'' if n.parent is None else n.parent}</td><td>{n.round}</td>"
            f"<td>{_e(n.axis)}</td><td>{_e(n.hypothesis[:160]) or '<i>seed</i>'}</td>"
            f'<td class="{cls}">{_e(result)}</td><td>{n.eval_s:.1f}</td></tr>'
        )
    head = "<tr><th>node</th><th>parent</th><th>round</th><th>axis</th><th>hypothesis</th><th>result</th><th>eval s</th></tr>"
    return f"<table>{head}{''.join(rows)}</table>"


def render_report(state: SearchState, summary: dict | None, title: str) -> str:
    nodes = sorted((n for n in state.nodes.values()), key=lambda n: n.id)
    audits = [i.text for i in state.insights.values() if i.kind == "audit"]
    memory = [i.text for i in state.insights.values() if i.kind == "memory" and i.active]
    updates = [e.payload for e in state.events.values() if e.kind == "update"]
    parts = [
        f"<!doctype html><meta charset='utf-8'><title>{_e(title)}</title><style>{CSS}</style><h1>{_e(title)}</h1>"
    ]
    if summary:
        best = summary.get("best", {})
        parts.append(
            '<div class="kv">'
            + "".join(
                f"<span><b>{_e(k)}</b> {_e(v)}</span>"
                for k, v in (
                    ("method", summary.get("method")),
                    ("best", _fmt(best.get("score"))),
                    ("test", _fmt(best.get("test_score"))),
                    ("seed", _fmt(summary.get("baseline"))),
                    ("valid nodes", f"{summary.get('valid_nodes')}/{summary.get('nodes')}"),
                    ("evaluations", summary.get("evals")),
                    ("tokens", sum(summary.get("tokens", {}).values())),
                    ("wall s", summary.get("wall_s")),
                    ("stopped", summary.get("stopped_because")),
                )
            )
            + "</div>"
        )
    parts.append("<h2>Best so far</h2>" + curve_svg(nodes))
    if audits:
        parts.append(
            "<h2>Audit (model's words)</h2><ul>" + "".join(f"<li>{_e(a)}</li>" for a in audits) + "</ul>"
        )
    if memory:
        parts.append("<h2>Memory</h2><ul>" + "".join(f"<li>{_e(m)}</li>" for m in memory[-30:]) + "</ul>")
    if updates:
        rows = "".join(
            f"<tr><td>{_e(u.get('k', i + 1))}</td><td>{_fmt(u.get('loss'))}</td><td>{_fmt(u.get('reward_mean'))}</td>"
            f"<td>{_e(u.get('groups_skipped', '-'))}</td><td>{_fmt(u.get('seconds'))}</td></tr>"
            for i, u in enumerate(updates)
        )
        parts.append(
            "<h2>Test-time training updates</h2><table><tr><th>update</th><th>loss</th><th>reward mean</th>"
            f"<th>skipped groups</th><th>seconds</th></tr>{rows}</table>"
        )
    parts.append("<h2>Nodes</h2>" + node_rows(state))
    return "\n".join(parts)


def write_report(run_dir: Path, state: SearchState) -> Path:
    summary_path = run_dir / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else None
    title = f"arts run {run_dir.name}"
    out = run_dir / "report.html"
    tmp = out.with_suffix(".html.tmp")
    tmp.write_text(render_report(state, summary, title))
    tmp.replace(out)
    return out
