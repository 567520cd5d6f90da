"""The end of a run: the answer node re-scored on the hidden test split, `best/`, `summary.json`, the report.

The answer is the best node; on an answer-kind task (no score during the search) it is the best-supported
node. Every number in the summary comes from the store or from the final test evaluation, which runs once
per answer: resuming a finished run reuses the stored test result instead of grading the hidden split
again. `best/` and `summary.json` are rebuilt from the store each time, each replaced in one rename, so a
kill while they are written leaves the old ones or none, never a mix.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import Counter
from pathlib import Path

from arts.search import assembly
from arts.search.context import Run
from arts.search.investigation.standing import best_supported, established, unexplained
from arts.search.methods.base import Method
from arts.search.report.html import write_report
from arts.tasks.evaluate import run_evaluation
from arts.tasks.isolation import probe
from arts.tasks.workcopy import remove


def isolation() -> str:
    """The sandbox's isolation level in force, with what it lacks (`tasks.isolation.probe`)."""
    iso = probe()
    return iso.level + (f" ({iso.note})" if iso.note else "")


def _write_best(run_dir: Path, files: dict[str, str]) -> None:
    """best/ holds the answer's files: staged beside it, then swapped in by renames."""
    for left in run_dir.glob(".best-*"):  # what a kill left half-written
        shutil.rmtree(left, ignore_errors=True)
    stage = Path(tempfile.mkdtemp(prefix=".best-", dir=run_dir))
    for name, text in files.items():
        (stage / name).parent.mkdir(parents=True, exist_ok=True)
        (stage / name).write_text(text)
    old = run_dir / ".best-old"
    if (run_dir / "best").exists():
        (run_dir / "best").rename(old)
    stage.rename(run_dir / "best")
    shutil.rmtree(old, ignore_errors=True)


def acted(ledger) -> dict:
    """What the investigation's decisions changed: follow-ups scheduled and run (by decision), remeasured
    nodes whose score changed, pivots and the proposals asked again after them, refinements run, and
    hypotheses that cite an observation."""
    state = ledger.state
    ran = [e.payload for e in ledger.events("follow_up") if e.payload.get("result") is not None]
    return {
        "decisions": len([e for e in ledger.events("routing") if e.payload.get("decision")])
        + len(ledger.events("reflection")),
        "scheduled": dict(Counter(e.payload["decision"] for e in ledger.events("follow_up_scheduled"))),
        "followed_up": dict(Counter(p["decision"] for p in ran)),
        "remeasured_changed": sum(not e.payload["stable"] for e in ledger.events("remeasure")),
        "refinements_run": sum(p["step"] == "refine" for p in ran),
        "pivots": sum(h.archived for h in state.hypotheses.values()),
        "pivot_retries": len(ledger.events("indistinct")),
        "citing": sum(bool(h.cites) for h in state.hypotheses.values()),
    }


def finish(run: Run, reason: str, method: Method) -> dict:
    state, ledger, task = run.state, run.ledger, run.task
    run_dir = ledger.store.run_dir
    best = state.best()
    if task.config.kind == "answer":  # no score: the answer is the best-supported (part by part) node
        nodes = list(state.nodes.values())
        best = assembly.final_node(run.lab, task, nodes) or best_supported(state) or best
    elif best is None:
        best = best_supported(state)
    claims = [h for h in state.hypotheses.values() if best is not None and best.id in h.nodes]
    test_score = None
    if best is not None and task.config.test is not None:
        done = [e for e in ledger.events("test") if e.payload.get("node") == best.id]
        if done:
            test_score = done[-1].payload["score"] if done[-1].payload.get("valid") else None
        else:
            # The hidden test's working copy is no result of the run, and never lies in its folder, which
            # is shared and exported: a kill before the cleanup would leave the hidden files there.
            remove(run_dir / "test-work")  # left by an earlier version
            work = Path(tempfile.mkdtemp(prefix="arts-test-"))
            try:
                res = run_evaluation(task, best.files, work / "work", split="test")
            finally:
                remove(work)
            test_score = res.score if res.valid else None
            ledger.event("test", node=best.id, valid=res.valid, score=res.score, reason=res.reason)
    if best is not None:
        _write_best(run_dir, best.files)
    check = run.learning.credit() if run.learning is not None else None
    if check is not None:
        run.log(check.line())
    nodes = [n for n in state.nodes.values() if n.parent is not None]
    root = next((n for n in state.nodes.values() if n.parent is None), None)
    m = run.meter
    summary = {
        "task": task.name,
        "method": run.cfg.method,
        "model": (run.cfg.scientist_model.model or "smollm2-135m (embedded)") if method.uses_model else None,
        "nodes": len(nodes),
        "valid_nodes": sum(n.status == "valid" for n in nodes),
        "all_invalid": task.config.kind == "optimize"
        and bool(nodes)
        and all(n.status != "valid" for n in nodes),
        "best": {
            "node": best.id if best else None,
            "score": best.raw_score if best else None,
            "test_score": test_score,
        },
        "answer_node": best.id if best else None,
        "answer_established": bool(claims) and all(established(state, h.id) for h in claims),
        "baseline": root.raw_score if root else None,
        "hypotheses": dict(Counter(h.status for h in state.hypotheses.values())),
        "observations": {
            "count": len(state.observations),
            "confirmed": sum(not o.provisional for o in state.observations.values()),
            "unexplained": len(unexplained(state)),
            "sources": dict(Counter(o.source for o in state.observations.values())),  # probes: sought
        },
        "routing": dict(
            Counter(
                e.payload["decision"]["action"] for e in ledger.events("routing") if e.payload.get("decision")
            )
        ),
        "acted": acted(ledger),
        "evals": m.evals,
        "tokens": dict(m.tokens),
        "dollars": round(m.dollars, 6),
        "wall_s": round(m.wall_s, 2),
        "timing_s": {k: round(v, 2) for k, v in m.timing.items()},
        "stopped_because": reason,
        "isolation": isolation(),
        "updates": {
            "count": len(ledger.events("update")),
            "steps": [e.payload for e in ledger.events("update")],
        },
        "credit": check.model_dump() if check is not None else None,
    }
    tmp = run_dir / ".summary.json.tmp"
    tmp.write_text(json.dumps(summary, indent=2))
    tmp.replace(run_dir / "summary.json")
    ledger.event("finish", **summary)
    write_report(run_dir, state)
    run.log(f"report: {run_dir / 'report.html'}")
    return summary
