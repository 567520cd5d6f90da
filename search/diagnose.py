"""One experiment on an `answer`-kind task: the investigator reads the case, notes findings, and updates
the answer.

The search sees no score here. The investigator's tools act on a read-only copy of the case material in
the sandbox (`tasks.readonly`); its findings become observations with evidence relations to the
hypothesis it tested (`search.dual.after_node`), which are the quality signal; the node's only file is the
deliverable, decoded under the task's answer schema so that it is always well formed. Only the hidden
`[test]` command grades it, at the end of the run. Not done here: grading, or choosing what to investigate.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from arts.policy.answer_schema import schema_model
from arts.policy.investigator import Finding, Investigator, Tools
from arts.search.render import task_line
from arts.search.state import Node
from arts.tasks.base import Task
from arts.tasks.readonly import grep_lines, read_lines

MAX_FILES = 40
"""Material files offered to the investigator (an enum in its grammar)."""


def answer_file(task: Task) -> str:
    answer = task.config.answer
    return answer.file if answer is not None else task.config.editable[0]


def material_paths(task: Task) -> list[str]:
    root = task.root.resolve()
    paths = [str(p.resolve().relative_to(root)) for p in task.material_files() if p.is_file()]
    text = [p for p in sorted(paths) if not p.endswith((".npz", ".npy", ".pt", ".bin", ".gz", ".zip"))]
    return text[:MAX_FILES]


def current_answer(files: dict[str, str], name: str) -> dict | None:
    try:
        value = json.loads(files.get(name) or "null")
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def investigate(
    task: Task, investigator: Investigator, node: Node, parent: Node, workdir: Path, seed: int
) -> tuple[Node, list[Finding]]:
    """Run the investigator on `node.hypothesis` from the parent's answer; fill the node in and return it
    with the findings (which the round turns into observations)."""
    schema = task.answer_schema()
    if schema is None:
        node.status, node.reason = "invalid", "the task declares no [answer] schema; add one to task.toml"
        return node, []
    name = answer_file(task)
    case = workdir / "case"
    tools = Tools(
        files=material_paths(task),
        read=lambda path, start: read_lines(task, case, path, start),
        grep=lambda pattern, path: grep_lines(task, case, pattern, path),
    )
    try:
        result = investigator.run(
            node.hypothesis,
            current_answer(parent.files, name),
            schema_model(schema),
            tools,
            task_summary=task_line(task.statement),
            seed=seed,
        )
    finally:
        shutil.rmtree(case, ignore_errors=True)
    node.transcript = result.transcript
    node.tokens_prompt, node.tokens_completion = result.prompt_tokens, result.completion_tokens
    if result.answer is None:
        node.status, node.reason = "invalid", result.reason or "no answer was written"
        return node, result.findings
    node.files = {**parent.files, name: json.dumps(result.answer, indent=1, ensure_ascii=False) + "\n"}
    node.status = "valid"
    node.metrics = {"findings": len(result.findings)}
    return node, result.findings
