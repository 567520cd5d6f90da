"""The plan: the statement split into situation, deliverable and requirements, once per search.

It is kept in the store's meta, so a resumed run does not ask again, its deliverable line heads every
proposal prompt, and its axes are the axes a free proposal chooses from (`plan_axes`). Not done here: checking the deliverable (the task's evaluator and grader do).
"""

from __future__ import annotations

from typing import Any

from arts.policy.analysis import Analyst
from arts.search.ledger import Ledger


def plan_once(ledger: Ledger, analyst: Analyst | None, statement: str, seed: int) -> None:
    if analyst is None or ledger.meta("plan") is not None:
        return
    plan = analyst.plan(statement, seed=seed)
    value = plan.model_dump() if plan else {}
    ledger.set_meta("plan", value)
    ledger.event("plan", ok=plan is not None, plan=value)


def plan_axes(meta: dict[str, Any]) -> list[str]:
    """The plan's axes, distinct, in its order: a free proposal's axis vocabulary (none before a plan, or
    under one without axes)."""
    return list(dict.fromkeys((meta.get("plan") or {}).get("axes") or []))


def plan_lines(meta: dict[str, Any]) -> str:
    plan = meta.get("plan") or {}
    if not plan:
        return ""
    reqs = "; ".join(plan.get("requirements", []))
    return f"Deliverable: {plan['deliverable']}" + (f" (requirements: {reqs})" if reqs else "")
