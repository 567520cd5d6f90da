"""The run report: one self-contained HTML file (no scripts, no network) built from the store alone.

It shows what people would rather see than read: the best-so-far curve against evaluations, the
score of every node, the tree, the audit notes and memory, the hypotheses with their evidence, the
observations, the failure-attribution decisions, and the TTT updates. Every number in a table comes from
the store; model-written text is escaped and grounded (`search.grounding`: numbers no measurement backs
are redacted, methods the code does not use are marked) and shown as the model's words, never as a result.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from pathlib import Path

from arts.search.grounding import ground, measured_values, numbers
from arts.search.investigation.space import standing
from arts.search.state import Node, SearchState

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


def space_sections(state: SearchState, g: Callable[[str, int | None], str]) -> list[str]:
    """Hypotheses with their standing, observations with their relations, and routing decisions."""
    parts = []
    if state.hypotheses:
        rows = []
        for h in sorted(state.hypotheses.values(), key=lambda h: h.id):
            t = standing(state, h.id)
            node = h.nodes[-1] if h.nodes else None
            rows.append(
                f"<tr><td>h{h.id}</td><td>{_e(h.axis)} / {_e(h.region)}</td><td>{g(h.text, node)}</td>"
                f"<td>{_e(h.status)}{' (archived)' if h.archived else ''}</td><td>{_e(', '.join(map(str, h.nodes)))}</td>"
                f"<td>+{t.confirmed.support} −{t.confirmed.oppose} (provisional +{t.provisional.support} "
                f"−{t.provisional.oppose})</td></tr>"
            )
        parts.append(
            "<h2>Hypotheses</h2><table><tr><th>id</th><th>axis / region</th><th>hypothesis</th><th>status</th>"
            f"<th>nodes</th><th>evidence (confirmed)</th></tr>{''.join(rows)}</table>"
        )
    if state.observations:
        rel: dict[int, list[str]] = {}
        for e in state.evidence.values():
            rel.setdefault(e.observation, []).append(f"{e.relation} h{e.hypothesis}")
        rows = [
            f"<tr><td>o{o.id}</td><td>{_e(o.source)}</td><td>{_e(o.region)}</td><td>{g(o.text, o.node)}</td>"
            f"<td>{'provisional' if o.provisional else f'confirmed ({o.times_seen}x)'}</td>"
            f"<td>{_e(', '.join(rel.get(o.id, [])))}</td></tr>"
            for o in sorted(state.observations.values(), key=lambda o: o.id)[-60:]
        ]
        parts.append(
            "<h2>Observations</h2><table><tr><th>id</th><th>source</th><th>region</th><th>observation</th>"
            f"<th>state</th><th>evidence</th></tr>{''.join(rows)}</table>"
        )
    routes = [e.payload for e in state.events.values() if e.kind == "routing" and e.payload.get("decision")]
    if routes:
        rows = []
        for r in routes:
            d = r["decision"]
            cause = (d.get("cause") or {}).get("cause", "")
            rows.append(
                f"<tr><td>{_e(r.get('round'))}</td><td>{_e(r.get('node'))}</td><td>{_e(d.get('action'))}</td>"
                f"<td>{'yes' if d.get('clamped') else ''}</td><td>{g(cause, r.get('node'))}</td></tr>"
            )
        parts.append(
            "<h2>Failure attribution</h2><table><tr><th>round</th><th>node</th><th>action</th><th>clamped</th>"
            f"<th>top cause (model's words)</th></tr>{''.join(rows)}</table>"
        )
    return parts


def grounder(state: SearchState) -> Callable[[str, int | None], str]:
    """Model-written text as HTML: numbers no measurement backs are redacted, and methods the code of the
    node it refers to (else the best node) does not use are marked."""
    values = measured_values(state)
    best = state.best()

    def g(text: str, node: int | None) -> str:
        n = state.nodes.get(node) if node is not None else best
        code = "\n".join(n.files.values()) if n else ""
        parent = state.nodes.get(n.parent) if n and n.parent is not None else None
        # a number written in the program (its own or its parent's, e.g. "MARGIN from 0.01") is in the store too
        known = values + [x.value for f in (n, parent) if f for t in f.files.values() for x in numbers(t)]
        return _e(ground(text, known, code).text)

    return g


def render_report(state: SearchState, summary: dict | None, title: str) -> str:
    nodes = sorted((n for n in state.nodes.values()), key=lambda n: n.id)
    g = grounder(state)
    audits = [g(i.text, None) for i in state.insights.values() if i.kind == "audit"]
    memory = [g(i.text, i.node) for i in state.insights.values() if i.kind == "memory" and i.active]
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
                    ("answer node", summary.get("answer_node")),
                    ("stopped", summary.get("stopped_because")),
                )
            )
            + "</div>"
        )
    parts.append("<h2>Best so far</h2>" + curve_svg(nodes))
    if audits:
        parts.append(
            "<h2>Audit (model's words)</h2><ul>" + "".join(f"<li>{a}</li>" for a in audits) + "</ul>"
        )
    if memory:
        parts.append("<h2>Memory</h2><ul>" + "".join(f"<li>{m}</li>" for m in memory[-30:]) + "</ul>")
    parts += space_sections(state, g)
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
