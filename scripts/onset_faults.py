"""What the comparison's verdict decides on generated incidents: per true fault, how often the root menu
and the fault menu are left with the truth alone, with something else, or undecided (`search.diagnose`:
the first-out line, then `tasks.onset`'s lines). No model: these are the menus the investigator's answer
is then chosen from.

    .venv/bin/python scripts/onset_faults.py [--seed 0] [--incidents 60] [--show]
"""

from __future__ import annotations

import argparse
import json
import runpy
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

from arts.policy import answer_parts
from arts.policy.investigator import Finding
from arts.search import diagnose
from arts.search.assembly import material_paths
from arts.tasks.base import load_task


def menus(task, incident: str, parts: dict) -> tuple[list[str], list[str], list[str]]:
    """(root menu, fault menu, verdict lines) of one incident after its comparison's verdict."""
    files = [p for p in material_paths(task) if p.startswith(f"incidents/{incident}/")]
    output, blamed, n = diagnose._compare(task, files, f"incidents/{incident}/metrics")
    lines = output.splitlines()[:n] if blamed else []
    found = [Finding(text=line[:160], region="metrics", relation="neutral", by="compare") for line in lines]
    props = diagnose.noted_model(parts[incident].schema, found, incident).model_json_schema()["properties"]
    return (
        [*(props["root_service"].get("enum") or [props["root_service"].get("const")])],
        [*(props["fault"].get("enum") or [props["fault"].get("const")])],
        lines,
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--incidents", type=int, default=60)
    p.add_argument("--show", action="store_true", help="print each incident's verdict lines")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out, truth_file = Path(tmp) / "case", Path(tmp) / "truth.json"
        subprocess.run(
            [sys.executable, str(Path(__file__).parent / "make_incidents.py"), "--seed", str(args.seed),
             "--incidents", str(args.incidents), "--out", str(out), "--truth-out", str(truth_file)],
            check=True, capture_output=True,
        )  # fmt: skip
        truth = json.loads(truth_file.read_text())
        runpy.run_path(str(out / "make_hidden.py"))["build"](out)  # the grader, so that the task loads
        task = load_task(out)
        parts = {p.name: p for p in answer_parts.split(task.answer_schema(), material_paths(task))}
        table: dict[str, Counter] = defaultdict(Counter)
        for i, t in truth.items():
            roots, faults, lines = menus(task, i, parts)
            root = "right" if roots == [t["root_service"]] else "wrong" if len(roots) == 1 else "open"
            fault = "right" if faults == [t["fault"]] else "wrong" if len(faults) < 6 else "open"
            table[t["fault"]].update({f"root {root}": 1, f"fault {fault}": 1, "n": 1})
            if args.show:
                print(i, t["root_service"], t["fault"], "->", roots[:2], faults, *lines, sep="\n  ")
    cols = ["n", "root right", "root wrong", "root open", "fault right", "fault wrong", "fault open"]
    print("| true fault | " + " | ".join(cols) + " |\n" + "|---" * (len(cols) + 1) + "|")
    for fault, c in sorted(table.items()):
        print(f"| {fault} | " + " | ".join(str(c[k]) for k in cols) + " |")
    total = sum(table.values(), Counter())
    print("| all | " + " | ".join(str(total[k]) for k in cols) + " |")


if __name__ == "__main__":
    main()
