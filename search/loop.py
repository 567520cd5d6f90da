"""The round loop: state → prompt → proposals → drawn actions → executor → nodes, each committed at once.

`Search.run()` reads like the design's "One round". Methods differ only in how a round chooses its
(parent, hypothesis) actions (`search.methods`); they share the executor, the sandbox and the store so
that they are compared on equal terms. Every state change goes to the store before the next step, so a
killed run resumes from it; the in-memory `SearchState` is a cache of the store, never the truth.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from arts.policy.analysis import Analyst
from arts.policy.base import Backend, Usage
from arts.policy.executor import Executor, mentioned, program_key
from arts.policy.investigator import Investigator
from arts.policy.scientist import Scientist
from arts.search.config import SearchConfig
from arts.search.inspect import memory_entry
from arts.search.render import tried_edits
from arts.search.report import write_report
from arts.search.space import best_supported, established, unexplained
from arts.search.state import Insight, Node, Rollout
from arts.search.store import Store
from arts.tasks.base import EvalResult, Task
from arts.tasks.sandbox import run_evaluation

EXECUTOR_PURPOSES = ("executor", "investigate", "answer")
"""Model calls made by the executor (program edits, or a diagnosis's investigation and answer)."""


IDLE_ROUNDS = 3
"""An optimize run ends after this many rounds in a row without an evaluation. Measured with the 135M
default on friedman (one constant): once the values of DEGREE's menu had run, most of a run's 90 rounds
proposed `increase DEGREE` / `decrease DEGREE` and were refused before an evaluation (an hour of wall
time for 20 evaluations). Used-up menus now end a run by themselves (`search.methods.targets`); this
catches the rest, such as a `rewrite f` whose every answer is a program already run."""


class BudgetSpent(Exception):
    """Raised inside an experiment when the evaluation budget runs out mid-way."""


class Search:
    def __init__(
        self,
        cfg: SearchConfig,
        task: Task,
        store: Store,
        scientist: Backend | None,
        executor: Backend | None,
        log: Callable[[str], None] = print,
    ):
        self.cfg, self.task, self.store, self.log = cfg, task, store, log
        self.rng = random.Random(cfg.seed)
        self.scientist = Scientist(scientist, cfg.scientist) if scientist else None
        self.analyst = Analyst(scientist, cfg.analysis) if scientist else None
        self.investigator = Investigator(executor, cfg.investigator) if executor else None
        self.executor = Executor(executor, cfg.executor) if executor else None
        self.scientist_backend, self.executor_backend = scientist, executor
        self.state = store.load_state()
        self._program_keys: dict[int, str] = {}
        self.t0 = time.time() - float(self.state.meta.get("wall_s", 0.0))
        self.tokens = {"prompt": 0, "completion": 0}
        for e in self.state.events.values():
            if e.kind == "usage":
                self.tokens["prompt"] += e.payload.get("prompt_tokens", 0)
                self.tokens["completion"] += e.payload.get("completion_tokens", 0)
        self.evals = sum(1 for e in self.state.events.values() if e.kind == "eval")
        self.dollars = sum(
            e.payload.get("dollars", 0.0) for e in self.state.events.values() if e.kind == "usage"
        )
        self.timing = {"scientist_s": 0.0, "executor_s": 0.0, "eval_s": 0.0}
        self.findings: dict[int, list] = {}
        """An answer-kind node's investigator findings, until the round turns them into observations."""
        self.halt: str | None = None
        """Set by a method that cannot go on (e.g. mutate with nothing to mutate); ends the run."""
        self.ttt = None
        """Test-time training hook (training.ttt): sees each rollout and each finished round."""

    # -- bookkeeping -------------------------------------------------------------------------------------
    def on_usage(self, usage: Usage) -> None:
        self.tokens["prompt"] += usage.prompt_tokens
        self.tokens["completion"] += usage.completion_tokens
        executor = usage.purpose in EXECUTOR_PURPOSES
        self.timing["executor_s" if executor else "scientist_s"] += usage.wall_s
        pricing = (self.cfg.executor_model if executor else self.cfg.scientist_model).pricing
        cost = pricing.cost(usage) if pricing else 0.0
        self.dollars += cost
        self.store.log_event("usage", **usage.model_dump(), dollars=cost)

    def add(self, record):
        record = self.store.add(record)
        getattr(self.state, _table(record))[record.id] = record
        return record

    def update(self, record) -> None:
        self.store.update(record)
        getattr(self.state, _table(record))[record.id] = record

    def add_or_update(self, record):
        """Store a record from `search.space`: new ones come with id 0, changed ones with their id."""
        if record.id == 0:
            return self.add(record)
        self.update(record)
        return record

    def stop_reason(self, within_round: bool = False) -> str | None:
        """Why the run must stop now; inside a round the round cap does not cut the round short."""
        b = self.cfg.budget
        if self.halt is not None:
            return self.halt
        if self.evals >= b.evals:
            return f"evaluation budget spent ({self.evals}/{b.evals})"
        cap = b.rounds if self.task.config.kind == "optimize" else min(b.rounds, self.cfg.space.answer_rounds)
        if not within_round and self.round >= cap:
            return f"round cap reached ({cap})"
        if b.tokens is not None and sum(self.tokens.values()) >= b.tokens:
            return f"token budget spent ({sum(self.tokens.values())}/{b.tokens})"
        if b.dollars is not None and self.dollars >= b.dollars:
            return f"dollar budget spent (${self.dollars:.4f}/${b.dollars:g})"
        if b.wall_s is not None and time.time() - self.t0 >= b.wall_s:
            return f"wall-clock budget spent ({b.wall_s:g}s)"
        return None

    @property
    def round(self) -> int:
        return int(self.state.meta.get("round", 0))

    # -- evaluation --------------------------------------------------------------------------------------
    def evaluate(self, files: dict[str, str], workdir: Path) -> EvalResult:
        if self.evals >= self.cfg.budget.evals:
            raise BudgetSpent
        res = run_evaluation(self.task, files, workdir)
        self.evals += 1
        self.timing["eval_s"] += res.wall_s
        self.store.log_event(
            "eval", valid=res.valid, score=res.score, wall_s=res.wall_s, reason=res.reason[:200]
        )
        (workdir / "stdout.txt").write_text(res.stdout_tail)
        (workdir / "stderr.txt").write_text(res.stderr_tail)
        return res

    def ensure_root(self) -> Node:
        roots = [n for n in self.state.nodes.values() if n.parent is None]
        if roots:
            return roots[0]
        files = self.task.seed_files()
        root = self.add(Node(parent=None, files=files, status="seed", hypothesis=""))
        if files and self.task.config.evaluate is not None:
            res = run_evaluation(self.task, files, self.store.node_dir(root.id))
            root.raw_score, root.score = res.score, self.task.normalise(res.score) if res.valid else None
            root.metrics, root.reason, root.eval_s = res.metrics, res.reason, res.wall_s
            self.update(root)
            self.log(f"seed: {_fmt(root.raw_score)}{'' if res.valid else '  INVALID: ' + res.reason}")
        self.store.write_node_files(root)
        return root

    # -- one experiment ----------------------------------------------------------------------------------
    def expand(self, parent: Node, hypothesis: str, axis: str, rollout: Rollout | None, edit=None) -> Node:
        """Run one experiment from `parent` and commit the node (pending first, so a kill leaves a trace)."""
        node = self.add(
            Node(
                parent=parent.id,
                depth=parent.depth + 1,
                round=self.round,
                hypothesis=hypothesis,
                axis=axis,
                files=parent.files,
                status="pending",
                rollout=rollout.id if rollout else None,
            )
        )
        workdir = self.store.node_dir(node.id)
        t0 = time.time()
        try:
            if edit is not None:
                node = edit(node, workdir)
            elif self.task.config.kind == "answer":
                node = self._investigate(node, parent, workdir)
            else:
                node = self._execute(node, parent, workdir)
        except BudgetSpent:
            node.status, node.reason = "invalid", "evaluation budget spent before a valid result"
        node.exec_s = max(time.time() - t0 - node.eval_s, 0.0)
        self.update(node)
        self.store.write_node_files(node)
        if rollout is not None:
            rollout.node = node.id
            self.update(rollout)
        entry = memory_entry(self.state, node, self.round) if self.cfg.components.memory else None
        if entry is not None:
            self.add(entry)
        best = self.state.best()
        outcome = _fmt(node.raw_score) if node.raw_score is not None else node.status
        self.log(
            f"round {self.round}  node {node.id} <- {parent.id}  {outcome}"
            f"  best {_fmt(best.raw_score if best else None)}  evals {self.evals}/{self.cfg.budget.evals}"
            f"  tokens {sum(self.tokens.values())}  {time.time() - self.t0:.0f}s"
        )
        return node

    def _investigate(self, node: Node, parent: Node, workdir: Path) -> Node:
        from arts.search.diagnose import investigate

        return investigate(self, node, parent, workdir)

    def known_programs(self) -> Callable[[dict[str, str]], str | None]:
        """`known(files)`: the node that already ran exactly this program ("node 3: score 0.5"), if any.
        Keys are computed once per finished node; a failed node counts only if it changed its parent."""
        for n in self.state.nodes.values():
            if n.id in self._program_keys or n.status == "pending":
                continue
            parent = self.state.nodes.get(n.parent) if n.parent is not None else None
            ran = n.status in ("seed", "valid") or (parent is not None and n.files != parent.files)
            self._program_keys[n.id] = program_key(n.files) if ran else ""
        index: dict[str, Node] = {}
        for nid, key in self._program_keys.items():
            n = self.state.nodes[nid]
            if key and (key not in index or n.status != "invalid"):
                index[key] = n

        def known(files: dict[str, str]) -> str | None:
            n = index.get(program_key(files))
            if n is None:
                return None
            return f"node {n.id}: {'it failed' if n.status == 'invalid' else 'score ' + _fmt(n.raw_score)}"

        return known

    def _execute(self, node: Node, parent: Node, workdir: Path) -> Node:
        names = mentioned(node.hypothesis, {p: parent.files.get(p, "") for p in self.task.config.editable})
        result = self.executor.run(
            node.hypothesis,
            dict(parent.files),
            self.task.config.editable,
            lambda files: self.evaluate(files, workdir),
            task_summary=self.task.statement.strip().splitlines()[0][:200],
            known=self.known_programs(),
            tried=tried_edits(self.state, names, self.task.normalise),
        )
        node.files, node.transcript = result.files, result.transcript
        node.tokens_prompt, node.tokens_completion = result.prompt_tokens, result.completion_tokens
        node.eval_s = result.eval_s
        res = result.result
        if res is not None and res.valid:
            node.status, node.raw_score, node.score = "valid", res.score, self.task.normalise(res.score)
            node.metrics = res.metrics
        else:
            node.status = "invalid"
            node.reason = result.reason or (res.reason if res else "no valid program")
        return node

    # -- the run -----------------------------------------------------------------------------------------
    def run(self) -> dict:
        from arts.search.methods import METHODS

        self._close_interrupted()
        self.ensure_root()
        method = METHODS.get(self.cfg.method)
        if self.cfg.method != "mutate" and self.cfg.components.audit:
            self.audit()
        reason, idle = self.stop_reason(), 0
        while reason is None:
            self.store.set_meta("round", self.round + 1)
            self.state.meta["round"] = self.round + 1
            self.store.log_event("round_start", round=self.round)
            before = self.evals
            method(self)
            idle = idle + 1 if self.evals == before and self.task.config.kind == "optimize" else 0
            if idle >= IDLE_ROUNDS and self.halt is None:
                self.halt = (
                    f"{idle} rounds in a row spent no evaluation: their proposals or edits were unusable,"
                    " or programs already run"
                )
            if self.ttt is not None:
                self.ttt.after_round(self)
            self.store.set_meta("wall_s", time.time() - self.t0)
            reason = self.stop_reason()
        return self.finish(reason)

    def _close_interrupted(self) -> None:
        for n in list(self.state.nodes.values()):
            if n.status == "pending" and n.parent is not None:
                n.status, n.reason = "invalid", "interrupted (the run was killed during this experiment)"
                self.update(n)

    def audit(self) -> None:
        done = sum(1 for e in self.state.events.values() if e.kind == "audit")
        for i in range(done, self.cfg.scientist.audits):
            t0 = time.time()
            notes, c = self.scientist.audit(self.audit_context(i), seed=self.cfg.seed + i)
            self.store.log_event(
                "audit", index=i, ok=notes is not None, error=c.error, seconds=time.time() - t0
            )
            if notes is None:
                self.log(f"audit {i + 1}: unusable answer ({c.error})")
                continue
            for label, text in (
                ("metric", notes.metric),
                ("structure", notes.structure),
                ("weakness", notes.weakness),
            ):
                self.add(Insight(text=f"{label}: {text}", kind="audit", round=0))
            self.log(f"audit {i + 1}: metric: {notes.metric[:80]} | weakness: {notes.weakness[:80]}")

    def audit_context(self, i: int) -> str:
        """Audit i reads the statement with the evaluator (even i) or with the seed program (odd i)."""
        statement = self.task.statement[:1200]
        if i % 2 == 0:
            material = self.task.read_material(max_chars=1500)
            text = "\n".join(f"### {name}\n{body}" for name, body in list(material.items())[:2])
            return f"## Task\n{statement}\n\n## Material\n{text}"
        seed = (
            "\n".join(f"### {k}\n{v[:1500]}" for k, v in self.task.seed_files().items())
            or "(no seed program)"
        )
        return f"## Task\n{statement}\n\n## Seed program\n{seed}"

    def finish(self, reason: str) -> dict:
        run_dir = self.store.run_dir
        best = self.state.best()
        if self.task.config.kind == "answer" or best is None:
            best = best_supported(self.state) or best  # no score: the answer is the best-supported node
        claims = [h for h in self.state.hypotheses.values() if best is not None and best.id in h.nodes]
        test_score = None
        if best is not None and self.task.config.test is not None:
            res = run_evaluation(self.task, best.files, run_dir / "test-work", split="test")
            test_score = res.score if res.valid else None
            self.store.log_event("test", node=best.id, valid=res.valid, score=res.score, reason=res.reason)
        if best is not None:
            shutil.rmtree(run_dir / "best", ignore_errors=True)
            (run_dir / "best").mkdir()
            for name, text in best.files.items():
                (run_dir / "best" / name).parent.mkdir(parents=True, exist_ok=True)
                (run_dir / "best" / name).write_text(text)
        nodes = [n for n in self.state.nodes.values() if n.parent is not None]
        root = next((n for n in self.state.nodes.values() if n.parent is None), None)
        summary = {
            "task": self.task.name,
            "method": self.cfg.method,
            "model": self.cfg.scientist_model.model or "smollm2-135m (embedded)",
            "nodes": len(nodes),
            "valid_nodes": sum(n.status == "valid" for n in nodes),
            "best": {
                "node": best.id if best else None,
                "score": best.raw_score if best else None,
                "test_score": test_score,
            },
            "answer_node": best.id if best else None,
            "answer_established": bool(claims) and all(established(self.state, h.id) for h in claims),
            "baseline": root.raw_score if root else None,
            "hypotheses": _counts(h.status for h in self.state.hypotheses.values()),
            "observations": {
                "count": len(self.state.observations),
                "confirmed": sum(not o.provisional for o in self.state.observations.values()),
                "unexplained": len(unexplained(self.state)),
            },
            "routing": _counts(
                e.payload["decision"]["action"]
                for e in self.store.events("routing")
                if e.payload.get("decision")
            ),
            "evals": self.evals,
            "tokens": dict(self.tokens),
            "dollars": round(self.dollars, 6),
            "wall_s": round(time.time() - self.t0, 2),
            "timing_s": {k: round(v, 2) for k, v in self.timing.items()},
            "stopped_because": reason,
            "updates": _updates(self.store),
        }
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
        self.store.log_event("finish", **summary)
        self.state.events = {e.id: e for e in self.store.events()}
        write_report(run_dir, self.state)
        self.log(f"report: {run_dir / 'report.html'}")
        return summary


def _counts(items) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in items:
        out[x] = out.get(x, 0) + 1
    return out


def _updates(store: Store) -> dict:
    """The TTT updates of the run: how many, and each one's stats (the store's `update` events)."""
    steps = [e.payload for e in store.events("update")]
    return {"count": len(steps), "steps": steps}


def _table(record) -> str:
    return {
        "Node": "nodes",
        "Hypothesis": "hypotheses",
        "Observation": "observations",
        "Evidence": "evidence",
        "Insight": "insights",
        "Rollout": "rollouts",
        "Event": "events",
    }[type(record).__name__]


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.6g}"
