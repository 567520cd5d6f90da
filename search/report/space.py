"""The report's sections on the dual space: the hypothesis map, hypotheses, observations, attribution.

Split from `search.report.html` to keep each module to one job. The rule that matters here is whose words a
text is: the model's (hypotheses, comparison and audit observations, causes) are grounded
(`search.report.grounding`) and framed as the model's words; the harness's (on an optimize task, the execution
observation of what a node measured, such as "changing MARGIN raised sum_of_radii") are shown as written,
since every number in them is one the harness wrote, so none may be redacted as unmeasured.
"""

from __future__ import annotations

import html
from collections.abc import Callable

from arts.search.investigation.standing import standing
from arts.search.report.claims import record, sanitize_claims
from arts.search.report.grounding import mark_methods
from arts.search.state import SearchState


def _e(x: object) -> str:
    return html.escape(str(x))


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.6g}"


MODEL = "<b>model-written</b>"
"""The mark on every collapsed section of the model's free text."""


def model_text(title: str, body: str, count: int) -> str:
    """A section of the model's free text: collapsed, its summary saying whose words they are."""
    return (
        f'<details class="model"><summary><h2>{_e(title)}</h2> · {MODEL}'
        f" ({count}, click to read)</summary>{body}</details>"
    )


def hypothesis_map(state: SearchState) -> str:
    """Axes and regions with how many hypotheses each holds, their nodes and the best result there."""
    cells: dict[tuple[str, str], list] = {}
    for h in state.hypotheses.values():
        cells.setdefault((h.axis or "-", h.region or "-"), []).append(h)
    rows = []
    for (axis, region), hs in sorted(cells.items()):
        nodes = [state.nodes[i] for h in hs for i in h.nodes if i in state.nodes]
        scored = [n for n in nodes if n.score is not None]
        best = max(scored, key=lambda n: n.score).raw_score if scored else None
        statuses = ", ".join(sorted({h.status for h in hs}))
        rows.append(f"<tr><td>{_e(axis)}</td><td>{_e(region)}</td><td>{len(hs)}</td><td>{len(nodes)}</td>"
                    f"<td>{_fmt(best)}</td><td>{_e(statuses)}</td></tr>")  # fmt: skip
    return (
        "<h2>Hypothesis map</h2><table><tr><th>axis</th><th>region</th><th>hypotheses</th><th>nodes</th>"
        f"<th>best there</th><th>statuses</th></tr>{''.join(rows)}</table>"
    )


def space_sections(state: SearchState, g: Callable[[str, int | None], str]) -> list[str]:
    """The hypothesis map (open: its numbers are the store's), and, collapsed as the model's text, hypotheses with their standing, observations with their relations, and routing
    decisions. On an optimize task the harness writes the execution observations (what a node measured);
    everything else here is the model's."""
    parts = []
    if state.hypotheses:
        parts.append(hypothesis_map(state))
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
        table = (
            "<p>The model's, grounded against the store.</p><table><tr><th>id</th><th>axis / region</th>"
            f"<th>hypothesis</th><th>status</th><th>nodes</th><th>evidence (confirmed)</th></tr>{''.join(rows)}</table>"
        )
        parts.append(model_text("Hypotheses", table, len(rows)))
    if state.observations:
        harness = any(n.raw_score is not None and n.parent is not None for n in state.nodes.values())
        rel: dict[int, list[str]] = {}
        for e in state.evidence.values():
            rel.setdefault(e.observation, []).append(f"{e.relation} h{e.hypothesis}")
        rows = []
        for o in sorted(state.observations.values(), key=lambda o: o.id)[-60:]:
            measured = harness and o.source == "execution"
            text = _e(o.text) if measured else f'<div class="said">{g(o.text, o.node)}</div>'
            rows.append(
                f"<tr><td>o{o.id}</td><td>{_e(o.source)}{' (harness)' if measured else ''}</td>"
                f"<td>{_e(o.region)}</td><td>{text}</td>"
                f"<td>{'provisional' if o.provisional else f'confirmed ({o.times_seen}x)'}</td>"
                f"<td>{_e(', '.join(rel.get(o.id, [])))}</td></tr>"
            )
        table = (
            "<p>The model's words, except those marked (harness): what the harness measured.</p><table><tr>"
            "<th>id</th><th>source</th><th>region</th><th>observation</th>"
            f"<th>state</th><th>evidence</th></tr>{''.join(rows)}</table>"
        )
        parts.append(model_text("Observations", table, len(rows)))
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
        table = (
            "<table><tr><th>round</th><th>node</th><th>action</th><th>clamped</th>"
            f"<th>top cause (model's words)</th></tr>{''.join(rows)}</table>"
        )
        parts.append(model_text("Failure attribution", table, len(rows)))
    return parts


def grounder(state: SearchState) -> Callable[[str, int | None], str]:
    """Model-written text as HTML: a number stands only where the store holds it for what its words say
    (`search.report.claims`), and methods the code of the node it refers to (else the best node) does not
    use are marked."""
    rec = record(state)
    best = state.best()

    def g(text: str, node: int | None) -> str:
        n = state.nodes.get(node) if node is not None else best
        code = "\n".join(n.files.values()) if n else ""
        return _e(mark_methods(sanitize_claims(text, rec, n.id if n else None), code).text)

    return g
