"""The loop: audits, then rounds of the chosen method until the meter says stop, then the summary.

Every state change goes through the ledger before the next step, so a killed run resumes from its store;
the in-memory state is a cache of the store, never the truth. Methods differ only in their round
(`search.methods`); they share the lab, the sandbox and the store so that they compare on equal terms.
"""

from __future__ import annotations

import time

from arts.search.context import Run
from arts.search.methods.base import Method
from arts.search.report.html import live_update
from arts.search.state import Insight
from arts.search.summary import finish

AUDIT_ECHO_CHARS = 80
"""An audit's metric and weakness are echoed to the console cut to this (the store keeps them whole)."""


def run_search(run: Run, method: Method) -> dict:
    run.lab.close_interrupted()
    # the meter's start, earlier runs' wall time included: `arts status` reads a live run's wall from it
    run.ledger.set_meta("wall_t0", run.meter.t0)
    run.lab.ensure_root()
    if method.uses_model and run.cfg.components.audit:
        audit(run)
    reason = run.stop_reason()
    while reason is None:
        run.ledger.set_meta("round", run.round + 1)
        run.ledger.event("round_start", round=run.round)
        before = run.meter.evals
        method.round(run)
        run.meter.round_done(evaluated=run.meter.evals > before)
        run.ledger.set_meta("wall_s", run.meter.wall_s)
        reason = run.stop_reason()
        live_update(run, last=reason is not None)
    return finish(run, reason, method)


def audit(run: Run) -> None:
    """The first R scientist calls read the material, the seed program and the evaluator; no expansion.
    They are independent, so they are asked at once (`search.batching`); each is stored as it ends."""
    done, audits = len(run.ledger.events("audit")), run.cfg.scientist.audits
    if done >= audits:
        return
    run.phase(f"audit {done + 1}-{audits}/{audits}" if audits - done > 1 else f"audit {audits}/{audits}")
    batching = run.agents.batching
    with batching.together(run.agents.scientist_backend) as together:
        together([lambda i=i: audit_one(run, i) for i in range(done, audits)])
    if batching.batches:
        run.ledger.event("overlap", round=run.round, step="audit", batches=batching.batches)


def audit_one(run: Run, i: int) -> None:
    t0 = time.time()
    notes, c = run.agents.scientist.audit(audit_context(run, i), seed=run.seeds.audit(i))
    run.ledger.event("audit", index=i, ok=notes is not None, error=c.error, seconds=time.time() - t0)
    if notes is None:
        run.log(f"audit {i + 1}: unusable answer ({c.error})")
        return
    for label, text in (
        ("metric", notes.metric),
        ("structure", notes.structure),
        ("weakness", notes.weakness),
    ):
        run.ledger.add(Insight(text=f"{label}: {text}", kind="audit", round=0))
    run.log(f"audit {i + 1}: done")
    run.said(
        f"audit {i + 1}: metric: {notes.metric[:AUDIT_ECHO_CHARS]} | weakness: {notes.weakness[:AUDIT_ECHO_CHARS]}"
    )


def audit_context(run: Run, i: int) -> str:
    """Audit i reads the statement with the evaluator (even i) or with the seed program (odd i)."""
    task, chars = run.task, run.cfg.scientist.audit_material_chars
    statement = task.statement[: run.cfg.scientist.audit_statement_chars]
    if i % 2 == 0:
        material = task.read_material(max_chars=chars)
        text = "\n".join(
            f"### {name}\n{body}"
            for name, body in list(material.items())[: run.cfg.scientist.audit_material_files]
        )
        return f"## Task\n{statement}\n\n## Material\n{text}"
    seed = "\n".join(f"### {k}\n{v[:chars]}" for k, v in task.seed_files().items()) or "(no seed program)"
    return f"## Task\n{statement}\n\n## Seed program\n{seed}"
