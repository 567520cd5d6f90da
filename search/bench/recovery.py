"""The recovery benchmark: failed experiments whose cause is known by construction, and what each method
makes of them (SAGE's measure of failure attribution).

A scenario (`tasks/recovery/scenarios.toml`) is a task of `tasks/recovery/` whose seed program (as the
template has it, or tuned by the scenario to a local optimum of its knobs) is the parent, and one failed
child: the seed with a few text edits, tried for a stated hypothesis, whose right route is known (`level`:
repair a bug, fix the protocol, refine locally or structurally, pivot, accept).
A run of a scenario evaluates the seed, then makes round 1 the failed experiment: its program evaluated as
any node (uncounted, like the seed; with measurement jitter, again until it measures below its parent,
as the scenario says happened), registered as the round's hypothesis and settled as an arts round settles
its nodes (`methods.arts.settle`: attribution, comparison, the follow-ups it schedules). Then the method
searches on for the budget. Two figures per run:

- the route: the action the attribution settled on for the failed node ("none" when the method routes
  nothing: no attribution, or reflection), right when it is the scenario's level; a local route whose line
  search found no value beating the parent became a pivot (`pursue.refuted`), and the row has the pivot
  (`first`: the route before any such verdict; a stall's later attribution of a plateau holding the
  node does not count: `settled_route`);
- recovery: whether a later experiment beat the failed node's parent within the budget (metrics-bearing
  recovery: a score, not a verdict).

Runs are resumable by row (`rows.csv` keeps one per finished run); a run killed midway starts again.
"""

from __future__ import annotations

import csv
import fnmatch
import math
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from arts.search.bench.metrics import Interval, bootstrap_ci, mean_ci
from arts.search.bench.plan import METHOD_ALIASES
from arts.search.investigation.attribution import Action

ROOT = Path(__file__).resolve().parents[2] / "tasks" / "recovery"
SCENARIOS = ROOT / "scenarios.toml"
METHODS = ("arts", "arts-no-critic", "arts-k1", "arts-reflection", "arts-no-attribution")
"""MHFA (arts) and its ablations, as `arts bench` names them."""
ROW_FIELDS = ["scenario", "level", "method", "seed", "failed", "route", "right", "recovered", "best",
              "parent", "evals", "seconds", "first"]  # fmt: skip
INJECT_TRIES = 20
"""Evaluations of a jittered scenario's failed program until one measures below its parent."""


class Scenario(BaseModel):
    """One failed experiment of known cause."""

    model_config = ConfigDict(extra="forbid")
    name: str
    task: str
    """A folder of `tasks/recovery/`: the parent is its seed program."""
    level: Action
    """The route a correct attribution takes."""
    hypothesis: str
    axis: str
    why: str
    """What makes `level` right, with the scores that show it."""
    edits: list[tuple[str, str]] = Field(min_length=1)
    """[old, new] replacements in the parent's solution.py, each old text found exactly once."""
    parent: list[tuple[str, str]] = []
    """[old, new] replacements in the task template's seed that make this scenario's parent (its seed): a
    tuned program, at a local optimum of its knobs, so that only the right route's fix pays. Empty: the
    template's seed as it is."""
    remedy: list[tuple[str, str]] = []
    """[old, new] replacements in the parent: the program the right route leads to, which beats the parent
    (the tests check it; the benchmark never shows it to a method)."""
    jitter: float = Field(0.0, ge=0.0)
    """Relative noise of the task's measurement (the evaluator's JITTER); 0: exact."""
    held_out: bool = False
    """Written after the harness's signals (`search.investigation.signals`) were, without running them on
    it first: its routing measures those rules out of sample."""

    @model_validator(mode="after")
    def _task_exists(self) -> Scenario:
        if not (ROOT / self.task / "task.toml").is_file():
            raise ValueError(f"scenario {self.name}: no task folder tasks/recovery/{self.task}")
        return self

    def failed_program(self, seed: str) -> str:
        """The parent's program (the run's seed) with the edits made; a missing or repeated old text is an
        error."""
        return self._edited(seed, self.edits, "the seed")

    def parent_program(self, template: str) -> str:
        """The task template's seed program made this scenario's parent."""
        return self._edited(template, self.parent, "the template's seed")

    def remedy_program(self, seed: str) -> str:
        """The parent's program (the run's seed) fixed the way the scenario's level says."""
        return self._edited(seed, self.remedy, "the seed")

    def _edited(self, text: str, edits: list[tuple[str, str]], what: str) -> str:
        for old, new in edits:
            if text.count(old) != 1:
                raise ValueError(
                    f"scenario {self.name}: {old!r} is in {what} {text.count(old)} times, not once"
                )
            text = text.replace(old, new)
        return text


def load_scenarios(path: Path = SCENARIOS, names: list[str] | None = None) -> list[Scenario]:
    """The scenarios of `path` (all, or those named, in the file's order); a name may be a shell pattern
    (`lo-*`: every scenario from the local optimum)."""
    raw = tomllib.loads(path.read_text())["scenario"]
    out = [Scenario(**s) for s in raw]
    if names:
        unknown = [n for n in names if not any(fnmatch.fnmatchcase(s.name, n) for s in out)]
        if unknown:
            raise ValueError(f"unknown scenario(s) {sorted(unknown)}; known: {[s.name for s in out]}")
        out = [s for s in out if any(fnmatch.fnmatchcase(s.name, n) for n in names)]
    return out


def make_task(s: Scenario, where: Path) -> Path:
    """The scenario's task folder under `where`: its template, with the scenario's parent as the seed
    and the measurement's jitter set."""
    dest = where / s.name
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(ROOT / s.task, dest)
    if s.parent:
        solution = dest / "solution.py"
        solution.write_text(s.parent_program(solution.read_text()))
    if s.jitter:
        evaluator, toml = dest / "evaluate.py", dest / "task.toml"
        text = evaluator.read_text()
        assert "JITTER = 0.0" in text, f"{s.task}/evaluate.py sets no JITTER"
        evaluator.write_text(text.replace("JITTER = 0.0", f"JITTER = {s.jitter}", 1))
        toml.write_text(toml.read_text().replace("deterministic = true", "deterministic = false", 1))
    return dest


def inject(run: Any, method: Any, s: Scenario) -> Any:
    """Round 1 of `run` is the scenario's failed experiment, from the seed, settled as an arts round
    settles its nodes; the failed node."""
    from arts.policy.candidates import Candidate
    from arts.search.investigation import hypotheses
    from arts.search.methods.arts import settle
    from arts.search.methods.proposals import after
    from arts.tasks.evaluate import run_evaluation

    root = run.lab.ensure_root()
    files = {**root.files, "solution.py": s.failed_program(root.files["solution.py"])}

    def edit(node: Any, workdir: Path) -> Any:
        node.files = files
        for _ in range(INJECT_TRIES if s.jitter else 1):
            node = run.lab.score(node, run_evaluation(run.task, files, workdir))
            if node.score is None or root.score is None or node.score < root.score:
                break
        return node

    run.ledger.set_meta("round", 1)
    run.ledger.event("round_start", round=1)
    cand = Candidate(
        parent=root.id, hypothesis=s.hypothesis, axis=s.axis, region="algorithm", probability=1.0
    )
    h = hypotheses.register(run.ledger, cand, 1) if method.registers_hypotheses else None
    node = after(run, run.lab.expand(root, s.hypothesis, s.axis, edit=edit), h)
    if method.registers_hypotheses:  # the arts round and its ablations
        settle(run, [node])
    run.meter.round_done(evaluated=True)
    return node


def run_scenario(
    s: Scenario, method: str, seed: int, evals: int, out: Path, model: str | None = None,
    log: Callable[[str], None] = lambda line: None,
) -> dict[str, Any]:  # fmt: skip
    """One run of `method` on scenario `s` into `out/runs/`: its row (`ROW_FIELDS`). `evals` 0: the route
    only, no search after it (recovery is then not measured: its field is empty)."""
    from arts.search.config import load_config, to_toml
    from arts.search.investigation.reports import failed_or_regressed
    from arts.search.loop import run_search
    from arts.search.run import build_run
    from arts.search.store import Store

    t0 = time.time()
    base, extra = METHOD_ALIASES.get(method, (method, {}))
    task = make_task(s, out / "tasks")
    overrides = {"task": str(task), "method": base, "seed": seed, "budget.evals": max(evals, 1), **extra}
    if model is not None:
        overrides |= {"scientist_model.model": model, "executor_model.model": model}
    cfg = load_config(None, overrides)
    run_dir = out / "runs" / f"{s.name}--{method}--s{seed}"
    if run_dir.exists():  # killed midway: the scenario starts again
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    (run_dir / "config.toml").write_text(to_toml(cfg))
    with Store.open(run_dir) as store:
        run, meth = build_run(cfg, store, log)
        failed = inject(run, meth, s)
        if evals:
            run_search(run, meth)
        state = run.state
    root = next(n for n in state.nodes.values() if n.parent is None)
    first, route = settled_route(state, failed.id)
    later = [n.score for n in state.nodes.values() if n.id > failed.id and n.score is not None]
    regressed = failed_or_regressed(state, failed)
    return {
        "scenario": s.name, "level": s.level, "method": method, "seed": seed, "failed": regressed,
        "route": route, "right": route == s.level,
        "recovered": (bool(later) and root.score is not None and max(later) > root.score) if evals else "",
        "best": max(later) if later else None, "parent": root.score,
        "evals": sum(1 for n in state.nodes.values() if n.id > failed.id), "seconds": round(time.time() - t0, 1),
        "first": first,
    }  # fmt: skip


def settled_route(state: Any, node: int) -> tuple[str, str]:
    """(The attribution's first route for `node`, the route it settled on): the first, unless it was a
    local refinement whose line search later gave its verdict (a routing event with `verified`,
    `pursue.refuted`). A stall's later attribution of a plateau that holds the node is another decision,
    not the failure's route, and so is the verdict on a refinement that decision scheduled."""
    routes = [
        e.payload for e in sorted(state.events.values(), key=lambda e: e.id)
        if e.kind == "routing" and e.payload.get("node") == node
    ]  # fmt: skip
    if not routes:
        return "none", "none"
    action = lambda r: r["decision"]["action"] if r.get("decision") else "none"  # noqa: E731
    verdicts = [r for r in routes if r.get("verified")] if action(routes[0]) == "refine_local" else []
    return action(routes[0]), action(verdicts[-1] if verdicts else routes[0])


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The finished runs' rows of a `rows.csv` (none when it does not exist)."""
    if not path.is_file():
        return []
    with path.open() as f:
        return list(csv.DictReader(f))


def append_row(path: Path, row: dict[str, Any]) -> None:
    """One finished run's row; a table written before a field was added is rewritten with it (empty)."""
    old = read_rows(path)
    new = not old or list(old[0]) != ROW_FIELDS
    with path.open("w" if new else "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=ROW_FIELDS)
        if new:
            writer.writeheader()
            writer.writerows({k: r.get(k, "") for k in ROW_FIELDS} for r in old)
        writer.writerow(row)


def _flag(value: Any) -> float:
    return 1.0 if str(value) == "True" else 0.0


def _runs(rows: list[dict[str, Any]], method: str, field: str) -> list[list[float]]:
    """The method's per-run values of `field` (runs whose experiment did fail), as one stratum: the interval
    resamples runs across scenarios, so it speaks for scenarios of this kind, not only for these seeds."""
    return [
        [
            _flag(r[field])
            for r in rows
            if r["method"] == method and str(r["failed"]) == "True" and r[field] != ""
        ]
    ]


def summary(rows: list[dict[str, Any]], methods: list[str] | None = None) -> list[str]:
    """Markdown: per method, routing accuracy and recovery with bootstrap intervals over its runs, and each
    method's figures against arts's."""
    methods = methods or sorted({r["method"] for r in rows}, key=lambda m: (m != "arts", m))
    lines = ["| method | runs | routing accuracy [95% CI] | recovery [95% CI] |", "|---|---|---|---|"]
    for m in methods:
        acc, rec = _runs(rows, m, "right"), _runs(rows, m, "recovered")
        runs = sum(len(s) for s in acc)
        lines.append(f"| {m} | {runs} | {mean_ci(acc).fmt()} | {mean_ci(rec).fmt()} |")
    if "arts" in methods and len(methods) > 1:
        lines += ["", "| arts − B | recovery difference [95% CI] | routing accuracy difference [95% CI] |",
                  "|---|---|---|"]  # fmt: skip
        for m in methods:
            if m != "arts":
                rec = mean_difference_ci(_runs(rows, "arts", "recovered"), _runs(rows, m, "recovered"))
                acc = mean_difference_ci(_runs(rows, "arts", "right"), _runs(rows, m, "right"))
                lines.append(f"| arts − {m} | {rec.fmt()} | {acc.fmt()} |")
    held = {s.name for s in load_scenarios() if s.held_out}
    for part, keep in (("the held-out", True), ("the other", False)):
        some = [r for r in rows if (r["scenario"] in held) == keep]
        if held and some and len(some) < len(rows):
            figures = ", ".join(f"{m} {mean_ci(_runs(some, m, 'right')).fmt()}" for m in methods
                                if any(r["method"] == m for r in some))  # fmt: skip
            lines += ["", f"Routing accuracy on {part} scenarios: {figures}."]
    firsts = [r for r in rows if r["method"] == "arts" and r.get("first")]
    if any(r["first"] != r["route"] for r in firsts):
        first = mean_ci([[float(r["first"] == r["level"]) for r in firsts if str(r["failed"]) == "True"]])
        lines += ["", f"arts's routing accuracy before its line searches' verdicts: {first.fmt()} "
                  f"({sum(r['first'] != r['route'] for r in firsts)} routes changed by one)."]  # fmt: skip
    levels = {}
    for r in rows:
        if r["method"] == "arts":
            levels.setdefault(r["level"], []).append(r["route"])
    if levels:
        lines += ["", "arts's routes by known level: " + "; ".join(
            f"{lv} → {', '.join(sorted(set(rs)))}" for lv, rs in sorted(levels.items()))]  # fmt: skip
    return lines


def mean_difference_ci(a: list[list[float]], b: list[list[float]], **kw: Any) -> Interval:
    """mean(a) − mean(b) over their runs, resampled independently within each stratum."""
    a, b = [s for s in a if s], [s for s in b if s]
    n = len(a)
    if not a or not b:
        return Interval(math.nan, math.nan, math.nan)

    def diff(parts: list[np.ndarray]) -> np.ndarray:
        return np.mean(np.concatenate(parts[:n], axis=-1), axis=-1) - np.mean(
            np.concatenate(parts[n:], axis=-1), axis=-1
        )

    return bootstrap_ci([*a, *b], diff, **kw)
