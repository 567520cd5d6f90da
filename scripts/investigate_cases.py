"""One investigation per part of generated diagnosis cases, scored field by field against their truth: what
the investigator alone (tools, menus, notes, one answer call) makes of each part, without a search.

Each case is a task folder written by a generator with its truth beside it (`make_incidents.py --out DIR
--truth-out TRUTH`, `make_bisect.py` likewise). Per part it runs `search.diagnose.investigate` as a search
node would, with the embedded model by default, and writes one CSV row per part and field.

    .venv/bin/python scripts/make_incidents.py --seed 101 --out /tmp/cases/c101 --truth-out /tmp/cases/t101.json
    .venv/bin/python scripts/investigate_cases.py --case /tmp/cases/c101 /tmp/cases/t101.json --out rows.csv \
        [--seeds 0 1] [--without-looks] [--set note_each=false]
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def searchable(case: Path) -> Path:
    """The case without its grader (hidden files dropped, [test] a no-op): nothing here grades."""
    out = Path(tempfile.mkdtemp(prefix="arts-case-")) / case.name
    shutil.copytree(case, out)
    toml = (out / "task.toml").read_text().split("[test]")[0]
    kept = "\n".join(line for line in toml.splitlines() if not line.startswith("hidden"))
    (out / "task.toml").write_text(kept + '\n[test]\ncommand = ["true"]\n')
    return out


def main(argv: list[str] | None = None) -> int:
    from arts.policy import answer_parts
    from arts.policy.backends.transformers import TransformersBackend
    from arts.policy.investigator import Investigator, InvestigatorConfig
    from arts.search import assembly, diagnose
    from arts.search.state import Node
    from arts.tasks.base import load_task

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", nargs=2, action="append", metavar=("DIR", "TRUTH"), required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument(
        "--transcripts", type=Path, help="also append each investigation's transcript (JSON lines)"
    )
    ap.add_argument("--without-looks", action="store_true", help="answer without a look (the ablation)")
    ap.add_argument(
        "--set", action="append", default=[], help="an InvestigatorConfig field, e.g. note_each=false"
    )
    args = ap.parse_args(argv)
    fields = {k: json.loads(v) for k, v in (s.split("=", 1) for s in args.set)}
    backend = TransformersBackend(seed=0)
    investigator = Investigator(backend, InvestigatorConfig(**fields))
    rows = []
    for case_dir, truth_file in args.case:
        task, truth = load_task(searchable(Path(case_dir))), json.loads(Path(truth_file).read_text())
        parts = answer_parts.split(task.answer_schema(), assembly.material_paths(task))
        for seed in args.seeds:
            nodes: list[Node] = [Node(id=1, status="seed")]
            for i, part in enumerate(parts):
                node = Node(id=i + 2, parent=1, hypothesis=f"{part.name} failed first", status="pending")
                with tempfile.TemporaryDirectory() as tmp:
                    node, found = diagnose.investigate(
                        task,
                        investigator,
                        node,
                        nodes[0],
                        Path(tmp),
                        seed * 100 + i,
                        nodes,
                        not args.without_looks,
                    )
                nodes.append(node)
                if args.transcripts:
                    with args.transcripts.open("a") as f:
                        f.write(json.dumps({"case": Path(case_dir).name, "seed": seed, "part": part.name,
                                            "transcript": node.transcript}) + "\n")  # fmt: skip
                got = (
                    answer_parts.get(
                        assembly.current_answer(node.files, assembly.answer_file(task)), part.path
                    )
                    or {}
                )
                for key, want in truth.get(part.name, {}).items():
                    rows.append(
                        {"case": Path(case_dir).name, "seed": seed, "part": part.name, "field": key,
                         "truth": want, "answer": got.get(key), "right": int(got.get(key) == want),
                         "notes": len(found), "status": node.status}
                    )  # fmt: skip
                print(
                    f"{Path(case_dir).name} s{seed} {part.name}: {got.get('root_service', got)} {truth.get(part.name)}"
                )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    for key in sorted({r["field"] for r in rows}):
        right = [r["right"] for r in rows if r["field"] == key]
        print(f"{key}: {sum(right)}/{len(right)} right")
    return 0


if __name__ == "__main__":
    sys.exit(main())
