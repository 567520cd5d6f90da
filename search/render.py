"""Rendering the search state into the scientist's prompt, within a token budget.

The prompt must stop growing once the tree passes the budget, so every section is a bounded selection
(best nodes, recent nodes, top axes, latest memory), and sections are added in priority order until the
budget is spent. The node ids shown are exactly the ids the proposal schema allows as parents. Cost is
linear in the number of nodes (one pass to pick the best and the recent ones), nothing quadratic.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from arts.search.state import Node, SearchState

HYPOTHESIS_LINE_CHARS = 90
"""A hypothesis shown in one line of a prompt (a node, a refined or set-aside hypothesis) is cut to this."""
REASON_CHARS = 60
"""An invalid node's reason, shown beside it, is cut to this."""
VALUE_CHARS = 40
"""A constant's value, shown in one line (a tried edit, a knob of the best node), is cut to this."""
INSIGHT_CHARS = 200
"""A memory entry is cut to this when it is written: one line of the prompt's memory."""
TASK_LINE_CHARS = 200
"""The executor and the investigator see the statement's first line, cut to this (the scientist sees
`RenderConfig.statement_chars` of it)."""


class RenderConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    budget_tokens: int = Field(900, ge=200)
    """Upper bound on the rendered state's tokens (the ask and the schema come on top)."""
    best: int = Field(3, ge=1)
    """How many of the best nodes are shown."""
    recent: int = Field(3, ge=0)
    """How many of the most recent nodes are shown (besides the best)."""
    axes: int = Field(6, ge=0)
    """How many axes the map shows (most tried first)."""
    memory_entries: int = Field(6, ge=0)
    """How many of the latest memory entries are shown (0: none; `components.memory` turns the memory off)."""
    statement_chars: int = Field(500, ge=50)
    """The task statement is cut to this many characters in the round prompt (the plan's cut is
    `analysis.plan_statement_chars`)."""
    inspect_recent: int = Field(6, ge=1)
    """The scientist may inspect any of this many most recent nodes."""
    inspected_chars: int = Field(2000, ge=100)
    """The inspection reports joined to a proposal prompt are cut to this many characters."""
    audit_notes: int = Field(6, ge=0)
    """How many of the baseline audits' notes are shown (the first ones)."""


def _fmt(x: float | None) -> str:
    return "invalid" if x is None else f"{x:.5g}"


def task_line(statement: str) -> str:
    """The statement's first line, as the executor and the investigator see it."""
    return statement.strip().splitlines()[0][:TASK_LINE_CHARS]


def node_line(n: Node) -> str:
    what = n.hypothesis[:HYPOTHESIS_LINE_CHARS] or "seed program"
    parent = "" if n.parent is None else f" from {n.parent}"
    tail = f" ({n.reason[:REASON_CHARS]})" if n.status == "invalid" and n.reason else ""
    outcome = "answered" if n.status == "valid" and n.raw_score is None else _fmt(n.raw_score)
    return f"- node {n.id}{parent}: {what} -> {outcome}{tail}"


def axis_map(nodes: list[Node], limit: int) -> list[str]:
    counts: dict[str, list] = {}
    for n in nodes:
        if not n.axis:
            continue
        key = n.axis.strip().lower()
        c = counts.setdefault(key, [0, None, None])
        c[0] += 1
        if n.score is not None and (c[1] is None or n.score > c[1]):
            c[1], c[2] = n.score, n.raw_score
    top = sorted(counts.items(), key=lambda kv: (-kv[1][0], kv[0]))[:limit]
    return [f"- {axis}: {c} tried, best {_fmt(raw)}" for axis, (c, _, raw) in top]


def parent_candidates(state: SearchState, cfg: RenderConfig) -> list[Node]:
    """Best valid nodes, then the most recent valid ones; invalid nodes never become parents. Nodes of an
    answer-kind task have no score: the most recent ones are shown."""
    valid = [n for n in state.nodes.values() if n.status in ("seed", "valid")]
    scored = [n for n in valid if n.score is not None]
    if scored:
        valid = scored
    best = heapq.nlargest(cfg.best, scored, key=lambda n: (n.score, -n.id))
    seen = {n.id for n in best}
    recent = [
        n for n in heapq.nlargest(cfg.recent + len(seen), valid, key=lambda n: n.id) if n.id not in seen
    ]
    return best + recent[: cfg.recent]


def shown_memory(state: SearchState, cfg: RenderConfig) -> list[int]:
    """Ids of the memory entries the prompt shows (the ones the scientist may drop)."""
    return _latest(
        [i.id for i in state.insights.values() if i.kind == "memory" and i.active], cfg.memory_entries
    )


def _latest(items: list, n: int) -> list:
    """The last n items; none for n = 0 (where `items[-0:]` would be all of them)."""
    return items[max(len(items) - n, 0) :]


def render_state(
    state: SearchState,
    task_summary: str,
    cfg: RenderConfig,
    count_tokens: Callable[[str], int],
) -> tuple[str, list[int]]:
    """The state prompt and the node ids it shows (the allowed parents)."""
    parents = parent_candidates(state, cfg)
    if not parents:  # seedless task before any draft: the root is the only start
        parents = [n for n in state.nodes.values() if n.parent is None][:1]
    recent_all = heapq.nlargest(cfg.recent, state.nodes.values(), key=lambda n: n.id)
    failed = [n for n in recent_all if n.status == "invalid"]
    audits = [i.text for i in state.insights.values() if i.kind == "audit" and i.active]
    memory = _latest(
        [f"[m{i.id}] {i.text}" for i in state.insights.values() if i.kind == "memory" and i.active],
        cfg.memory_entries,
    )
    sections = [
        ("Task", [task_summary[: cfg.statement_chars]]),
        ("Nodes you may start from", [node_line(n) for n in parents]),
        ("Recent failures", [node_line(n) for n in failed]),
        ("Audit", [f"- {a}" for a in audits[: cfg.audit_notes]]),
        ("Memory", [f"- {m}" for m in memory]),
        ("Axes tried", axis_map(list(state.nodes.values()), cfg.axes)),
    ]
    out: list[str] = []
    used = 0
    for title, lines in sections:
        if not lines:
            continue
        block = f"## {title}\n" + "\n".join(lines)
        cost = count_tokens(block)
        while used + cost > cfg.budget_tokens and len(lines) > 1:
            lines = lines[:-1]
            block = f"## {title}\n" + "\n".join(lines)
            cost = count_tokens(block)
        if used + cost > cfg.budget_tokens:
            continue
        out.append(block)
        used += cost
    return "\n\n".join(out), [n.id for n in parents]


def edit_text(action: dict) -> str | None:
    """A one-line statement of a typed edit, or None for edits without a short form (whole bodies)."""
    if action.get("op") == "set_constant":
        return f"{action['name']} = {str(action['value'])[:VALUE_CHARS]}"
    if action.get("op") == "set_return":
        return f"{action['function']} returns {action['expression'][:60]}"
    return None


def _versus(score: float | None, before: float | None, valid: bool) -> str:
    if not valid:
        return "failed"
    if score is None or before is None:
        return "ran"
    return "better" if score > before else "worse" if score < before else "no change"


def tried_edits(
    state: SearchState, names: set[str], normalise: Callable[[float | None], float | None], limit: int = 6
) -> str:
    """The evaluated one-line edits of the search (about `names` when given), the best-scoring half first
    and then the latest, as `- NAME = value on node P: better` lines (better, worse or no change than
    node P, or failed): the executor's evidence of which changes helped. Words, not scores: the 135M
    default copied a score shown beside an edit into its next value. One pass over the nodes'
    transcripts; at most `limit` lines."""
    rows: list[tuple[float, int, str]] = []
    for n in state.nodes.values():
        parent = state.nodes.get(n.parent) if n.parent is not None else None
        for t in n.transcript:
            text = edit_text(t["action"]) if "valid" in t and t.get("action") else None
            if text is None or parent is None or (names and text.split(" ", 1)[0] not in names):
                continue
            score = normalise(t.get("score")) if t["valid"] else None
            rank = score if score is not None else float("-inf")
            rows.append(
                (rank, n.id, f"- {text} on node {parent.id}: {_versus(score, parent.score, t['valid'])}")
            )
    best = heapq.nlargest(limit // 2, rows, key=lambda r: (r[0], r[1]))
    seen = {r[2] for r in best}
    latest = [r for r in heapq.nlargest(limit, rows, key=lambda r: r[1]) if r[2] not in seen]
    lines = list(dict.fromkeys(r[2] for r in best + latest))
    return "\n".join(lines[:limit])
