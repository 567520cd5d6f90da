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
from typing import TYPE_CHECKING

from arts.policy.answer_schema import schema_model
from arts.policy.investigator import Tools
from arts.search.state import Node
from arts.tasks.readonly import grep_lines, read_lines

if TYPE_CHECKING:
    from arts.search.loop import Search

MAX_FILES = 40
"""Material files offered to the investigator (an enum in its grammar)."""


def answer_file(s: Search) -> str:
    answer = s.task.config.answer
    return answer.file if answer is not None else s.task.config.editable[0]


def material_paths(s: Search) -> list[str]:
    root = s.task.root.resolve()
    paths = [str(p.resolve().relative_to(root)) for p in s.task.material_files() if p.is_file()]
    text = [p for p in sorted(paths) if not p.endswith((".npz", ".npy", ".pt", ".bin", ".gz", ".zip"))]
    return text[:MAX_FILES]


def current_answer(files: dict[str, str], name: str) -> dict | None:
    try:
        value = json.loads(files.get(name) or "null")
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def investigate(s: Search, node: Node, parent: Node, workdir: Path) -> Node:
    """Run the investigator on `node.hypothesis` from the parent's answer; fill the node in."""
    schema = s.task.answer_schema()
    if schema is None:
        node.status, node.reason = "invalid", "the task declares no [answer] schema; add one to task.toml"
        return node
    name = answer_file(s)
    case = workdir / "case"
    tools = Tools(
        files=material_paths(s),
        read=lambda path, start: read_lines(s.task, case, path, start),
        grep=lambda pattern, path: grep_lines(s.task, case, pattern, path),
    )
    try:
        result = s.investigator.run(
            node.hypothesis,
            current_answer(parent.files, name),
            schema_model(schema),
            tools,
            task_summary=s.task.statement.strip().splitlines()[0][:200],
            seed=s.cfg.seed * 1000 + node.id,
        )
    finally:
        shutil.rmtree(case, ignore_errors=True)
    node.transcript = result.transcript
    node.tokens_prompt, node.tokens_completion = result.prompt_tokens, result.completion_tokens
    s.findings[node.id] = result.findings
    if result.answer is None:
        node.status, node.reason = "invalid", result.reason or "no answer was written"
        return node
    node.files = {**parent.files, name: json.dumps(result.answer, indent=1, ensure_ascii=False) + "\n"}
    node.status = "valid"
    node.metrics = {"findings": len(result.findings)}
    return node
