"""`[probe]` of a task.toml: what makes a task a learning probe.

A learning probe is a task whose reward is stationary: one class of moves (a verb and a target of the
seed program, or a verb on any of its targets) keeps paying round after round while the task's other
targets are decoys, so a scientist that learns during the search has something simple and known to learn
(`arts bench --tasks probes`).
The section is read by the harness only: the scientist never sees it, and a probe's statement does not
name the paying move. Not checked here: that the class really pays (tests/test_probe_tasks.py does).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, field_validator

MOVE = re.compile(r"(increase|decrease|tune|swap|rewrite)( [A-Za-z_]\w*(#\d+)?)?")
"""A class of moves as a directed hypothesis starts (`policy.edits.moves.DIRECTED`, less `probe`): a verb
and a target, or a verb alone (that verb on any target but the decoys)."""


class ProbeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    paying: str
    """The class of moves that keeps paying: `increase STEPS`, or a verb alone (`decrease`: on any target
    but the decoys). Without `ttt.watch`, a TTT run on the task watches its probability (`training.watch`)."""
    decoys: list[str] = []
    """Targets of the seed program whose moves, either way, do not pay (inert, or worse)."""

    @field_validator("paying")
    @classmethod
    def _move(cls, v: str) -> str:
        if not MOVE.fullmatch(v):
            raise ValueError(
                f"{v!r} is not a class of moves; write a verb (increase, decrease, tune, swap, rewrite) and a "
                "target of the seed program, e.g. 'increase STEPS', or a verb alone ('decrease': on any target)"
            )
        return v


def in_class(hypothesis: str, move: str, decoys: Iterable[str] = ()) -> bool:
    """Whether a hypothesis is of the class `move`: it begins with the verb and target, or with the verb
    alone on a target that is not a decoy (`decrease PIVOT_EPS` is not of a probe's class `decrease`)."""
    if not hypothesis.startswith(move):
        return False
    words = hypothesis.split()
    return " " in move.strip() or len(words) < 2 or words[1].split("#")[0] not in set(decoys)
