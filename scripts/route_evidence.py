"""How the harness's own signals would route the failures a finished run attributed: per stored routing,
the decisive evidence (`search.investigation.signals`) of the attributed node as the code now measures
it, against the route the run took. It replays the measured facts only (no model call): a route the
evidence now fixes (a step that ran on an exact evaluator: the method's; one that changed nothing:
accepted) is counted, the critic's other choices are not re-run.

It also counts the retests a comparison's `flawed` verdict carried out, by the kind of edit retested,
every route the runs took, and the remeasurements they spent (none should run on an exact evaluator).

Usage: .venv/bin/python scripts/route_evidence.py RUN_DIR... [--csv OUT]
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import Counter
from pathlib import Path

import tomllib

from arts.search.investigation import signals
from arts.search.store import Store
from arts.tasks.base import resolve_task


def rows(run: Path) -> tuple[list[dict], list[str], int]:
    """One row per stored routing of `run` (the node, the route taken, the evidence now), the kind of
    edit (numbers, code) and status of each node a comparison's retest carried out again, and the
    remeasurements the run spent."""
    out, retested = [], []
    with Store.open_readonly(run) as store:
        state = store.load_state()
        remeasured = sum(e.kind == "remeasure" for e in state.events.values())
        task = resolve_task(tomllib.loads((run / "config.toml").read_text())["task"])
        exact = bool(task.config.metric and task.config.metric.deterministic)
        ran = {
            e.payload["node"] for e in state.events.values() if e.kind == "follow_up" and e.payload["result"]
        }
        for e in state.events.values():
            if e.kind == "follow_up" and e.payload.get("decision") == "retest" and e.payload.get("result"):
                node = state.nodes[e.payload["node"]]
                sig = signals.measure(state, node, store.node_dir(node.id), True)
                retested.append(f"{sig.edit or '-'} edit, {node.status}")
            if e.kind != "routing" or not e.payload.get("decision"):
                continue
            node = state.nodes[e.payload["node"]]
            sig = signals.measure(state, node, store.node_dir(node.id), exact)
            blamed, depth = sig.evidence()
            out.append({"run": run.name, "node": node.id, "route": e.payload["decision"]["action"],
                        "edit": sig.edit, "blamed": blamed or "", "depth": depth, "followed": node.id in ran})  # fmt: skip
    return out, retested, remeasured


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--csv", type=Path)
    args = ap.parse_args(argv)
    table, read, retested, remeasured = [], 0, [], 0
    for run in args.runs:
        if not (run / "summary.json").exists():  # unfinished: its bench was stopped first
            print(f"skipped (unfinished): {run}", file=sys.stderr)
            continue
        routed, again, spent = rows(run)
        table, read, retested, remeasured = table + routed, read + 1, retested + again, remeasured + spent
    wasted = [r for r in table if r["route"] in ("repair", "fix_protocol")]
    fixed = Counter("accept" if r["depth"] == "accept" else r["blamed"] or "-" for r in wasted)
    print(f"{len(table)} routings in {read} runs; {len(wasted)} to a repair or a protocol fix")
    print("of those, the evidence now: " + ", ".join(f"{k} {v}" for k, v in fixed.most_common()))
    spent = [r for r in wasted if r["followed"]]
    saved = [r for r in spent if r["depth"] == "accept"]
    print(
        f"evaluations their follow-ups spent: {len(spent)}; on programs now accepted (no follow-up): "
        f"{len(saved)}; on steps now the method's (a refinement or a pivot instead): "
        f"{sum(r['blamed'] == 'method' for r in spent)}"
    )
    kinds = Counter(retested).most_common()
    print(f"retests carried out: {len(retested)} (" + ", ".join(f"{k} {v}" for k, v in kinds) + ")")
    taken = Counter(r["route"] for r in table).most_common()
    print("routes taken: " + ", ".join(f"{k} {v}" for k, v in taken))
    print(f"remeasured: {remeasured} evaluation(s)")
    if args.csv:
        with args.csv.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(table[0]) if table else ["run"])
            w.writeheader()
            w.writerows(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
