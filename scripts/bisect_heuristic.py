"""A traceback-and-recency diagnosis of the regression-bisect cases: the reference point a search must beat.

Per case, it reads only test_output.txt and the commits' file headers:
- file: the innermost file the traceback names outside the test module; where the traceback ends in the test
  (a failed assertion), the module of the `module.function(` the assertion's message names;
- commit: the newest commit whose diff touches that file; none does: the newest commit;
- kind: removed_guard where the test died of an exception other than AssertionError (a deleted check lets an
  error through), else off_by_one, the most common kind.

What it deliberately does not do: read what the diffs change, run the program, follow calls into helpers or
weigh the messages. Those are what a careful reader adds.

    .venv/bin/python scripts/bisect_heuristic.py [--task tasks/builtin/regression-bisect] [--out answer.json]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

DEFAULT_TASK = Path(__file__).resolve().parent.parent / "tasks" / "builtin" / "regression-bisect"


def pointed_file(output: str) -> str | None:
    """The program file test_output.txt points at (see the module docstring), or None."""
    frames = re.findall(r'^  File "([^"]+)", line \d+, in ', output, flags=re.M)
    tests = {f for f in frames if Path(f).name.startswith("test_")}
    inner = [f for f in frames if f not in tests]
    if inner:
        return inner[-1]
    error = output.split("Traceback (most recent call last):")[-1]
    named = re.search(r"^AssertionError: (\w+)\.\w+\(", error, flags=re.M)
    return f"{named.group(1)}.py" if named else None


def diagnose(case: Path) -> dict:
    """One case folder -> {commit, kind}, as answer_schema.json states."""
    output = (case / "test_output.txt").read_text()
    target = pointed_file(output)
    commits = sorted((case / "commits").glob("*.txt"))
    touching = [c for c in commits if target and f"\n+++ b/{target}\n" in c.read_text()]
    commit = (touching or commits)[-1].stem
    error = output.rstrip().splitlines()[-3]  # the failure's last line, above the blank line and the tally
    kind = "off_by_one" if error.startswith("AssertionError") else "removed_guard"
    return {"commit": commit, "kind": kind}


def diagnose_task(task_dir: Path) -> dict:
    """answer.json's content for every case of a task directory."""
    cases = sorted(p for p in (Path(task_dir) / "cases").iterdir() if p.is_dir())
    return {"cases": {p.name: diagnose(p) for p in cases}}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", type=Path, default=DEFAULT_TASK, help="the task directory (holds cases/)")
    p.add_argument("--out", type=Path, default=Path("answer.json"), help="where to write the answer")
    args = p.parse_args(argv)
    answer = diagnose_task(args.task)
    args.out.write_text(json.dumps(answer, indent=2) + "\n")
    for name, d in answer["cases"].items():
        print(f"{name}: commit {d['commit']} / {d['kind']}")


if __name__ == "__main__":
    main()
