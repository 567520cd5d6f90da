"""Observation search: probes that measure something about the program without trying to improve it.

A probe asks how the score responds to one numeric constant T of the best program: T is moved down to
about half and up to about double (the nearest entries of its value menu, so the same values an
experiment could reach), each variant measured once (a program the run already ran is not run again: its
score is reused). The variants are nodes of the tree like any other (axis `probe`), so a variant that
happens to score better is not lost; but a probe registers no hypothesis. What it found is one
observation, written by the harness from the numbers (`LR 0.003: at 0.0015 bpc fell, at 0.006 it rose`),
in the region `sensitivity of T`, with an evidence relation to every working hypothesis: those that move
T are supported or opposed by the direction they move it in, the rest are `unassessed`. A hypothesis on
T registered later is related to every earlier probe of T as it is registered (`assess`).

Where probes come from: a comparison's predictions that name a constant of the best program (a prediction
that tells hypotheses apart becomes a measurement), and the scientist's own `probe T` candidates.
"""

from __future__ import annotations

from typing import Literal

from arts.policy.edits.apply import EditError, SetConstant, apply_edit
from arts.policy.edits.menus import value_menu
from arts.policy.edits.moves import directed_target
from arts.policy.edits.targets import list_targets, number
from arts.search.investigation import space
from arts.search.ledger import Ledger
from arts.search.state import Node, SearchState

Direction = Literal["rose", "fell", "held"]
KEY = "probes"
"""Run meta: per probed constant, the latest probe's outcome {"low": Direction, "high": Direction,
"observation": id, "node": the node probed}."""
REGION = "sensitivity of {}"


def constants(node: Node) -> dict[str, int | float]:
    """The numeric module-level constants of a node's program, by name."""
    out: dict[str, int | float] = {}
    for path, text in node.files.items():
        if not path.endswith(".py"):
            continue
        for name, src in list_targets(text).constants.items():
            if (value := number(src)) is not None:
                out[name] = value
    return out


def named_constant(text: str, node: Node) -> str | None:
    """The constant of `node`'s program a text names (a prediction such as 'raising LR lowers bpc')."""
    words = {w.strip(".,;:()'\"") for w in text.split()}
    return next((name for name in constants(node) if name in words), None)


def variants(node: Node, name: str) -> list[tuple[str, int | float]]:
    """("low", value) and ("high", value): the menu entries nearest half and double the current value."""
    value = constants(node).get(name)
    if value is None:
        return []
    menu = value_menu(value)
    below, above = [v for v in menu if v < value], [v for v in menu if v > value]
    out = []
    if below:
        out.append(("low", min(below, key=lambda v: abs(v - value / 2 if value > 0 else v - value * 2))))
    if above:
        out.append(("high", min(above, key=lambda v: abs(v - value * 2 if value > 0 else v - value / 2))))
    return out


def direction(before: float | None, after: float | None) -> Direction | None:
    if before is None or after is None:
        return None
    return "rose" if after > before else "fell" if after < before else "held"


def probed(state: SearchState, name: str, node: Node) -> bool:
    """Whether `name` was probed on this very node already (a repeat would measure the same)."""
    return state.meta.get(KEY, {}).get(name, {}).get("node") == node.id


def relation_to(hypothesis: str, name: str, outcome: dict[str, str]) -> str:
    """How a probe of `name` bears on a hypothesis: one that moves `name` is supported when the probe
    saw the score rise in its direction, opposed when it fell, neutral when it held."""
    found = directed_target(hypothesis)
    if found is None or found[1] != name or found[0] not in ("increase", "decrease"):
        return "unassessed"
    seen = outcome.get("high" if found[0] == "increase" else "low")
    return {"rose": "support", "fell": "oppose", "held": "neutral"}.get(seen or "", "unassessed")


def record(ledger: Ledger, node: Node, name: str, measured: dict[str, tuple[int | float, float | None]],
           metric: str, round: int) -> int | None:  # fmt: skip
    """Store the probe's observation and its relations to every working hypothesis; returns its id."""
    state = ledger.state
    outcome = {side: d for side, (_, raw) in measured.items() if (d := direction(node.raw_score, raw))}
    if not outcome:
        return None
    value = constants(node)[name]
    parts = [f"at {measured[s][0]} {metric} {outcome[s]}" for s in ("low", "high") if s in outcome]
    text = f"{name} {value}: " + ", ".join(parts)
    o, new = space.observe(state, text, "probe", REGION.format(name), node.id, round)
    oid = (ledger.add(o) if new else ledger.update(o)).id
    for h in state.hypotheses.values():
        if h.status in ("working", "retained") and not h.archived:
            rel = relation_to(h.text, name, outcome)
            ledger.put(space.relate(state, oid, h.id, rel, round, note=f"probe of {name} on node {node.id}"))
    probes = dict(state.meta.get(KEY, {}))
    probes[name] = {**outcome, "observation": oid, "node": node.id}
    ledger.set_meta(KEY, probes)
    ledger.event("probe", round=round, node=node.id, name=name, observation=oid, outcome=outcome)
    return oid


def assess(ledger: Ledger, hypothesis_id: int, round: int) -> None:
    """Relate a newly registered hypothesis to the earlier probe of the constant it moves, if any."""
    state = ledger.state
    h = state.hypotheses[hypothesis_id]
    found = directed_target(h.text)
    probe = state.meta.get(KEY, {}).get(found[1]) if found else None
    if probe is None or probe.get("observation") not in state.observations:
        return
    rel = relation_to(h.text, found[1], probe)
    ledger.put(space.relate(state, probe["observation"], h.id, rel, round, note="an earlier probe"))


def program(node: Node, name: str, value: int | float) -> dict[str, str] | None:
    try:
        return apply_edit(node.files, SetConstant(name=name, value=value))
    except EditError:
        return None
