"""The investigation layer of an arts round: hypothesis and observation spaces, comparison, routed recovery.

`search.methods.arts_round` reads like the design's round; this module holds its steps that turn "propose
and score" into investigation (DESIGN.md, SHELDON and SAGE):
- the plan (once per search) splits the statement into situation and deliverable;
- proposals become hypotheses in the hypothesis space (axis/region, cites, cooldown, revival, archive);
- every experiment yields observations with evidence relations to the hypothesis it tested (written by
  the harness from measured numbers for programs, from the investigator's findings for diagnoses);
- a joint comparison over the round's working hypotheses yields observations with per-hypothesis
  verdicts and names flawed experiments;
- failed or regressed nodes, and a stalled best-so-far curve, go through failure attribution (competing
  causes, critic, judge, routing table, verdict clamp); every decision is stored with its inputs;
- exploit: keep, repair, refine or set aside each tested hypothesis; a pivot archives the direction.

Everything is committed through the `Search` (store first, then the in-memory state). Components can be
turned off one at a time (`ComponentsConfig`) for ablations. Not done here: choosing parents, drawing
actions, running experiments (the round in `search.methods` and the loop do that).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from arts.search import space
from arts.search.attribution import Decision, attribute, distinct, stalled, trajectory
from arts.search.inspect import failed_or_regressed, report
from arts.search.state import Hypothesis, Insight, Node

if TYPE_CHECKING:
    from arts.search.loop import Search

_OBS_ID = re.compile(r"\bo(\d+)\b")
NOT_A_RESULT = ("evaluation budget spent", "interrupted")
"""Reasons of invalid nodes that say nothing about their hypothesis."""


class ComponentsConfig(BaseModel):
    """Parts of the arts round that can be turned off one at a time (ablations)."""

    model_config = ConfigDict(extra="forbid")
    observations: bool = True
    """The observation space: observations with evidence relations, shown to the scientist and citable."""
    comparison: bool = True
    """The joint comparison of the round's working hypotheses."""
    attribution: bool = True
    """Failure attribution (competing causes, critic, judge, routing) for failed, regressed or stalled work."""
    audit: bool = True
    """The baseline audits before the first round."""
    verbalized: bool = True
    """Verbalized sampling; off: every action of a round is the candidate with the highest probability."""
    memory: bool = True
    """The scientist's memory of one-line insights (written after every node, shown in the prompt)."""


class SpaceConfig(BaseModel):
    """The hypothesis and observation spaces."""

    model_config = ConfigDict(extra="forbid")
    explore_candidates: int = Field(3, ge=1, le=10)
    """K of every proposal after the first (the first asks for `scientist.candidates`)."""
    cooldown: int = Field(2, ge=0)
    """Rounds a set-aside hypothesis waits before it may be revived."""
    prompt_tokens: int = Field(260, ge=50)
    """Share of the prompt for the map, revivable set-asides and unexplained observations."""
    attributions_per_round: int = Field(1, ge=0)
    """At most this many failure attributions per round (each is 3 model calls)."""
    stop_when_stale: bool = True
    """Stop when a round adds no new hypothesis, observation or direction."""
    answer_rounds: int = Field(8, ge=1)
    """Round cap of an answer-kind task, which spends no evaluations (unless `budget.rounds` is lower)."""


# -- plan --------------------------------------------------------------------------------------------------
def plan_once(s: Search) -> None:
    """Split the statement into situation and deliverable, once per search (kept in the store's meta)."""
    if s.analyst is None or "plan" in s.state.meta:
        return
    plan = s.analyst.plan(s.task.statement, seed=s.cfg.seed)
    value = plan.model_dump() if plan else {}
    s.store.set_meta("plan", value)
    s.state.meta["plan"] = value
    s.store.log_event("plan", ok=plan is not None, plan=value)


def plan_lines(s: Search) -> str:
    plan = s.state.meta.get("plan") or {}
    if not plan:
        return ""
    reqs = "; ".join(plan.get("requirements", []))
    return f"Deliverable: {plan['deliverable']}" + (f" (requirements: {reqs})" if reqs else "")


# -- hypothesis space --------------------------------------------------------------------------------------
def space_prompt(s: Search) -> tuple[str, list[int]]:
    """The rendered spaces and the observation ids they show (the ids a proposal may cite)."""
    if not s.cfg.components.observations:
        return "", []
    count = s.scientist_backend.count_tokens if s.scientist_backend else (lambda t: len(t) // 4)
    text = space.render_space(s.state, s.cfg.space.prompt_tokens, count, round=s.round)
    ids = [int(m) for m in _OBS_ID.findall(text) if int(m) in s.state.observations]
    if hint := combine_hint(s):
        text = f"{text}\n{hint}" if text else hint
    return text, list(dict.fromkeys(ids))


def admissible(s: Search, cands: list[dict]) -> list[bool]:
    """Which candidates may be drawn: not a set-aside hypothesis in its cooldown, not an archived one,
    and distinct from every archived (pivoted-away) direction."""
    archived = [h.text for h in s.state.hypotheses.values() if h.archived]
    out = []
    for c in cands:
        h = space.find_hypothesis(s.state, c["hypothesis"])
        cooling = h is not None and h.status == "set_aside" and h not in space.revivable(s.state, s.round)
        gone = h is not None and h.archived
        far = not archived or distinct(c["hypothesis"], archived, s.cfg.attribution.distinct_threshold)
        out.append(not cooling and not gone and far)
    return out


def selection_weights(s: Search, cands: list[dict]) -> list[float]:
    """Select: spread over regions and favour tests that resolve open evidence. A candidate's stated
    probability is shared among the candidates of its region (so every region weighs like one candidate),
    and raised by half when it cites an observation no working hypothesis explains yet."""
    regions = Counter(space.normalise_label(c.get("region", "")) for c in cands)
    open_ids = {o.id for o in space.unexplained(s.state)} if s.cfg.components.observations else set()
    out = []
    for c in cands:
        w = c["probability"] / regions[space.normalise_label(c.get("region", ""))]
        out.append(w * 1.5 if open_ids & set(c.get("cites", [])) else w)
    return out


def combine_hint(s: Search) -> str:
    """Explore: hypotheses that each improved on their parent may be combined in one candidate."""
    won = [h for h in s.state.hypotheses.values() if h.status == "retained" and not h.archived][-3:]
    if len(won) < 2:
        return ""
    names = ", ".join(f"h{h.id} ({h.text[:50]})" for h in won)
    return f"Each of {names} improved the score: a candidate may combine two of them."


def register(s: Search, cand: dict, parent_hypothesis: int | None = None) -> Hypothesis:
    """The drawn candidate as a working hypothesis (found, revived or created)."""
    cites = [o for o in cand.get("cites", []) if o in s.state.observations]
    h, new = space.propose(
        s.state,
        cand["hypothesis"],
        space.normalise_label(cand["axis"]),
        space.normalise_label(cand.get("region", "")),
        s.round,
        cites=cites,
        parent=parent_hypothesis,
    )
    if new:
        h = s.add(h)
        s.store.log_event("hypothesis", round=s.round, id=h.id, text=h.text, cites=cites)
    moved = space.revive(h, s.round) if h.status == "set_aside" else space.work(h, s.round)
    if moved is not None:
        s.update(moved)
        h = moved
    return h


# -- observations from experiments ---------------------------------------------------------------------------
def _change(node: Node) -> str:
    """What the node changed, without numbers (so the same change seen twice is the same observation)."""
    applied = [t["action"] for t in node.transcript if t.get("applied") and t.get("action")]
    last = applied[-1] if applied else None
    if last and last.get("op") == "set_constant":
        return f"changing {last['name']}"
    if last and last.get("op") == "replace_function":
        return f"rewriting {last['name']}"
    return f"a change of {space.normalise_label(node.axis) or 'the program'}"


def execution_observation(s: Search, node: Node) -> tuple[str, str, str] | None:
    """(text, region, relation) the measured outcome of `node` says about its hypothesis."""
    parent = s.state.nodes.get(node.parent) if node.parent is not None else None
    metric = s.task.config.metric.name if s.task.config.metric else "result"
    what = _change(node)
    if node.status == "invalid" and node.reason.startswith(NOT_A_RESULT):
        return None  # the run ran out or was killed: nothing was learned about the hypothesis
    if node.status == "invalid":
        kind = (node.reason.split(":")[0] or "no result")[:60]
        return f"{what} broke the program ({kind})", "errors", "oppose"
    if parent is None or parent.score is None or node.score is None:
        return None
    if node.score > parent.score:
        return f"{what} raised {metric}", metric, "support"
    if node.score < parent.score:
        return f"{what} lowered {metric}", metric, "oppose"
    return f"{what} left {metric} unchanged", metric, "neutral"


def worded(text: str) -> bool:
    """At least two words of letters: a 135M model's comparison sometimes returns bare punctuation and
    digits (", 1.1498}}, {"), which is not an observation."""
    return len(re.findall(r"[A-Za-z]{2,}", text)) >= 2


def record(s: Search, text: str, source: str, region: str, node: int | None) -> int:
    o, new = space.observe(s.state, text, source, region, node, s.round)
    o = s.add(o) if new else o
    if not new:
        s.update(o)
    return o.id


def after_node(s: Search, node: Node, h: Hypothesis, findings: list | None = None) -> None:
    """Link the node to its hypothesis and store what it showed, with evidence relations."""
    h = space.record_node(s.state.hypotheses[h.id], node.id)
    s.update(h)
    if not s.cfg.components.observations:
        return
    facts = [(f.text, f.region, f.relation) for f in findings or []]
    if not facts and (obs := execution_observation(s, node)) is not None:
        facts = [obs]
    for text, region, relation in facts:
        oid = record(s, text, "execution", region, node.id)
        s.add_or_update(space.relate(s.state, oid, h.id, relation, s.round, note=f"node {node.id}"))


# -- comparison ------------------------------------------------------------------------------------------
def result_line(s: Search, h: Hypothesis) -> str:
    parts = []
    for nid in h.nodes[-3:]:
        n = s.state.nodes[nid]
        parts.append(
            f"node {nid}: {n.raw_score:.5g}" if n.raw_score is not None else f"node {nid}: {n.status}"
        )
    return "; ".join(parts)


def compare(s: Search, tested: list[Hypothesis]) -> set[int]:
    """One joint comparison over the round's tested hypotheses; returns the ids it calls flawed."""
    if not (s.cfg.components.comparison and s.analyst and tested):
        return set()
    hyps = [(h.id, h.text, result_line(s, h)) for h in tested]
    recent = sorted(s.state.observations.values(), key=lambda o: o.id)[-5:]
    got = s.analyst.compare(hyps, [(o.id, o.text) for o in recent], seed=s.cfg.seed + s.round)
    c = s.analyst.last
    s.store.log_event(
        "comparison",
        round=s.round,
        ok=got is not None,
        result=got.model_dump() if got else None,
        error=c.error if c else None,
    )
    if got is None:
        return set()
    if s.cfg.components.observations:
        for v in (v for v in got.verdicts if worded(v.observation)):
            oid = record(s, v.observation, "comparison", "comparison", None)
            s.add_or_update(space.relate(s.state, oid, v.hypothesis, v.verdict, s.round, note="comparison"))
    return set(got.flawed)


# -- failure attribution -----------------------------------------------------------------------------------
def best_so_far(s: Search) -> list[float]:
    out, best = [], None
    for n in sorted(s.state.nodes.values(), key=lambda n: n.id):
        if n.score is not None:
            best = n.score if best is None else max(best, n.score)
        if best is not None and n.parent is not None:
            out.append(best)
    return out


def attribute_round(s: Search, nodes: list[Node]) -> dict[int, Decision]:
    """Failure attribution for this round's failed or regressed nodes (and the best node when the curve
    has stalled), at most `attributions_per_round`; each decision is stored with its inputs."""
    if not (s.cfg.components.attribution and s.analyst):
        return {}
    todo = [n for n in nodes if failed_or_regressed(s.state, n)]
    traj = trajectory(best_so_far(s), s.cfg.attribution)
    if not todo and stalled(traj, s.cfg.attribution) and (best := s.state.best()) and best.parent:
        todo = [best]
    out: dict[int, Decision] = {}
    for n in todo[: s.cfg.space.attributions_per_round]:
        rep = report(s.state, n, s.store.node_dir(n.id))
        if n in nodes and not failed_or_regressed(s.state, n):
            rep += f"\nThe best-so-far curve has stalled: {traj.model_dump()}"
        decision = attribute(s.analyst, rep, s.cfg.attribution, seed=s.cfg.seed + s.round)
        s.store.log_event(
            "routing",
            round=s.round,
            node=n.id,
            ok=decision is not None,
            decision=decision.model_dump() if decision else None,
            trajectory=traj.model_dump(),
        )
        if decision is not None:
            out[n.id] = decision
    return out


# -- exploit ----------------------------------------------------------------------------------------------
def exploit(s: Search, tested: list[Hypothesis], flawed: set[int], decisions: dict[int, Decision]) -> int:
    """Keep, repair, refine or set aside each tested hypothesis; returns how many directions changed."""
    changed = 0
    for h in tested:
        h = s.state.hypotheses[h.id]
        decision = next((decisions[n] for n in h.nodes if n in decisions), None)
        if h.id in flawed:
            note(s, f"h{h.id}: the experiment was flawed; retest it", h.nodes[-1] if h.nodes else None)
            continue
        if decision is not None:
            changed += route(s, h, decision)
        elif s.cfg.components.observations and space.refuted(s.state, h.id):
            moved = space.set_aside(h, s.round, s.cfg.space.cooldown)
            changed += _commit(s, moved, "set_aside", h)
        elif any(_improved(s, n) for n in h.nodes):
            changed += _commit(s, space.retain(h, s.round), "retained", h)
    return changed


def route(s: Search, h: Hypothesis, d: Decision) -> int:
    """Apply a routing decision to its hypothesis."""
    fix = d.cause.fix if d.cause else ""
    node = h.nodes[-1] if h.nodes else None
    if d.action in ("repair", "fix_protocol"):
        what = "implementation" if d.action == "repair" else "evaluation protocol"
        note(s, f"h{h.id}: repair the {what}: {fix}", node)
        return 1
    if d.action in ("refine_local", "refine_structural"):
        child = s.add(space.refine(h, f"{h.text[:60]}; {fix}"[:120], s.round))
        s.store.log_event("hypothesis", round=s.round, id=child.id, text=child.text, refines=h.id)
        _commit(s, space.set_aside(h, s.round, s.cfg.space.cooldown), "refined", h)
        return 1
    archived = space.archive(h, s.round)  # pivot: a fatal flaw of the method
    _commit(s, archived, "archived", h)
    note(s, f"h{h.id} abandoned (fatal flaw): {d.cause.cause if d.cause else ''}", node)
    return 1


def _commit(s: Search, moved: Hypothesis | None, what: str, h: Hypothesis) -> int:
    if moved is None:
        return 0
    s.update(moved)
    s.store.log_event("hypothesis_status", round=s.round, id=h.id, status=what)
    return 1


def _improved(s: Search, nid: int) -> bool:
    n = s.state.nodes[nid]
    p = s.state.nodes.get(n.parent) if n.parent is not None else None
    return bool(p and p.score is not None and n.score is not None and n.score > p.score)


def note(s: Search, text: str, node: int | None) -> None:
    if s.cfg.components.memory:
        s.add(Insight(text=text[:200], kind="memory", node=node, round=s.round))


# -- stopping -------------------------------------------------------------------------------------------------
def novelty(s: Search) -> tuple[int, int, int]:
    """What a round must change to count as progress: the number of hypotheses, of observation
    sightings (new or confirming), and of direction changes (status moves and routing decisions)."""
    sightings = sum(o.times_seen for o in s.state.observations.values())
    moves = sum(1 for e in s.store.events("hypothesis_status")) + sum(1 for e in s.store.events("routing"))
    return len(s.state.hypotheses), sightings, moves
