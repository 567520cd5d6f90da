"""What a search method is: a round function and the capabilities it declares.

The loop, the run builder and test-time training ask a method what it can do instead of asking for its
name: whether it calls a model (else no backend is loaded and no audit runs), whether it draws a group of
actions from one proposal (what GRPO trains on), and whether it registers hypotheses. Methods register
under a name; `module:attr` names a user's own `Method`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from arts.tasks.registry import Registry

if TYPE_CHECKING:
    from arts.search.context import Run


@dataclass(frozen=True)
class Method:
    round: Callable[[Run], None]
    """One round: choose actions, run them through the lab, record what they showed."""
    uses_model: bool = True
    """Calls the scientist (and executor) models; False: no backend is loaded, no audit runs."""
    makes_groups: bool = False
    """Draws N actions from one proposal, the groups test-time training learns from."""
    registers_hypotheses: bool = False
    """Keeps the hypothesis and observation spaces (the investigation of the arts round)."""


METHODS: Registry[Method] = Registry("search method")


def method(name: str, **capabilities: bool) -> Callable[[Callable[[Run], None]], Callable[[Run], None]]:
    """Register a round function under `name` with its capabilities."""

    def deco(fn: Callable[[Run], None]) -> Callable[[Run], None]:
        METHODS.register(name)(Method(fn, **capabilities))
        return fn

    return deco
