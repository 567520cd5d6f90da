"""Hypotheses of an arts round: candidates become working hypotheses, some may not be drawn, and each
tested one is kept, refined or set aside afterwards.

- `admissible`: a candidate is not drawn while it repeats a set-aside hypothesis in its cooldown, an
  archived one, or goes in a direction abandoned by a pivot (`abandoned`; the menus leave it out too);
- `selection_weights`: a stated probability is shared among the candidates of its region (every region
  weighs like one candidate) and raised when the candidate cites an unexplained observation;
- `register`: the drawn candidate as a working hypothesis (found, revived or created);
- `exploit`: retain, refine or set aside each tested hypothesis by its evidence and routed decision.
Not done here: the rules of the space themselves (`space`), or what an experiment showed (`observations`).
"""

from __future__ import annotations

from collections import Counter

from arts.policy.candidates import Candidate
from arts.policy.edits.moves import Moves, directed_target
from arts.policy.proposal_schema import HYPOTHESIS_CHARS
from arts.search.investigation import followups, probes, space, standing
from arts.search.investigation.attribution import Decision, distinct
from arts.search.ledger import Ledger
from arts.search.render import HYPOTHESIS_LINE_CHARS, INSIGHT_CHARS
from arts.search.state import Hypothesis, Insight, Node, SearchState


def _direction(text: str) -> str | None:
    found = directed_target(text)
    return f"{found[0]} {found[1]}" if found else None


def abandoned(state: SearchState) -> set[str]:
    """What pivots gave up: the direction of an archived directed hypothesis (`increase LR`), the axis of
    an archived free one. The opposite step on a knob stays open: one step that hurt says nothing against
    the other (a pivot on `increase TOL` had shut out `decrease TOL`, the move that paid, for the rest of a
    run). Candidates in a given-up direction are not drawn, and the small profile's menus leave it out."""
    out = set()
    for h in state.hypotheses.values():
        if h.archived and (given_up := _direction(h.text) or h.axis):
            out.add(given_up)
    return out


def open_moves(moves: Moves, gone: set[str]) -> Moves:
    """The menus without the given-up directions (`abandoned`); a target none of whose verbs is left goes."""
    kept = {name: tuple(v for v in verbs if f"{v} {name}" not in gone) for name, verbs in moves.items()}
    return {name: verbs for name, verbs in kept.items() if verbs}


def admissible(state: SearchState, cands: list[Candidate], round: int, threshold: float) -> list[bool]:
    """Per candidate, whether it may be drawn: not a set-aside hypothesis in its cooldown, not an archived
    one, and not in a direction a pivot gave up; a free candidate must also differ in meaning from every
    archived hypothesis (a directed one is judged by its direction alone: `decrease TOL` reads much like
    `increase TOL`)."""
    archived = [h.text for h in state.hypotheses.values() if h.archived]
    given_up = abandoned(state)
    out = []
    for c in cands:
        h = space.find_hypothesis(state, c.hypothesis)
        cooling = h is not None and h.status == "set_aside" and h not in space.revivable(state, round)
        gone = h is not None and h.archived
        direction = _direction(c.hypothesis)
        far = direction is not None or not archived or distinct(c.hypothesis, archived, threshold)
        elsewhere = space.normalise_label(c.axis) not in given_up and direction not in given_up
        out.append(not cooling and not gone and far and elsewhere)
    return out


def copies(cands: list[Candidate], example: str | None) -> list[bool]:
    """Which candidates repeat what the proposal already holds: the same hypothesis from the same parent
    as an earlier candidate, or the prompt's example once one candidate has taken it; every candidate when
    all of them are the example (the proposal is then asked again without one). A small model copies the
    example into every candidate (5 of 5 in a char-lm proposal); drawing them would spend the round's N
    actions on one experiment."""
    shown = _words(example) if example else None
    keys = [(c.parent, _words(c.hypothesis)) for c in cands]
    if shown is not None and keys and all(k[1] == shown for k in keys):
        return [True] * len(keys)
    out: list[bool] = []
    for n, key in enumerate(keys):
        earlier = keys[:n]
        out.append(key in earlier or (key[1] == shown and any(k[1] == shown for k in earlier)))
    return out


def _words(text: str) -> str:
    return " ".join(text.lower().split()).rstrip(".")


def refinable(state: SearchState, limit: int) -> dict[int, str]:
    """The working, revived and retained hypotheses a free proposal shows for refinement (`h<id>`), newest
    first, at most `limit`."""
    held = [h for h in state.hypotheses.values() if h.status in space.ACTIVE and not h.archived]
    return {h.id: h.text for h in sorted(held, key=lambda h: -h.id)[:limit]}


def lineage_note(state: SearchState, hypothesis_id: int | None) -> str:
    """What a refinement refines, for the executor: the chain of hypotheses it descends from, each with
    the best score of the nodes that tested it; "" without a lineage."""
    chain = space.lineage(state, hypothesis_id) if hypothesis_id in state.hypotheses else []
    parts = []
    for h in chain[-3:]:  # the nearest ancestors
        scores = [
            state.nodes[n].raw_score for n in h.nodes if n in state.nodes and state.nodes[n].score is not None
        ]
        tried = f", best {max(scores):.5g}" if scores else ", not yet scored"
        parts.append(f'h{h.id} "{h.text[:HYPOTHESIS_LINE_CHARS]}"{tried}')
    return "This refines " + "; which refines ".join(reversed(parts)) + "." if parts else ""


def selection_weights(
    state: SearchState, cands: list[Candidate], cite_boost: float, observations: bool
) -> list[float]:
    regions = Counter(space.normalise_label(c.region) for c in cands)
    open_ids = {o.id for o in standing.unexplained(state)} if observations else set()
    out = []
    for c in cands:
        w = c.probability / regions[space.normalise_label(c.region)]
        out.append(w * cite_boost if open_ids & set(c.cites) else w)
    return out


def combine_hint(state: SearchState, limit: int = 3) -> str:
    """Hypotheses that each improved on their parent may be combined in one candidate."""
    won = [h for h in state.hypotheses.values() if h.status == "retained" and not h.archived][-limit:]
    if len(won) < 2:
        return ""
    names = ", ".join(f"h{h.id} ({h.text[:50]})" for h in won)
    return f"Each of {names} improved the score: a candidate may combine two of them."


def register(ledger: Ledger, cand: Candidate, round: int, parent_hypothesis: int | None = None) -> Hypothesis:
    state = ledger.state
    cites = [o for o in cand.cites if o in state.observations]
    h, new = space.hypothesis_for(
        state,
        cand.hypothesis,
        space.normalise_label(cand.axis),
        space.normalise_label(cand.region),
        round,
        cites=cites,
        parent=parent_hypothesis,
    )
    if new:
        h = ledger.add(h)
        ledger.event("hypothesis", round=round, id=h.id, text=h.text, cites=cites)
        probes.assess(ledger, h.id, round)  # an earlier probe of what it moves bears on it
    moved = space.revive(h, round) if h.status == "set_aside" else space.work(h, round)
    return ledger.update(moved) if moved is not None else h


def tested(state: SearchState, node_ids: list[int]) -> list[Hypothesis]:
    """The hypotheses the given nodes tested, each once, in the order first met."""
    return list({h.id: h for n in node_ids for h in state.hypotheses.values() if n in h.nodes}.values())


class Exploit:
    """Keep, repair, refine or set aside each tested hypothesis (one round's decisions)."""

    def __init__(
        self,
        ledger: Ledger,
        round: int,
        cooldown: int,
        observations: bool,
        memory: bool,
        follow_ups: bool = True,
    ):
        self.ledger, self.round, self.cooldown = ledger, round, cooldown
        self.observations, self.memory, self.follow_ups = observations, memory, follow_ups

    def __call__(self, tested: list[Hypothesis], flawed: set[int], decisions: dict[int, Decision]) -> int:
        """Returns how many directions changed."""
        state, changed = self.ledger.state, 0
        for h in tested:
            h = state.hypotheses[h.id]
            node = next((n for n in h.nodes if n in decisions), None)
            decision = decisions[node] if node is not None else None
            if decision is not None and decision.action != "accept":  # the attribution's route decides
                changed += self.route(h, decision, node)
                continue
            if h.id in flawed:
                self.note(f"h{h.id}: the experiment was flawed; retest it", h.nodes[-1] if h.nodes else None)
                self.retest(h)
                continue
            if decision is not None:  # accept: the result stands as measured, judged as any other
                self.ledger.event("hypothesis_status", round=self.round, id=h.id, status="accepted")
            if self.observations and standing.refuted(state, h.id):
                changed += self.commit(space.set_aside(h, self.round, self.cooldown), "set_aside", h)
            elif any(improved(state, n) for n in h.nodes):
                changed += self.commit(space.retain(h, self.round), "retained", h)
        return changed

    def route(self, h: Hypothesis, d: Decision, node: int | None) -> int:
        """Apply a routing decision to its hypothesis; `node` is the attributed node. Repairs, protocol
        fixes and refinements schedule the next round's follow-up (`followups`); a pivot archives."""
        state = self.ledger.state
        fix, cause = (d.cause.fix, d.cause.cause) if d.cause else ("", "")
        node = node if node is not None else (h.nodes[-1] if h.nodes else None)
        attributed = state.nodes.get(node) if node is not None else None
        if d.action in ("repair", "fix_protocol"):
            what = "implementation" if d.action == "repair" else "evaluation protocol"
            self.note(f"h{h.id}: repair the {what}: {fix}", node)
            if attributed is not None and attributed.parent is not None:
                scored = attributed.status == "valid" and attributed.score is not None
                remeasure = d.action == "fix_protocol" and scored
                self.follow_up(
                    "remeasure" if remeasure else "repair", d.action, h.id, attributed,
                    attributed.id if remeasure else attributed.parent, h.text, h.axis,
                    f"Node {attributed.id} tried this and failed: {cause}. Fix the {what}: {fix}",
                )  # fmt: skip
            return 1
        if d.action in ("refine_local", "refine_structural"):
            text, told = refinement(h, d.action, fix, attributed)
            child = self.ledger.add(space.refine(h, text, self.round))
            self.ledger.event("hypothesis", round=self.round, id=child.id, text=child.text, refines=h.id)
            self.commit(space.set_aside(h, self.round, self.cooldown), "refined", h)
            if attributed is not None and attributed.parent is not None:
                start = followups.start_of(state, attributed)  # a worse but valid program is refined
                worse = attributed.id if start != attributed.id and attributed.status == "valid" else None
                self.follow_up(
                    "refine", d.action, child.id, attributed, start, child.text, h.axis, told, worse
                )
            return 1
        self.commit(space.archive(h, self.round), "archived", h)  # pivot: a fatal flaw of the method
        self.note(f"h{h.id} abandoned (fatal flaw): {cause}", node)
        return 1

    def retest(self, h: Hypothesis) -> None:
        """A comparison called the hypothesis's last experiment flawed (a bug or a broken protocol, not a
        refutation): its measurement is checked again, or a failed one is run again with that warning."""
        last = self.ledger.state.nodes.get(h.nodes[-1]) if h.nodes else None
        if last is None or last.parent is None:
            return
        scored = last.status == "valid" and last.score is not None
        why = "A comparison found the last experiment of this hypothesis flawed (a bug or a broken protocol)"
        self.follow_up(
            "remeasure" if scored else "repair", "retest", h.id, last, last.id if scored else last.parent,
            h.text, h.axis, f"{why}: carry it out again, correctly.",
        )  # fmt: skip

    def follow_up(
        self, step: str, decision: str, hypothesis: int, node: Node, parent: int, text: str, axis: str,
        instructions: str, edits: int | None = None,
    ) -> None:  # fmt: skip
        """Schedule one follow-up, unless the attributed node is itself one (a chain stops after one). A
        repair of the implementation edits the failed program, where it changed its parent's; `edits`: the
        node whose program the executor edits otherwise (a refinement's worse program), under `parent`."""
        if node.follows is not None or not self.follow_ups:
            return
        origin = self.ledger.state.nodes.get(parent)
        own = (
            step == "repair"
            and decision != "fix_protocol"
            and origin is not None
            and node.files != origin.files
        )
        item = followups.FollowUp(
            step=step, decision=decision, hypothesis=hypothesis, node=node.id, parent=parent, text=text,
            axis=axis, instructions=instructions[:300], round=self.round, start=node.id if own else edits,
        )  # fmt: skip
        followups.schedule(self.ledger, item)

    def commit(self, moved: Hypothesis | None, what: str, h: Hypothesis) -> int:
        if moved is None:
            return 0
        self.ledger.update(moved)
        self.ledger.event("hypothesis_status", round=self.round, id=h.id, status=what)
        return 1

    def note(self, text: str, node: int | None) -> None:
        if self.memory:
            self.ledger.add(Insight(text=text[:INSIGHT_CHARS], kind="memory", node=node, round=self.round))


def refinement(h: Hypothesis, action: str, fix: str, node: Node | None) -> tuple[str, str]:
    """A refined hypothesis and the executor's instructions. Local: the same change (same move, same
    target) made smaller, or with one companion change beside it. Structural: one component of the
    hypothesis replaced by the fix, the rest kept."""
    if action == "refine_local":
        before = f" than node {node.id} took" if node is not None else ""
        told = f"Refined locally: the same change with a smaller step{before}, or with one companion change: {fix}"
        return f"{h.text[:100]}, a smaller step"[:HYPOTHESIS_CHARS], told
    told = f"Refined structurally: keep the aim, change this component of how it is done: {fix}"
    return f"{h.text[:60]}; {fix}"[:HYPOTHESIS_CHARS], told


def improved(state: SearchState, nid: int) -> bool:
    n = state.nodes[nid]
    p = state.nodes.get(n.parent) if n.parent is not None else None
    return bool(p and p.score is not None and n.score is not None and n.score > p.score)


def novelty(ledger: Ledger) -> tuple[int, int, int]:
    """What a round must change to count as progress: the number of hypotheses, of observation sightings
    (new or confirming), and of direction changes (status moves and routing decisions)."""
    state = ledger.state
    sightings = sum(o.times_seen for o in state.observations.values())
    moves = len(ledger.events("hypothesis_status")) + len(ledger.events("routing"))
    return len(state.hypotheses), sightings, moves
