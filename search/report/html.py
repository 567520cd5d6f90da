"""The run report: one self-contained HTML file (one small inline script, no network) built from the store.

It shows what people would rather see than read: the search tree, each node labelled with its id, score
and move and coloured by whether it beat the seed in the task's direction (`search.report.labels`), the
best path marked, failed nodes visible; beside it one node panel (a click on a node opens it: the
hypothesis, the diff against the parent, the metrics and the evaluator's message, read from the node's
`result.json` where the run directory has it); best-so-far against evaluations and against seconds, the
hypothesis map, the TTT updates (reward, KL, clipping) and the isolation the sandbox ran with. Without
scripts the panels still open (CSS `:target`). Every number in a table comes from the store.

Text the model wrote is escaped, grounded (`search.report.grounding`: numbers no measurement backs are
redacted, methods the code does not use are marked), shown as the model's words, never as a result, and
collapsed (`<details>`) under a "model-written" mark; text the harness wrote (its observations of what a
node measured, failure reasons, a baseline's edit) is shown as written.

It is rewritten after every round (`live_update`), so it can be opened while a search runs; a running
run's page reloads itself every 30 s. `arts report RUN` writes it for any run, also a killed one.
"""

from __future__ import annotations

import html
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

from arts.search.report.labels import move_label, verdict
from arts.search.report.panel import CSS as PANEL_CSS
from arts.search.report.panel import SCRIPT, WORDS, node_panels
from arts.search.report.plots import Series, line_chart, tree_svg
from arts.search.report.space import grounder, model_text, space_sections
from arts.search.state import SearchState

if TYPE_CHECKING:
    from arts.search.context import Run

CSS = """body{font:14px system-ui,sans-serif;margin:24px;color:#222;max-width:1500px}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}table{border-collapse:collapse;width:100%}
td,th{border-bottom:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
.bad{color:#b00}.ok{color:#070}.mono{font-family:monospace;font-size:12px}
.kv span{display:inline-block;margin-right:18px}.charts{display:flex;flex-wrap:wrap;gap:16px}
svg text{font-size:11px;fill:#333}.said{border-left:3px solid #bbb;padding-left:8px;color:#444}
.said:before{content:"model's words";display:block;font-size:11px;color:#888}
.r-better{color:#070}.r-worse{color:#b00}.r-invalid{color:#8b0000}.r-same{color:#666}
details.model>summary{cursor:pointer;color:#555}details.model>summary h2{display:inline}details.model>summary b{color:#7a4b00}.figure{padding:8px 12px;border:1px solid #eee}
h4{margin:8px 0 2px;font-size:13px;color:#555}.status{padding:6px 10px;background:#f4f4f4}
.running{background:#fff4d6}pre.diff{font-size:12px;background:#fafafa;padding:6px;overflow-x:auto}
.add{color:#070}.del{color:#b00}.hunk{color:#888}details{margin:2px 0}"""


def _e(x: object) -> str:
    return html.escape(str(x))


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.6g}"


def minimizing(state: SearchState) -> bool:
    """Whether the metric is minimised: the store keeps the score direction-normalised (higher is better)
    beside the evaluator's raw score, so a node whose two differ in sign tells."""
    return any(n.score is not None and n.raw_score and n.score == -n.raw_score for n in state.nodes.values())


def _best_so_far(points: list[tuple[float, float]], minimize: bool) -> list[tuple[float, float]]:
    out, best = [], None
    for x, y in points:
        if best is None or (y < best if minimize else y > best):
            best = y
            out.append((x, y))
    if out and points and points[-1][0] > out[-1][0]:
        out.append((points[-1][0], out[-1][1]))  # the line runs on to the last evaluation
    return out


def curves(state: SearchState) -> str:
    """Best-so-far (line) and every valid result (dots): against evaluations and against seconds."""
    minimize = minimizing(state)
    evals = [e for e in sorted(state.events.values(), key=lambda e: e.id) if e.kind == "eval"]
    by_eval = [(i + 1, float(e.payload["score"])) for i, e in enumerate(evals)
               if e.payload.get("valid") and e.payload.get("score") is not None]  # fmt: skip
    nodes = sorted((n for n in state.nodes.values() if n.raw_score is not None), key=lambda n: n.id)
    t0 = min((n.created for n in state.nodes.values()), default=0.0)
    by_time = sorted((n.created - t0 + n.exec_s + n.eval_s, n.raw_score) for n in nodes)
    if not by_eval:  # a store without eval events (an older run): one point per scored node
        by_eval = [(i + 1, n.raw_score) for i, n in enumerate(nodes) if n.parent is not None]
    root = next((n for n in nodes if n.parent is None), None)
    if root is not None:  # the seed is where the curve starts: evaluation 0
        by_eval = [(0, root.raw_score), *by_eval]
    label = "lower is better" if minimize else "higher is better"
    charts = [
        line_chart([Series("every valid evaluation", by_eval, "#48c", line=False),
                    Series("best so far", _best_so_far(by_eval, minimize))],
                   "evaluations (0: the seed)", f"score ({label})", integer_x=True),
        line_chart([Series("every valid node", by_time, "#48c", line=False),
                    Series("best so far", _best_so_far(by_time, minimize))],
                   "seconds since the start", f"score ({label})"),
    ]  # fmt: skip
    return '<div class="charts">' + "".join(charts) + "</div>"


def node_rows(state: SearchState) -> str:
    """One row per node; the result is coloured by its verdict against the seed in the task's direction."""
    seed = next((n for n in state.nodes.values() if n.parent is None), None)
    rows = []
    for n in sorted(state.nodes.values(), key=lambda n: n.id):
        v = verdict(n, seed)
        result = _fmt(n.raw_score) if n.score is not None else f"{n.status}: {n.reason[:120]}"
        rows.append(
            f'<tr><td><a href="#node-{n.id}">{n.id}</a></td><td>{"" if n.parent is None else n.parent}</td>'
            f"<td>{n.round}</td><td>{_e(move_label(n.hypothesis, 60))}</td>"
            f'<td class="r-{v}">{_e(result)}</td><td><span class="verdict v-{v}">{WORDS[v]}</span></td>'
            f"<td>{n.eval_s:.1f}</td></tr>"
        )
    head = "<tr><th>node</th><th>parent</th><th>round</th><th>move</th><th>result</th><th>against the seed</th><th>eval s</th></tr>"
    return f"<table>{head}{''.join(rows)}</table>"


def updates_section(state: SearchState) -> str:
    """Test-time training: one row per GRPO update, and the mean reward and KL (to the base; of the update
    itself, to the policy that sampled its groups) per update as charts."""
    updates = [e.payload for e in sorted(state.events.values(), key=lambda e: e.id) if e.kind == "update"]
    if not updates:
        return ""
    cols = (
        "loss",
        "reward_mean",
        "kl",
        "kl_old",
        "clip_fraction",
        "steps",
        "entropy",
        "grad_norm",
        "groups_used",
        "groups_skipped",
        "seconds",
    )
    rows = "".join(
        f"<tr><td>{_e(u.get('k', i + 1))}</td><td>{_e(u.get('round', '-'))}</td>"
        + "".join(f"<td>{_fmt(u.get(c)) if isinstance(u.get(c), (int, float)) else '-'}</td>" for c in cols)
        + "</tr>"
        for i, u in enumerate(updates)
    )
    charts = [
        line_chart([Series(label, [(float(u.get("k", i + 1)), float(u[key]))
                                   for i, u in enumerate(updates) if isinstance(u.get(key), (int, float))],
                           "#48c", line=False)], "update", label, integer_x=True)
        for key, label in (("reward_mean", "mean reward"), ("kl", "KL to the base"), ("kl_old", "KL of the update"))
    ]  # fmt: skip
    head = "".join(f"<th>{c.replace('_', ' ')}</th>" for c in cols)
    return (
        f'<h2>Test-time training updates</h2><div class="charts">{"".join(charts)}</div>'
        f"<table><tr><th>update</th><th>round</th>{head}</tr>{rows}</table>"
    )


def run_status(state: SearchState) -> str:
    """finished, or running/killed (which the store alone cannot tell apart: the caller can)."""
    events = sorted(state.events.values(), key=lambda e: e.id)
    last_start = max((e.id for e in events if e.kind == "round_start"), default=0)
    done = any(e.kind == "finish" and e.id > last_start for e in events)
    return "finished" if done else "in progress"


def header(state: SearchState, summary: dict | None, status: str) -> str:
    best = state.best()
    children = [n for n in state.nodes.values() if n.parent is not None]
    root = next((n for n in state.nodes.values() if n.parent is None), None)
    s = summary or {}
    iso = state.meta.get("isolation")
    items = (
        ("status", status),
        ("round", state.meta.get("round", 0)),
        ("method", s.get("method")),
        ("best", f"{_fmt(best.raw_score if best else None)} (node {best.id if best else '-'})"),
        ("test", _fmt((s.get("best") or {}).get("test_score"))),
        ("seed", _fmt(root.raw_score if root else None)),
        ("valid nodes", f"{sum(n.status == 'valid' for n in children)}/{len(children)}"),
        ("evaluations", sum(e.kind == "eval" for e in state.events.values())),
        ("tokens", sum((s.get("tokens") or {}).values()) if s.get("tokens") else "-"),
        ("wall s", round(float(state.meta.get("wall_s", 0.0)), 1)),
        ("stopped", s.get("stopped_because") if status == "finished" else "-"),
        ("sandbox", iso or "not recorded"),
    )
    kv = "".join(f"<span><b>{_e(k)}</b> {_e(v)}</span>" for k, v in items if v is not None)
    cls = "status running" if status != "finished" else "status"
    if status == "killed":
        status = "killed before it finished: continue it with `arts search --resume RUN`"
    when = time.strftime("%Y-%m-%d %H:%M:%S")
    return f'<p class="{cls}">{_e(status)} · written {when}</p><div class="kv">{kv}</div>'


def render_report(
    state: SearchState,
    summary: dict | None,
    title: str,
    status: str | None = None,
    messages: dict[int, str] | None = None,
) -> str:
    """The page; `messages`: the evaluator's message per node id (from the run directory)."""
    status = status or run_status(state)
    g = grounder(state)
    audits = [g(i.text, None) for i in state.insights.values() if i.kind == "audit"]
    # memory lines are the harness's summaries of nodes (`investigation.reports.insight_for`), which may
    # quote the model (a hypothesis, a cause): grounded, with the node's own record counting as measured
    memory = [g(i.text, i.node) for i in state.insights.values() if i.kind == "memory" and i.active]
    best = state.best()
    refresh = '<meta http-equiv="refresh" content="30">' if status == "running" else ""
    minimize = minimizing(state)
    parts = [
        f"<!doctype html><html lang='en'><meta charset='utf-8'>{refresh}<title>{_e(title)}</title>"
        f"<style>{CSS}\n{PANEL_CSS}</style><h1>{_e(title)}</h1>",
        header(state, summary, status),
        "<h2>Search tree</h2><p>Each node: id, score, move. Colour against the seed"
        f" ({'lower' if minimize else 'higher'} is better): <b style='color:#1a9850'>green better</b>,"
        " <b style='color:#d73027'>red worse</b>, grey the same, blue the seed; hollow with a dark red"
        " cross: invalid. Thick: the path to the best node (ringed). Click a node to open it beside the tree.</p>"
        f'<div class="explore"><div class="tree-wrap">{tree_svg(state.nodes, best.id if best else None)}</div>'
        f"{node_panels(state, g, messages or {})}</div>",
        "<h2>Best so far</h2>" + curves(state),
    ]
    if audits:
        parts.append(
            model_text("Audit notes", "".join(f'<div class="said">{a}</div>' for a in audits), len(audits))
        )
    if memory:
        body = "<ul>" + "".join(f"<li>{m}</li>" for m in memory[-30:]) + "</ul>"
        parts.append(model_text("Memory (what each node showed)", body, len(memory)))
    parts += space_sections(state, g)
    parts.append(updates_section(state))
    parts.append("<h2>Nodes</h2>" + node_rows(state))
    parts.append(SCRIPT)
    return "\n".join(p for p in parts if p)


def evaluator_messages(run_dir: Path) -> dict[int, str]:
    """The evaluator's message of every node whose folder still holds its `result.json`."""
    out = {}
    for f in (run_dir / "nodes").glob("*/result.json"):
        try:
            msg = json.loads(f.read_text()).get("message")
        except (OSError, ValueError, AttributeError):
            continue
        if f.parent.name.isdigit() and isinstance(msg, str) and msg:
            out[int(f.parent.name)] = msg
    return out


def write_report(
    run_dir: Path, state: SearchState, out: Path | None = None, status: str | None = None
) -> Path:
    """Write the report (atomically: a reader never sees half a page) to `out` or RUN_DIR/report.html."""
    summary_path = run_dir / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else None
    out = out or run_dir / "report.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(
        render_report(state, summary, f"arts run {run_dir.name}", status, evaluator_messages(run_dir))
    )
    tmp.replace(out)
    return out


def live_update(run: Run, last: bool = False) -> None:
    """After each round: record the sandbox's isolation once, then (unless it was the `last` round, whose
    summary and report the end of the run writes) rewrite summary.json, marked running, and the report,
    so that both can be read mid-run."""
    from arts.tasks.isolation import probe

    ledger, meter = run.ledger, run.meter
    if ledger.meta("isolation") is None:
        iso = probe()  # probed once per process, already by the round's first evaluation
        level = getattr(iso, "level", None) or ", ".join(
            k for k in ("uid_drop", "network", "mounts") if getattr(iso, k, False)
        )
        ledger.set_meta("isolation", f"{level or 'limits only'}" + (f" ({iso.note})" if iso.note else ""))
    if last:
        return
    state, run_dir = run.state, ledger.store.run_dir
    best = state.best()
    children = [n for n in state.nodes.values() if n.parent is not None]
    root = next((n for n in state.nodes.values() if n.parent is None), None)
    summary = {
        "task": run.task.name, "method": run.cfg.method, "running": True, "round": run.round,
        "nodes": len(children), "valid_nodes": sum(n.status == "valid" for n in children),
        "best": {"node": best.id if best else None, "score": best.raw_score if best else None,
                 "test_score": None},
        "baseline": root.raw_score if root else None, "evals": meter.evals, "tokens": dict(meter.tokens),
        "wall_s": round(meter.wall_s, 2), "stopped_because": None,
    }  # fmt: skip
    tmp = run_dir / ".summary.json.tmp"
    tmp.write_text(json.dumps(summary, indent=2))
    tmp.replace(run_dir / "summary.json")
    write_report(run_dir, state, status="running")
    if (tracking := getattr(run.log, "tracking", None)) is not None:  # `--report-to`: see search.trackers
        tracking.send(state, run.round)
