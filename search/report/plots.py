"""The report's pictures as inline SVG: the search tree and line charts with real axes.

Inline SVG keeps the report one offline file (no plotting library, no network): each chart is a few hundred
elements written here. The tree draws every node as one `<g class="node">` (the browser test counts them)
labelled with its id, its score and its move (`search.report.labels`), edges from parent to child, the dot
coloured by the node's verdict against the seed in the task's direction (green better, red worse, grey the
same, blue the seed; deeper the further from the seed), invalid nodes hollow with a dark red cross, pending
ones dashed, and the path from the root to the best node drawn thick. A chart with a single x (one update,
only the seed) is written as text: axes around one point would be invented.

Not done here: layouts for forests (a run has one root).
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

from arts.search.report.labels import move_label, shade, verdict
from arts.search.state import Node

BEST = "#c40"
INVALID = "#8b0000"


def _e(x: object) -> str:
    return html.escape(str(x), quote=True)


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def ticks(lo: float, hi: float, n: int = 5, integer: bool = False) -> list[float]:
    """About n round tick values from at or below lo to at or above hi (1, 2 or 5 times a power of ten
    apart), so that the axis covers every point."""
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    step = max(step, 1.0) if integer else step  # evaluations and updates are counted, never fractional
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    return [round(i * step, 12) for i in range(first, last + 1)]


@dataclass
class Series:
    label: str
    points: list[tuple[float, float]]
    color: str = BEST
    line: bool = True
    """Draw a step line through the points (best-so-far); False: dots only."""


def line_chart(
    series: list[Series],
    xlabel: str,
    ylabel: str,
    width: int = 500,
    height: int = 240,
    integer_x: bool = False,
) -> str:
    """An SVG chart with ticked, labelled axes; points are (x, y) in data units (`integer_x`: x counts)."""
    pts = [p for s in series for p in s.points]
    if not pts:
        return "<p>No valid node yet.</p>"
    if len({p[0] for p in pts}) == 1:  # one x: an axis would be invented around it, so say the figure
        x = pts[0][0]
        said = "; ".join(f"{_e(s.label)} {_fmt(s.points[-1][1])}" for s in series if s.points)
        return (
            f'<div class="figure" role="figure" aria-label="{_e(ylabel)}"><b>{_e(ylabel)}</b>: {said}'
            f"<br><small>one point so far ({_e(xlabel)} {_fmt(x)}): no chart yet</small></div>"
        )
    left, right, top, bottom = 62, 12, 12, 42
    xs = ticks(min(p[0] for p in pts), max(p[0] for p in pts), integer=integer_x)
    ys = ticks(*_span([p[1] for p in pts]))
    x0, x1, y0, y1 = xs[0], xs[-1], ys[0], ys[-1]

    def X(x: float) -> float:
        return left + (width - left - right) * (x - x0) / (x1 - x0)

    def Y(y: float) -> float:
        return height - bottom - (height - top - bottom) * (y - y0) / (y1 - y0)

    out = [f'<svg class="chart" width="{width}" height="{height}" role="img" aria-label="{_e(ylabel)}">']
    for t in ys:
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{Y(t):.1f}" y2="{Y(t):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{left - 5}" y="{Y(t) + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
    for t in xs:
        out.append(f'<line x1="{X(t):.1f}" x2="{X(t):.1f}" y1="{height - bottom}" y2="{height - bottom + 4}" stroke="#555"/>')  # fmt: skip
        out.append(f'<text x="{X(t):.1f}" y="{height - bottom + 16}" text-anchor="middle">{_fmt(t)}</text>')  # fmt: skip
    out.append(f'<polyline points="{left},{top} {left},{height - bottom} {width - right},{height - bottom}" fill="none" stroke="#555"/>')  # fmt: skip
    out.append(f'<text x="{(left + width - right) / 2:.0f}" y="{height - 6}" text-anchor="middle">{_e(xlabel)}</text>')  # fmt: skip
    out.append(f'<text transform="translate(13 {(top + height - bottom) / 2:.0f}) rotate(-90)" text-anchor="middle">{_e(ylabel)}</text>')  # fmt: skip
    for s in series:
        if s.line and s.points:
            steps, last = [], None
            for x, y in s.points:
                if last is not None:
                    steps.append(f"{X(x):.1f},{Y(last):.1f}")
                steps.append(f"{X(x):.1f},{Y(y):.1f}")
                last = y
            out.append(f'<polyline points="{" ".join(steps)}" fill="none" stroke="{s.color}" stroke-width="2"><title>{_e(s.label)}</title></polyline>')  # fmt: skip
        else:
            out += [
                f'<circle cx="{X(x):.1f}" cy="{Y(y):.1f}" r="2.5" fill="{s.color}"><title>{_e(s.label)}: {_fmt(y)}</title></circle>'
                for x, y in s.points
            ]
    out.append("</svg>")
    return "".join(out)


def _span(values: list[float]) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.05 or abs(hi) * 0.05 or 0.05  # all zero: a narrow band, not -1..1
    return lo - pad, hi + pad


def _layout(nodes: dict[int, Node]) -> dict[int, tuple[int, float]]:
    """(depth, row) per node: leaves take consecutive rows, a parent sits between its first and last child."""
    children: dict[int | None, list[int]] = {}
    for n in sorted(nodes.values(), key=lambda n: n.id):
        parent = n.parent if n.parent in nodes else None
        children.setdefault(parent, []).append(n.id)
    pos: dict[int, tuple[int, float]] = {}
    row = 0.0
    stack: list[tuple[int, int, bool]] = [(r, 0, False) for r in reversed(children.get(None, []))]
    while stack:  # iterative post-order: deep chains must not hit the recursion limit
        nid, depth, done = stack.pop()
        kids = children.get(nid, [])
        if not kids:
            pos[nid], row = (depth, row), row + 1
        elif done:
            pos[nid] = (depth, (pos[kids[0]][1] + pos[kids[-1]][1]) / 2)
        else:
            stack.append((nid, depth, True))
            stack += [(k, depth + 1, False) for k in reversed(kids)]
    return pos


def _result(n: Node) -> str:
    return f"{n.raw_score:.4g}" if n.score is not None else n.status


def tree_svg(nodes: dict[int, Node], best: int | None) -> str:
    """The search tree (see the module docstring for the encoding)."""
    if not nodes:
        return "<p>No node yet.</p>"
    pos = _layout(nodes)
    rows = max(r for _, r in pos.values()) + 1
    dx, dy = 280.0, 24.0
    width = int(40 + max(d for d, _ in pos.values()) * dx + 250)
    height = int(rows * dy + 16)
    seed = next((n for n in nodes.values() if n.parent is None), None)
    scored = [n.score for n in nodes.values() if n.score is not None]
    lo, hi = (min(scored), max(scored)) if scored else (0.0, 1.0)
    on_path: set[int] = set()
    cur = best
    while cur is not None and cur in nodes and cur not in on_path:
        on_path.add(cur)
        cur = nodes[cur].parent

    def xy(nid: int) -> tuple[float, float]:
        d, r = pos[nid]
        return 16 + d * dx, 14 + r * dy

    texts = {n.id: (_result(n), move_label(n.hypothesis)) for n in nodes.values()}
    edges, marks = [], []
    for n in sorted(nodes.values(), key=lambda n: n.id):
        x, y = xy(n.id)
        if n.parent in nodes:
            px, py = xy(n.parent)
            # from the end of the parent's label (about 6.3 px a character), so no edge runs through it
            px = min(px + 16 + 6.3 * len(f"{n.parent} {' '.join(texts[n.parent])}"), x - 40)
            stroke = (
                f'stroke="{BEST}" stroke-width="3"' if n.id in on_path else 'stroke="#aaa" stroke-width="1"'
            )
            mid = (px + x - 8) / 2
            edges.append(f'<path d="M{px:.1f},{py:.1f} C{mid:.1f},{py:.1f} {mid:.1f},{y:.1f} {x - 8:.1f},{y:.1f}" fill="none" {stroke}/>')  # fmt: skip
        v = verdict(n, seed)
        if v == "invalid":
            look = f'fill="#fff" stroke="{INVALID}" stroke-width="2"'
            mark = f'<path d="M{x - 4:.1f},{y - 4:.1f}l8,8m0,-8l-8,8" stroke="{INVALID}" stroke-width="2"/>'
        elif v == "pending":
            look, mark = 'fill="#fff" stroke="#888" stroke-dasharray="2 2"', ""
        else:
            look, mark = f'fill="{shade(n, seed, lo, hi)}" stroke="#333"', ""
        result, move = texts[n.id]
        ring = f'<circle cx="{x:.1f}" cy="{y:.1f}" r="11" fill="none" stroke="{BEST}" stroke-width="2"/>' if n.id == best else ""  # fmt: skip
        tip = f"node {n.id}" + (f" ← {n.parent}" if n.parent is not None else " (seed)")
        tip += f" · round {n.round} · {result} ({v})" + (f" · {n.hypothesis[:160]}" if n.hypothesis else "")
        colour = INVALID if v == "invalid" else "#222"
        marks.append(
            f'<g class="node" data-node="{n.id}" data-status="{n.status}" data-verdict="{v}">'
            f'<a href="#node-{n.id}">{ring}<circle class="dot" cx="{x:.1f}" cy="{y:.1f}" r="7" {look}/>{mark}'
            f'<text x="{x + 13:.1f}" y="{y + 4:.1f}" fill="{colour}"><tspan font-weight="bold">{n.id}</tspan>'
            f' <tspan class="score">{_e(result)}</tspan> <tspan class="move">{_e(move)}</tspan>'
            f"</text><title>{_e(tip)}</title></a></g>"
        )
    return (
        f'<svg class="tree" width="{width}" height="{height}" role="img" aria-label="search tree">'
        + "".join(edges)
        + "".join(marks)
        + "</svg>"
    )
