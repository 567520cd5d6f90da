"""The map of the hypothesis space the scientist's prompt shows: one row per (axis, region) with its counts,
best score and last round touched, the observation map (counts per source and region), the under-explored
cells, revivable set-asides and unexplained observations, all within a token budget.

Every section is capped, so the rendered map stops growing with the state; lines are taken round-robin
across sections while they fit and dropped whole, never cut. Not done here: the rules of the space
(`space`), or which observation ids a proposal may cite (the proposal step reads them from the text).
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from arts.search.investigation.space import normalise_label, revivable
from arts.search.investigation.standing import unexplained
from arts.search.render import HYPOTHESIS_LINE_CHARS
from arts.search.state import SearchState


class RegionRow(BaseModel):
    """One (axis, region) cell of the hypothesis map."""

    model_config = ConfigDict(extra="forbid")
    axis: str
    """Normalised axis label."""
    region: str
    """Normalised region label."""
    hypotheses: int = 0
    """Hypotheses in the cell (archived ones included)."""
    statuses: dict[str, int] = {}
    """Hypothesis count per status."""
    archived: int = 0
    """How many of them were archived on a pivot."""
    nodes: int = 0
    """Distinct nodes that tested them."""
    best_node: int | None = None
    """The best-scoring of those nodes; None when none has a score."""
    best_score: float | None = None
    """Its direction-normalised score (higher is better)."""
    best_raw: float | None = None
    """Its score as the evaluator reported it, for display."""
    last_round: int = 0
    """The last round a hypothesis of the cell was proposed, changed, or tested."""


def hypothesis_map(state: SearchState) -> list[RegionRow]:
    """One row per (axis, region), the most recently touched first."""
    rows: dict[tuple[str, str], RegionRow] = {}
    tested_by: dict[tuple[str, str], set[int]] = {}
    for h in state.hypotheses.values():
        key = (normalise_label(h.axis), normalise_label(h.region))
        r = rows.setdefault(key, RegionRow(axis=key[0], region=key[1]))
        r.hypotheses += 1
        r.statuses[h.status] = r.statuses.get(h.status, 0) + 1
        r.archived += h.archived
        r.last_round = max(r.last_round, h.created_round, h.updated_round)
        for nid in h.nodes:
            n = state.nodes.get(nid)
            if n is None:
                continue
            tested_by.setdefault(key, set()).add(nid)
            r.last_round = max(r.last_round, n.round)
            if n.score is not None and (
                r.best_score is None or (n.score, -n.id) > (r.best_score, -(r.best_node or 0))
            ):
                r.best_node, r.best_score, r.best_raw = n.id, n.score, n.raw_score
    for key, ids in tested_by.items():
        rows[key].nodes = len(ids)
    return sorted(rows.values(), key=lambda r: (-r.last_round, -r.hypotheses, r.axis, r.region))


def under_explored(rows: list[RegionRow], k: int) -> list[RegionRow]:
    """The k cells with the fewest experiments (then fewest hypotheses), skipping fully archived ones."""
    open_rows = [r for r in rows if r.archived < r.hypotheses]
    return sorted(open_rows, key=lambda r: (r.nodes, r.hypotheses, r.last_round, r.axis, r.region))[:k]


def observation_map(state: SearchState) -> list[str]:
    """One line per (source, region) of the observation space, most observations first: how many there
    are, how many no active hypothesis explains, and how many were confirmed (`probe / sensitivity of LR:
    3 obs, 1 unexplained, 2 confirmed`); sought observations (probes) and by-products are told apart by
    their source."""
    open_ids = {o.id for o in unexplained(state)}
    cells: dict[tuple[str, str], list[int]] = {}
    for o in state.observations.values():
        counts = cells.setdefault((o.source, normalise_label(o.region) or "-"), [0, 0, 0])
        counts[0] += 1
        counts[1] += o.id in open_ids
        counts[2] += not o.provisional
    order = sorted(cells.items(), key=lambda kv: (-kv[1][0], kv[0]))
    return [
        f"- {src} / {region}: {n} obs, {u} unexplained, {c} confirmed" for (src, region), (n, u, c) in order
    ]


def _nodes(k: int) -> str:
    return f"{k} node" if k == 1 else f"{k} nodes"


def _cell(r: RegionRow) -> str:
    return f"{r.axis or '(no axis)'} / {r.region or '-'}"


def _row_line(r: RegionRow) -> str:
    statuses = ", ".join(f"{c} {s.replace('_', ' ')}" for s, c in sorted(r.statuses.items()))
    best = "" if r.best_raw is None else f", best {r.best_raw:.5g} (node {r.best_node})"
    return f"- {_cell(r)}: {r.hypotheses} hyp ({statuses}), {_nodes(r.nodes)}{best}, round {r.last_round}"


def render_space(
    state: SearchState,
    budget_tokens: int,
    count: Callable[[str], int],
    round: int | None = None,
    per_section: int = 12,
) -> str:
    """The maps, under-explored cells, revivable set-asides and unexplained observations, within the budget.

    Each section is capped at `per_section` lines, so the cost stops growing with the state; lines are
    then taken round-robin across sections while they fit, and whole lines are dropped, never cut.
    """
    now = int(state.meta.get("round", 0)) if round is None else round
    rows = hypothesis_map(state)
    unexp = sorted(unexplained(state), key=lambda o: (o.provisional, -o.id))  # confirmed, then newest
    sections = [
        ("Hypothesis map (axis / region)", [_row_line(r) for r in rows[:per_section]]),
        ("Observation map (source / region)", observation_map(state)[:per_section]),
        (
            "Under-explored",
            [
                f"- {_cell(r)}: {r.hypotheses} hyp, {_nodes(r.nodes)}"
                for r in under_explored(rows, per_section)
            ],
        ),
        (
            "Set aside, may be revived",
            [
                f"- h{h.id} [{h.axis}] {h.text[:HYPOTHESIS_LINE_CHARS]}"
                for h in revivable(state, now)[-per_section:]
            ],
        ),
        (
            "Unexplained observations",
            [
                f"- o{o.id}{' (provisional)' if o.provisional else ''}: {o.text[:100]}"
                for o in unexp[:per_section]
            ],
        ),
    ]
    taken: list[list[str]] = [[] for _ in sections]
    full = [False] * len(sections)
    used = 0
    for i in range(per_section):
        for s, (title, lines) in enumerate(sections):
            if full[s] or i >= len(lines):
                continue
            cost = count(lines[i]) + 1 + (count(f"## {title}") + 2 if i == 0 else 0)
            if used + cost > budget_tokens:
                full[s] = True  # a section that overflows takes no later (lower-priority) lines
                continue
            taken[s].append(lines[i])
            used += cost

    def text() -> str:
        return "\n\n".join(f"## {t}\n" + "\n".join(ls) for (t, _), ls in zip(sections, taken) if ls)

    out = text()
    while out and count(out) > budget_tokens:  # the per-line estimate can miss by a few tokens
        longest = max(range(len(taken)), key=lambda s: len(taken[s]))
        taken[longest].pop()
        out = text()
    return out
