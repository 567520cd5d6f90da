"""The report's node panel: one node at a time, beside the tree, opened by a click on the node.

A panel holds what a reader asks of an experiment, side by side: its move and hypothesis, its result
against the seed with the metrics and the evaluator's message on one side, its code diff against the
parent on the other. Every node's panel is written into the page (hidden); the inline `SCRIPT` shows the
clicked one without scrolling the page (a link from the node table scrolls to the panel), keeps the
address (`#node-14`) so a link opens that node, and starts with the best node open. Without scripts, CSS
`:target` opens a panel all the same. A page holds the panels of the last 400 nodes (each carries its
diff); an older node's click opens none. A hypothesis a model proposed is the model's words (grounded,
marked); a baseline's edit is the harness's and shown as written.
"""

from __future__ import annotations

import difflib
import html
from collections.abc import Callable

from arts.search.report.labels import move_label, verdict
from arts.search.state import Node, SearchState

CSS = """.explore{display:grid;grid-template-columns:minmax(0,3fr) minmax(420px,2fr);gap:14px;align-items:start}
.tree-wrap{overflow:auto;border:1px solid #eee;max-height:78vh}
.panels{position:sticky;top:8px;max-height:92vh;overflow:auto;border:1px solid #ccc;border-radius:4px}
.node-panel{display:none;padding:8px 12px}.node-panel.open,.node-panel:target{display:block}
.node-panel h3{margin:2px 0 6px;font-size:15px}.cols{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:12px}
.verdict{display:inline-block;white-space:nowrap;padding:1px 7px;border-radius:9px;font-size:12px;color:#fff}
.v-better{background:#1a9850}.v-worse{background:#d73027}.v-same{background:#888}.v-seed{background:#5b7fb8}
.v-invalid{background:#8b0000}.v-pending{background:#aaa}.msg{white-space:pre-wrap;background:#f6f6f6;padding:4px 6px}
g.node{cursor:pointer}g.node.sel .dot{stroke:#000;stroke-width:3}g.node:hover text{text-decoration:underline}
.panels-hint{color:#777;font-size:12px;padding:4px 12px}.node-panel .mono{word-break:break-all}
.node-panel pre.diff{white-space:pre-wrap;word-break:break-all}svg.tree text{paint-order:stroke;stroke:#fff;stroke-width:3px}"""

SCRIPT = """<script>(function(){
function open(id,scroll){var p=document.getElementById('node-'+id);if(!p)return false;
document.querySelectorAll('.node-panel.open').forEach(function(e){e.classList.remove('open')});
document.querySelectorAll('g.node.sel').forEach(function(e){e.classList.remove('sel')});
p.classList.add('open');var g=document.querySelector('g.node[data-node="'+id+'"]');if(g)g.classList.add('sel');
if(scroll!==null)history.replaceState(null,'','#node-'+id);if(scroll)p.scrollIntoView({block:'nearest'});return true}
document.addEventListener('click',function(ev){var a=ev.target.closest('a[href^="#node-"]');if(!a)return;
if(open(a.getAttribute('href').slice(6),!a.closest('svg.tree')))ev.preventDefault()});
var m=location.hash.match(/^#node-(\\d+)$/);var b=document.querySelector('.node-panel.open');
open(m?m[1]:(b?b.id.slice(5):''),m?true:null)})();</script>"""


def _e(x: object) -> str:
    return html.escape(str(x))


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.6g}"


def diff_html(node: Node, parent: Node | None, max_lines: int = 150) -> str:
    """The node's files against its parent's, as a coloured unified diff."""
    lines: list[str] = []
    for name in sorted(set(node.files) | set(parent.files if parent else {})):
        old = (parent.files.get(name, "") if parent else "").splitlines()
        new = node.files.get(name, "").splitlines()
        lines += difflib.unified_diff(old, new, f"a/{name}", f"b/{name}", n=2, lineterm="")
    if not lines:
        return "<p>No change to the files.</p>" if parent else "<p>The seed program (no parent).</p>"
    cls = {"+": "add", "-": "del", "@": "hunk"}
    shown = [f'<span class="{cls.get(ln[:1], "")}">{_e(ln)}</span>' for ln in lines[:max_lines]]
    more = f"\n… {len(lines) - max_lines} more lines" if len(lines) > max_lines else ""
    return f'<pre class="diff">{chr(10).join(shown)}{more}</pre>'


WORDS = {
    "seed": "the seed",
    "better": "better than the seed",
    "same": "same as the seed",
    "worse": "worse than the seed",
    "invalid": "invalid",
    "pending": "pending",
}


def node_panel(
    state: SearchState, n: Node, g: Callable[[str, int | None], str], message: str, is_open: bool
) -> str:
    seed = next((x for x in state.nodes.values() if x.parent is None), None)
    parent = state.nodes.get(n.parent) if n.parent is not None else None
    v = verdict(n, seed)
    if not n.hypothesis:
        hyp = "<p><i>the seed program</i></p>"
    elif n.rollout is not None:  # a scientist's action: the model's words
        hyp = f'<div class="said">{g(n.hypothesis, n.id)}</div>'
    else:
        hyp = (
            f'<p class="mono">{_e(n.hypothesis[:600])}</p><small>(the edit a baseline method applied)</small>'
        )
    if n.score is not None:
        delta = ""
        if seed is not None and seed.raw_score is not None and n.raw_score is not None and n is not seed:
            delta = f" (seed {_fmt(seed.raw_score)}, {n.raw_score - seed.raw_score:+.4g})"
        result = f"<p><b>{_fmt(n.raw_score)}</b>{delta}</p>"
    else:
        result = f"<p>{_e(n.status)}: {_e(n.reason[:600])}</p>" if n.reason else f"<p>{_e(n.status)}</p>"
    metrics = "".join(f"<tr class=\"metric\"><td>{_e(k)}</td><td>{_e(_fmt(x) if isinstance(x, float) else x)}</td></tr>"
                      for k, x in list(n.metrics.items())[:30])  # fmt: skip
    said = message or (n.reason if n.score is None else "")
    left = (
        f"<h4>Move</h4><p><b>{_e(move_label(n.hypothesis))}</b></p><h4>Hypothesis</h4>{hyp}<h4>Result</h4>{result}"
        + (f"<h4>Metrics</h4><table>{metrics}</table>" if metrics else "")
        + (f'<h4>Evaluator\'s message</h4><div class="msg">{_e(said[:2000])}</div>' if said else "")
    )
    title = f"node {n.id}" + (f" ← {n.parent}" if n.parent is not None else " (seed)") + f" · round {n.round}"
    return (
        f'<section class="node-panel{" open" if is_open else ""}" id="node-{n.id}" data-verdict="{v}">'
        f'<h3>{_e(title)} <span class="verdict v-{v}">{WORDS[v]}</span></h3>'
        f'<div class="cols"><div>{left}</div><div><h4>Diff against the parent</h4>{diff_html(n, parent)}</div></div>'
        "</section>"
    )


def node_panels(state: SearchState, g: Callable[[str, int | None], str], messages: dict[int, str]) -> str:
    """Every node's panel (the best node's open), in the column beside the tree."""
    best = state.best()
    nodes = sorted(state.nodes.values(), key=lambda n: n.id)[-400:]
    panels = "".join(
        node_panel(state, n, g, messages.get(n.id, ""), best is not None and n.id == best.id) for n in nodes
    )
    return f'<div class="panels"><div class="panels-hint">Click a node in the tree (or in the table below).</div>{panels}</div>'
