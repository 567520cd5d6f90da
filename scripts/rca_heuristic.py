"""A simple graph-and-keyword diagnosis of the incident-rca case: the reference point a search must beat.

Per incident, it reads only the material (graph.json, metrics/*.csv, logs/*.txt, changes.csv):
- root: among the erroring services (peak error rate at least 5% and 5x its first-10-minute median), the
  one none of whose dependencies is erroring; several such: the highest peak error rate;
- fault: keyword votes over the root's WARN/ERROR lines (`KEYWORDS`), plus a vote for bad_deploy when the
  change log deploys the root; ties go to the earlier fault in `KEYWORDS`.

What it deliberately does not do: look at when anomalies start, at latency, cpu or memory, at batch-job
windows, or at which service a log line blames. Those are what a careful reader adds.

    .venv/bin/python scripts/rca_heuristic.py [--task tasks/builtin/incident-rca] [--out answer.json]
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
from pathlib import Path

DEFAULT_TASK = Path(__file__).resolve().parent.parent / "tasks" / "builtin" / "incident-rca"
ERROR_FLOOR = 0.05
"""A service is erroring when its peak error rate reaches this and 5x its own early median."""
KEYWORDS = {
    "cpu_saturation": ("cpu", "throttl", "load", "queue depth"),
    "memory_leak": ("memory", "heap", "oom", "gc "),
    "bad_deploy": ("deploy", "version", "exception", "rollout", "build"),
    "connection_pool_exhausted": ("pool", "connection"),
    "disk_full": ("disk", "space", "write failed"),
    "network_partition": ("network", "route", "packet", "unreachable", "partition"),
}


def _error_rates(incident: Path, service: str) -> list[float]:
    with open(incident / "metrics" / f"{service}.csv", newline="") as f:
        return [float(row["error_rate"]) for row in csv.DictReader(f)]


def _fault(incident: Path, root: str) -> str:
    votes = dict.fromkeys(KEYWORDS, 0)
    for line in (incident / "logs" / f"{root}.txt").read_text().lower().splitlines():
        if " warn " in line or " error " in line:
            for fault, words in KEYWORDS.items():
                votes[fault] += sum(w in line for w in words)
    with open(incident / "changes.csv", newline="") as f:
        votes["bad_deploy"] += sum(
            r["service"] == root and "deploy" in r["change"] for r in csv.DictReader(f)
        )
    return max(KEYWORDS, key=lambda fault: votes[fault])  # max keeps the first of equal counts


def diagnose_incident(incident: Path) -> dict:
    """One incident folder -> {root_service, fault, ruled_out, evidence}, as answer_schema.json states."""
    calls: dict[str, list[str]] = json.loads((incident / "graph.json").read_text())["calls"]
    peak, erroring = {}, set()
    for s in sorted(calls):
        rates = _error_rates(incident, s)
        peak[s] = max(rates)
        if peak[s] >= max(ERROR_FLOOR, 5 * statistics.median(rates[:10])):
            erroring.add(s)
    candidates = [s for s in sorted(erroring) if not erroring & set(calls[s])]
    root = max(candidates or sorted(calls), key=lambda s: peak[s])
    fault = _fault(incident, root)
    ruled_out = sorted(set(calls) - erroring, key=lambda s: peak[s])[:3]
    evidence = (
        f"{root} peaks at {peak[root]:.1%} errors with no erroring dependency; its logs point to {fault}"
    )
    return {"root_service": root, "fault": fault, "ruled_out": ruled_out, "evidence": evidence[:160]}


def diagnose_case(task_dir: Path) -> dict:
    """answer.json's content for every incident of a case directory."""
    incidents = sorted(p for p in (Path(task_dir) / "incidents").iterdir() if p.is_dir())
    return {"incidents": {p.name: diagnose_incident(p) for p in incidents}}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", type=Path, default=DEFAULT_TASK, help="the case directory (holds incidents/)")
    p.add_argument("--out", type=Path, default=Path("answer.json"), help="where to write the answer")
    args = p.parse_args(argv)
    answer = diagnose_case(args.task)
    args.out.write_text(json.dumps(answer, indent=2) + "\n")
    for name, d in answer["incidents"].items():
        print(f"{name}: {d['root_service']} / {d['fault']}")


if __name__ == "__main__":
    main()
