"""The lab: turns one action (a parent and a hypothesis) into one evaluated node, committed at once.

A node is stored as `pending` before any work starts, so a run killed mid-experiment leaves a trace that
resume closes as interrupted; it is stored again with its outcome before `expand` returns. Every
evaluation is claimed from the meter first, so no experiment can spend past the budget. On an optimize
task the executor edits the program and validates it in the sandbox; on an answer task the investigator
reads the case and writes the deliverable (`search.diagnose`); a baseline may bring its own `edit`.

Not done here: choosing actions (the methods), or what a node means for the hypotheses (`investigation`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from arts.policy.executor import mentioned, program_key
from arts.search import compass, diagnose
from arts.search.agents import Agents
from arts.search.investigation.reports import memory_entry
from arts.search.ledger import EVENT_TEXT_CHARS, Ledger
from arts.search.meter import BudgetSpent, Meter
from arts.search.remote import interrupted
from arts.search.render import task_line, tried_edits
from arts.search.seeds import Seeds
from arts.search.state import INTERRUPTED, Node, Rollout
from arts.tasks.base import EvalResult, Task
from arts.tasks.evaluate import run_evaluation
from arts.tasks.workcopy import remove, write_file

Edit = Callable[[Node, Path], Node]
"""A baseline's own experiment: fills in the pending node (files, status, score) in its work folder."""


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.6g}"


def write_output(workdir: Path, res: EvalResult) -> None:
    """The tails of an evaluation's output, beside its files. The program could write in `workdir`, so a
    planted `stdout.txt -> <task>/evaluate.py` is replaced, never followed (`write_file`)."""
    write_file(workdir, "stdout.txt", res.stdout_tail)
    write_file(workdir, "stderr.txt", res.stderr_tail)


class Lab:
    def __init__(
        self,
        task: Task,
        ledger: Ledger,
        meter: Meter,
        agents: Agents,
        seeds: Seeds,
        memory: bool,
        log: Callable[[str], None],
    ):
        self.task, self.ledger, self.meter, self.agents = task, ledger, meter, agents
        self.seeds, self.memory, self.log = seeds, memory, log
        self.observe = True
        """Whether a diagnosis looks at its material (off: the no-observations ablation answers unseen)."""
        self.findings: dict[int, list] = {}
        """An answer-kind node's investigator findings, until the round turns them into observations."""
        self._program_keys: dict[int, str] = {}
        self._in_flight: dict[str, str] = {}
        """Program key -> the node folder evaluating it now (another experiment of the round must not)."""
        self.evaluator: Callable[[Task, dict[str, str], Path], EvalResult] = run_evaluation
        """What runs one evaluation: the sandbox here, or a Ray task (`search.remote.RayEvaluations`)."""
        self.evaluate_on = "local"
        """Where `evaluator` runs evaluations (`SearchConfig.evaluate_on`), recorded with each one."""
        self._interrupted: set[str] = set()
        """Program keys whose evaluation was cut off from outside: they may be evaluated again."""
        self._attempts: dict[str, str] = {}
        """Program key -> the node folder whose evaluation of it failed, for every attempt (a node keeps
        only its last program), read from the run's eval events (`_failed_attempts`)."""
        self._attempts_seen = 0  # how many of the run's events `_attempts` has read

    @property
    def state(self):
        return self.ledger.state

    @property
    def round(self) -> int:
        return int(self.ledger.meta("round", 0))

    def node_dir(self, node_id: int) -> Path:
        return self.ledger.store.node_dir(node_id)

    # -- evaluation ----------------------------------------------------------------------------------------
    def evaluate(self, files: dict[str, str], workdir: Path) -> EvalResult:
        """Evaluate a program, spending one evaluation; a program the run already evaluated is refused
        without spending one (its node is named in the reason)."""
        if seen := self.known_programs()(files):
            return EvalResult(valid=False, reason=f"already evaluated ({seen}); not run again")
        self.meter.take_eval()
        key = program_key(files)
        self._in_flight[key] = workdir.name
        try:
            # on a worker of the round's batch while its experiments run at once (`search.batching`)
            res = self.agents.batching.evaluate(lambda: self.evaluator(self.task, files, workdir))
        finally:
            self._in_flight.pop(key, None)
        if interrupted(res):  # not the program's doing: not charged, and it may run again
            self.meter.refund_eval()
            self._interrupted.add(key)
            self.ledger.event(
                "eval",
                valid=False,
                reason=res.reason[:EVENT_TEXT_CHARS],
                interrupted=True,
                on=self.evaluate_on,
            )
            return res
        self._interrupted.discard(key)
        self.meter.eval_done(res.wall_s)
        self.ledger.event(
            "eval",
            valid=res.valid,
            score=res.score,
            wall_s=res.wall_s,
            reason=res.reason[:EVENT_TEXT_CHARS],
            on=self.evaluate_on,
            program=key,
            node=workdir.name,
        )
        write_output(workdir, res)
        return res

    def remeasure(self, node: Node) -> EvalResult:
        """Evaluate a node's program once more (its measurement is in doubt), spending one evaluation; the
        node itself is not changed here."""
        self.meter.take_eval()
        work = self.ledger.store.run_dir / "remeasure-work"
        try:
            res = run_evaluation(self.task, node.files, work)
        finally:  # the working copy of a second measurement is no result of the run
            remove(work)
        self.meter.eval_done(res.wall_s)
        self.ledger.event(
            "eval",
            valid=res.valid,
            score=res.score,
            wall_s=res.wall_s,
            reason=res.reason[:EVENT_TEXT_CHARS],
            node=node.id,
        )
        return res

    def score(self, node: Node, res: EvalResult) -> Node:
        """Fill in a node from an evaluation result."""
        node.eval_s = res.wall_s
        if res.valid:
            node.status, node.raw_score, node.score = "valid", res.score, self.task.normalise(res.score)
            node.metrics = res.metrics
        else:
            node.status, node.reason = "invalid", res.reason
        return node

    def ensure_root(self) -> Node:
        """The seed node, evaluated once (not counted against the budget). A run killed during the seed's
        evaluation evaluates it again on resume: `seed_scored` is set only once its result is stored."""
        roots = [n for n in self.state.nodes.values() if n.parent is None]
        if roots and self.ledger.meta("seed_scored", True):  # runs older than the flag were scored
            return roots[0]
        files = self.task.seed_files()
        if roots:
            root = roots[0]
            self.log("seed: the run was killed during its evaluation; evaluating it again")
        else:
            self.ledger.set_meta("seed_scored", False)
            root = self.ledger.add(Node(parent=None, files=files, status="seed", hypothesis=""))
        if files and self.task.config.evaluate is not None:
            res = run_evaluation(self.task, files, self.node_dir(root.id))
            root.raw_score, root.score = res.score, self.task.normalise(res.score) if res.valid else None
            root.metrics, root.reason, root.eval_s = res.metrics, res.reason, res.wall_s
            self.ledger.update(root)
            self.log(f"seed: {fmt(root.raw_score)}{'' if res.valid else '  INVALID: ' + res.reason}")
            write_output(self.node_dir(root.id), res)
        self.ledger.store.write_node_files(root)
        self.ledger.set_meta("seed_scored", True)
        return root

    def close_interrupted(self) -> None:
        """Nodes a kill left pending become invalid, and their folders show the files the store holds (the
        folder may hold the half-made program of the experiment in flight)."""
        for n in list(self.state.nodes.values()):
            if n.status == "pending" and n.parent is not None:
                n.status, n.reason = "invalid", f"{INTERRUPTED} (the run was killed during this experiment)"
                self.ledger.update(n)
                self.ledger.store.write_node_files(n)

    # -- one experiment ------------------------------------------------------------------------------------
    def expand(
        self,
        parent: Node,
        hypothesis: str,
        axis: str,
        rollout: Rollout | None = None,
        edit: Edit | None = None,
        instructions: str = "",
        follows: int | None = None,
        start: Node | None = None,
    ) -> Node:
        """Run one experiment from `parent` and commit the node (pending first, so a kill leaves a trace);
        `instructions` reach the executor besides the hypothesis; `follows` links a follow-up; `start`: a
        failed node whose program the executor edits instead of the parent's (a repair)."""
        node = self.begin(parent, hypothesis, axis, rollout, instructions, follows)
        return self.finish(node, parent, rollout, edit, start=start)

    def begin(
        self,
        parent: Node,
        hypothesis: str,
        axis: str,
        rollout: Rollout | None = None,
        instructions: str = "",
        follows: int | None = None,
    ) -> Node:
        """The experiment's node, committed as pending (a round running its experiments at once creates
        them all first, so their ids follow the picks)."""
        return self.ledger.add(
            Node(
                parent=parent.id,
                depth=parent.depth + 1,
                round=self.round,
                hypothesis=hypothesis,
                axis=axis,
                files=parent.files,
                status="pending",
                rollout=rollout.id if rollout else None,
                follows=follows,
                instructions=instructions,
            )
        )

    def finish(
        self,
        node: Node,
        parent: Node,
        rollout: Rollout | None = None,
        edit: Edit | None = None,
        share: tuple[int, int] | None = None,
        start: Node | None = None,
    ) -> Node:
        """Run a pending node's experiment and commit its outcome (see `expand`); `share`: the executor's
        share of the menus among those running the same hypothesis at once (`policy.edits.step_menus`)."""
        workdir = self.node_dir(node.id)
        t0 = time.time()
        try:
            if edit is not None:
                node = edit(node, workdir)
            elif self.task.config.kind == "answer":
                seed = self.seeds.node(node.id)
                node, found = diagnose.investigate(
                    self.task, self.agents.investigator, node, parent, workdir, seed,
                    list(self.state.nodes.values()), looks=self.observe,
                )  # fmt: skip
                self.findings[node.id] = found
            else:
                node = self._execute(node, parent, workdir, share, start)
        except BudgetSpent:
            node.status, node.reason = "invalid", "evaluation budget spent before a valid result"
        node.exec_s = max(time.time() - t0 - node.eval_s, 0.0)
        self.ledger.update(node)
        self.ledger.store.write_node_files(node)
        if rollout is not None:
            rollout.node = node.id
            self.ledger.update(rollout)
        if self.memory and (entry := memory_entry(self.state, node, self.round)) is not None:
            self.ledger.add(entry)
        best = self.state.best()
        m = self.meter
        outcome = fmt(node.raw_score) if node.raw_score is not None else node.status
        self.log(
            f"round {self.round}  node {node.id} <- {parent.id}  {outcome}"
            f"  best {fmt(best.raw_score if best else None)}  evals {m.evals}/{m.budget.evals}"
            f"  tokens {m.total_tokens}  {m.wall_s:.0f}s"
        )
        return node

    def _execute(
        self,
        node: Node,
        parent: Node,
        workdir: Path,
        share: tuple[int, int] | None = None,
        start: Node | None = None,
    ) -> Node:
        names = mentioned(node.hypothesis, {p: parent.files.get(p, "") for p in self.task.config.editable})
        result = self.agents.executor.run(
            node.hypothesis,
            dict((start or parent).files),
            self.task.config.editable,
            lambda files: self.evaluate(files, workdir),
            task_summary=task_line(self.task.statement),
            instructions=node.instructions,
            known=self.known_programs(),
            tried=tried_edits(self.state, names, self.task.normalise),
            share=share,
            level=compass.level(self.state, parent, self.task.normalise),
            failure=start.reason if start is not None else "",
        )
        node.files, node.transcript = result.files, result.transcript
        node.tokens_prompt, node.tokens_completion = result.prompt_tokens, result.completion_tokens
        res = result.result
        if res is not None and res.valid:
            node = self.score(node, res)
        else:
            node.status = "invalid"
            node.reason = result.reason or (res.reason if res else "no valid program")
        node.eval_s = result.eval_s
        return node

    def known_programs(self) -> Callable[[dict[str, str]], str | None]:
        """`known(files)`: the node that already ran exactly this program ("node 3: score 0.5"), if any."""
        index = self._index()

        def known(files: dict[str, str]) -> str | None:
            key = program_key(files)
            n = index.get(key)
            if n is None:
                if where := self._in_flight.get(key):
                    return f"{where}: being evaluated now"
                where = self._failed_attempts().get(key)
                return f"node {where}: it failed" if where else None
            return f"node {n.id}: {'it failed' if n.status == 'invalid' else 'score ' + fmt(n.raw_score)}"

        return known

    def _failed_attempts(self) -> dict[str, str]:
        """Programs whose evaluation failed, whichever attempt of a node ran them. A node's files are its
        last attempt's, so on digits a repair of a failed `l1_ratio` node spent an evaluation on the
        program that node's first attempt had already failed with. Read from the eval events (a resumed
        run has them), only those logged since the last call (events are only ever appended)."""
        events = self.state.events
        if len(events) != self._attempts_seen:
            for e in list(events.values())[self._attempts_seen :]:
                p = e.payload
                if e.kind == "eval" and not p.get("valid") and not p.get("interrupted") and p.get("program"):
                    self._attempts.setdefault(p["program"], p.get("node", "?"))
            self._attempts_seen = len(events)
        return self._attempts

    def known_node(self, files: dict[str, str], index: dict[str, Node] | None = None) -> Node | None:
        """The node that already ran exactly this program (a scored one before a failed one), if any."""
        return (index if index is not None else self._index()).get(program_key(files))

    def _index(self) -> dict[str, Node]:
        """Program key -> the node that ran it. Keys are computed once per finished node; a failed node
        counts only if it changed its parent."""
        for n in self.state.nodes.values():
            if n.id in self._program_keys or n.status == "pending":
                continue
            parent = self.state.nodes.get(n.parent) if n.parent is not None else None
            ran = n.status in ("seed", "valid") or (parent is not None and n.files != parent.files)
            self._program_keys[n.id] = program_key(n.files) if ran else ""
        index: dict[str, Node] = {}
        for nid, key in self._program_keys.items():
            n = self.state.nodes[nid]
            if n.status == "invalid" and key in self._interrupted:
                continue  # its evaluation was cut off: no result to refuse a rerun with
            if key and (key not in index or n.status != "invalid"):
                index[key] = n
        return index
