"""The grammar of a verbalized proposal: what each candidate may say, as per-call pydantic models.

Node ids are `Literal` enums of the ids that exist, hypotheses are length-capped and pattern-checked, a
directed hypothesis is one of the moves its candidate was offered (`directed_pattern`), regions and axes
come from small vocabularies. `canonical_action` is one candidate as the single-action text training
scores. Used by the scientist (asking) and by training (replaying the grammar of a stored action).
"""

from __future__ import annotations

import json
from typing import Literal, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

from arts.policy.backends.spelling import HEAT, PHRASES
from arts.policy.candidates import Candidate
from arts.policy.edits.moves import Moves, directed_target

HYPOTHESIS_CHARS = 120
"""Cap on a hypothesis: one concrete change fits; longer ones were prose the executor could not follow."""
HYPOTHESIS_PATTERN = rf'^[A-Za-z][^{{}}"\\\n]{{7,{HYPOTHESIS_CHARS - 1}}}$'
"""A hypothesis starts with a letter and holds no braces, quotes or backslashes: unconstrained, the 135M
default wrote JSON fragments and list numbers as hypotheses ("1.3159651595}, {", "3. effect of...")."""
DIRECTED_TAIL = 60
"""Cap on what a directed hypothesis adds after its verb and target (the value, the reason)."""


def _hypothesis(pattern: str | None = None, moves: Moves | None = None):
    """The hypothesis field: its pattern bounds the length; with `moves` (those `pattern` admits), the
    schema lists them as the phrases whose spelling decoding keeps (`policy.backends.spelling`)."""
    extra = {PHRASES: move_phrases(moves)} if pattern and moves else None
    return Field(pattern=pattern or HYPOTHESIS_PATTERN, json_schema_extra=extra)


def move_phrases(moves: Moves) -> list[str]:
    """Each move a directed hypothesis may start with: a verb and its target."""
    return [f"{verb} {name}" for name, verbs in moves.items() for verb in verbs]


KINDS = {"increase": "constants", "decrease": "constants", "rewrite": "returns", "tune": "keywords",
         "swap": "calls", "probe": "probes", "suspect": "answers"}  # fmt: skip
"""The region of a directed move, by its verb: a readable vocabulary of kinds of change."""


FREE_REGIONS = ("algorithm", "calls", "constants", "data", "evaluation", "keywords", "returns", "structure")
"""The region of a free hypothesis: the kinds of change of directed moves (`KINDS`, less probes) and the
broader ones a free hypothesis may make."""
OTHER = "other"
"""The axis of a free hypothesis that varies none of the plan's axes."""


def labelled(c: Candidate) -> Candidate:
    """A directed candidate whose axis is the target its hypothesis moves and whose region is the kind of
    that move (`KINDS`); a candidate that names no move is returned as it is."""
    move = directed_target(c.hypothesis)
    if move is None or move[0] not in KINDS:
        return c
    return c.model_copy(update={"axis": move[1], "region": KINDS[move[0]]})


def _escape_dots(name: str) -> str:
    return name.replace(".", r"\.")


def directed_pattern(moves: Moves) -> str | None:
    """The hypothesis pattern of `ScientistConfig.directed`: one of the moves (a verb and its target),
    then at most DIRECTED_TAIL characters of detail; None when there is no move. Targets are Python
    identifiers, dotted names or `name#k`: only the dots need escaping."""
    forms = [
        f"{verbs[0] if len(verbs) == 1 else '(' + '|'.join(verbs) + ')'} {_escape_dots(name)}"
        for name, verbs in moves.items()
        if verbs
    ]
    if not forms:
        return None
    # `{0,1}`, not `?`: under a JSON schema, xgrammar 0.2.9 compiles `( [...]{3,60})?` so that the class
    # may follow the target without the space ("increase Xi" passed the grammar, then failed pydantic)
    return rf'^({"|".join(forms)})( [^{{}}"\\\n]{{3,{DIRECTED_TAIL}}}){{0,1}}$'


def id_literal(ids: list[int]):
    """The type that admits exactly these ids (a node, an observation, a hypothesis)."""
    return Literal[tuple(ids)] if ids else int  # type: ignore[valid-type]


def candidate_schema(parent_ids: list[int]) -> type[BaseModel]:
    """The canonical single action {parent, hypothesis, axis}; `parent` is restricted to existing ids."""
    return create_model(
        "Action",
        __config__=ConfigDict(extra="forbid"),
        parent=(id_literal(parent_ids), ...),
        hypothesis=(str, _hypothesis()),
        axis=(str, Field(min_length=2, max_length=30)),
    )


def candidate_item(
    parent_ids: list[int],
    observation_ids: list[int] | None = None,
    pattern: str | None = None,
    moves: Moves | None = None,
    refinable: list[int] | None = None,
    plan_axes: list[str] | None = None,
    axis_first: bool = False,
) -> type[BaseModel]:
    """One verbalized candidate: the action, its region, its stated probability, and (when observations are
    shown) the observation ids that motivated it. No free-text rationale: at 135M parameters every field
    costs tokens, and K=5 candidates with a rationale ran past 320 tokens in 3 of 3 proposals. `pattern`
    replaces the hypothesis's default pattern (see `directed_pattern`); with its `moves`, the axis is one
    of their targets and the region one of their kinds (`KINDS`), a vocabulary instead of free strings;
    without, the axis is one of `plan_axes` (the plan's, see `policy.analysis.Plan.axes`) or OTHER, and
    the region one of FREE_REGIONS. `axis_first` writes the axis before the hypothesis, so that a directed
    hypothesis's verb is chosen knowing its target; with `moves`, the axis is the target the hypothesis
    moves (`bound_item`)."""
    if axis_first and moves and pattern:
        return bound_item(parent_ids, observation_ids, moves, refinable)
    label = (str, Field(min_length=2, max_length=30))
    if moves:
        axes = list(moves)
        kinds = sorted({KINDS[v] for verbs in moves.values() for v in verbs})
    else:  # a free candidate: the plan's axes, when it named some, and the kinds of change
        axes = list(dict.fromkeys([*plan_axes, OTHER])) if plan_axes else []
        kinds = list(FREE_REGIONS)
    hypothesis, axis = (str, _hypothesis(pattern, moves)), (Literal[tuple(axes)], ...) if axes else label
    fields: dict = {"parent": (id_literal(parent_ids), ...)}
    fields.update(
        {"axis": axis, "hypothesis": hypothesis} if axis_first else {"hypothesis": hypothesis, "axis": axis}
    )
    fields |= {
        "region": (Literal[tuple(kinds)], ...) if kinds else label,
        "probability": (float, Field(ge=0, le=1)),
    }
    if observation_ids:
        fields["cites"] = (list[id_literal(observation_ids)], Field(max_length=2))
    if refinable:
        fields["refines"] = (
            id_literal(refinable) | None,
            None,
        )  # optional: an answer without it still stands
    return create_model("Candidate", __config__=ConfigDict(extra="forbid"), **fields)


def bound_item(
    parent_ids: list[int], observation_ids: list[int] | None, moves: Moves, refinable: list[int] | None = None
):
    """A directed candidate written axis first whose axis is its target: one alternative per target, the
    axis that target's name and the hypothesis one of that target's moves. Unbound, the embedded model
    wrote an axis naming another target ("CHUNK", then "increase STEPS") in most lists of a probe run, and
    the move's tokens then read a context that varied from list to list (as did their spelling in
    tokens): the adapter's shift of one move ("increase STEPS" under one checkpoint, in three lists of one
    group) ranged from -0.46 to +0.33 nats (`scripts/credit_tokens.py`). Bound, the target is chosen at
    the axis, right after the parent, and the verb knowing it."""
    alternatives = []
    for target, verbs in moves.items():
        if not verbs:
            continue
        fields: dict = {
            "parent": (id_literal(parent_ids), ...),
            "axis": (Literal[target], ...),
            "hypothesis": (str, _hypothesis(directed_pattern({target: verbs}), {target: verbs})),
            "region": (Literal[tuple(sorted({KINDS[v] for v in verbs}))], ...),
            "probability": (float, Field(ge=0, le=1)),
        }
        if observation_ids:
            fields["cites"] = (list[id_literal(observation_ids)], Field(max_length=2))
        if refinable:
            fields["refines"] = (id_literal(refinable) | None, None)
        alternatives.append(create_model("Candidate", __config__=ConfigDict(extra="forbid"), **fields))
    return Union[tuple(alternatives)] if len(alternatives) > 1 else alternatives[0]  # noqa: UP007


def proposal_schema(
    parent_ids: list[int],
    k: int,
    observation_ids: list[int] | None = None,
    patterns: list[str | None] | None = None,
    shares: list[Moves] | None = None,
    refinable: list[int] | None = None,
    plan_axes: list[str] | None = None,
    axis_first: bool = False,
    heat: float = 1.0,
) -> type[BaseModel]:
    """K candidates; with `patterns` (one per candidate, see `spread`), candidate i's hypothesis follows
    pattern i (a JSON-schema tuple, which xgrammar enforces position by position), and its axis and
    region name one of `shares[i]`'s targets and kinds; `heat` (not 1) is the factor on the temperature
    at a phrase choice (`policy.backends.spelling.HEAT`), kept in the schema so replay finds it."""
    if patterns:
        shares = shares or [None] * len(patterns)
        items = tuple(
            candidate_item(parent_ids, observation_ids, p, m, axis_first=axis_first)
            for p, m in zip(patterns, shares)
        )
        extra = {HEAT: heat} if heat != 1.0 else None
        config = ConfigDict(extra="forbid", json_schema_extra=extra)
        return create_model("Proposal", __config__=config, candidates=(tuple[items], ...))
    cand = candidate_item(
        parent_ids, observation_ids, refinable=refinable, plan_axes=plan_axes, axis_first=axis_first
    )
    return create_model(
        "Proposal",
        __config__=ConfigDict(extra="forbid"),
        candidates=(list[cand], Field(min_length=k, max_length=k)),
    )


def canonical_action(c: Candidate | dict) -> str:
    """The single-action text that training scores, written exactly as the grammar emits it (same key
    order, `", "` and `": "` separators, no ASCII escaping), so its masked log-prob is finite. Not
    validated: an action stored under an older schema still gets its text (and is then off-grammar)."""
    c = c.model_dump() if isinstance(c, Candidate) else c
    action = {"parent": int(c["parent"]), "hypothesis": str(c["hypothesis"]), "axis": str(c["axis"])}
    return json.dumps(action, separators=(", ", ": "), ensure_ascii=False)
