"""The attacks' target: a tiny task whose evaluator runs solution.py as a child process (as the built-in
evaluators do), and `attack`, which runs a hostile solution through `run_evaluation`."""

from __future__ import annotations

import json
from pathlib import Path

from arts.tasks.base import EvalResult, Task, load_task
from arts.tasks.evaluate import run_evaluation

# Runs the candidate as a child; score 1.0 when it exits cleanly; its note.txt becomes the message.
EVALUATE = """
import json, os, subprocess, sys
rc = subprocess.run([sys.executable, "solution.py"]).returncode
note = open("note.txt").read() if os.path.exists("note.txt") else ""
if rc != 0:
    sys.exit(f"solution failed with status {rc}")
json.dump({"score": 1.0, "valid": True, "metrics": {}, "message": note}, open("result.json", "w"))
"""


def make_task(root: Path, evaluate: str = EVALUATE, *, memory_mb: int = 512, timeout: float = 8,
              hidden: dict[str, str] | None = None, test: str | None = None, disk_mb: int = 1024) -> Task:  # fmt: skip
    """A task at `root` whose [evaluate] runs `evaluate` (and whose [test], if given, runs grader/test.py)."""
    root.mkdir(parents=True)
    (root / "statement.md").write_text("An attack test task.")
    (root / "evaluate.py").write_text(evaluate)
    (root / "solution.py").write_text("print('seed')\n")
    files = dict(hidden or {})
    if test is not None:
        files["grader/test.py"] = test
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    lines = [
        'name = "attack-test"', 'statement = "statement.md"', 'kind = "optimize"',
        'editable = ["solution.py"]', 'material = ["evaluate.py"]',
        f"hidden = {json.dumps(['grader/'] if files else [])}",
        "[metric]", 'name = "score"', 'direction = "maximize"',
        "[evaluate]", 'command = ["python", "evaluate.py"]', f"timeout_s = {timeout}", f"memory_mb = {memory_mb}", f"disk_mb = {disk_mb}",
    ]  # fmt: skip
    if test is not None:
        lines += ["[test]", 'command = ["python", "grader/test.py"]', f"timeout_s = {timeout}"]
    (root / "task.toml").write_text("\n".join(lines) + "\n")
    return load_task(root)


def attack(task: Task, solution: str, workdir: Path | None = None, split: str = "evaluate") -> EvalResult:
    return run_evaluation(task, {"solution.py": solution}, workdir or task.root.parent / "work", split=split)
