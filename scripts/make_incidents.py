"""Generator of the built-in diagnosis task `incident-rca`: synthetic production incidents with a hidden cause.

Why a generator: a diagnosis task needs cases whose truth is known for certain and that a careful reader can
solve from the material alone, while shallow rules cannot. Each incident is built from one integer seed
(`random.Random`, no numpy), so the committed case is reproduced byte for byte from its seed.

An incident: a call graph of 6-9 services (gateway -> api tier -> services -> data stores), per-minute
metrics of every service for 60 minutes, per-service logs, a change log and the page that opened it. One
root service fails at minute `onset` with one of six faults; the failure reaches each caller a minute or
two per hop later. Solvable by construction: the root's anomaly starts strictly first once anomalies that
changes.csv explains (batch-job windows) are set aside, and the root's own log carries a signature line
(`SIGNATURES`) that appears for its fault only. Red herrings (`TRAPS`, each drawn with its probability):
a dependency that echoes the root's failure later, a batch job's CPU (and error) spike elsewhere, an
unrelated deploy just before the incident, an old harmless deploy of the root, misleading keywords in the
root's log, callers blaming a healthy service, and noisy WARN lines everywhere.

What it is not: a simulator of real systems; faults have one stylised metric shape each. The generator,
its seeds and the truth never enter the task material: the truth goes, as salted digests, into the task's
make_hidden.py, which builds grader/truth.json at first use (`arts.tasks.hidden`; no hidden file is shipped).
task.toml, statement.md and the grader's text in make_hidden.py (which holds the salt) are hand-written; this
script reads the salt from there and copies those files when it writes a case elsewhere.

    .venv/bin/python scripts/make_incidents.py [--seed 54] [--incidents 4] [--out tasks/builtin/incident-rca]
                                               [--truth-out truth.json]

`--truth-out` writes the plain truth (incident -> root_service, fault) to a file of its own, outside the task
folder, so that tests/test_incident_rca.py can score answers on a regenerated case without importing this
script.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script, `scripts.` still imports

from scripts import hidden_truth  # noqa: E402
from scripts.incident_lines import CALLER_LINES, MISLEADING, NOISE, ROOT_LINES, STORE_TRAFFIC, TRAFFIC  # noqa: E402
from scripts.incident_world import (  # noqa: E402
    DATA,
    FAULTS,
    MINUTES,
    TRAPS,
    Draft,
    Incident,
    baselines,
    hhmm,
    onsets,
    propagate,
    ramp,
    root_effect,
    topology,
)

DEFAULT_SEED = 54
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "tasks" / "builtin" / "incident-rca"
STATIC = ("task.toml", "statement.md")
GENERATOR = "make_hidden.py"


def _fill(d: Draft, text: str, service: str, peer: str, version: str = "") -> str:
    rng = d.rng
    numbers = {"n": rng.randint(120, 2400), "p": rng.randint(70, 99), "ms": rng.randint(40, 300)}
    numbers |= {"q": rng.randint(55, 80), "low": rng.randint(2, 9)}
    return text.format(s=service, peer=peer, v=version, **numbers)


def _background_logs(d: Draft) -> None:
    for s in sorted(d.calls):
        for m in sorted(d.rng.sample(range(MINUTES), d.rng.randint(9, 14))):
            lat = round(d.series[s]["latency_ms"][m])
            text = d.rng.choice(STORE_TRAFFIC if s in DATA else TRAFFIC)
            d.log(s, m, text.format(s=s, lat=lat, n=d.rng.randint(800, 9000)))
        for m in sorted(d.rng.sample(range(MINUTES), d.rng.randint(1, 3))):
            d.log(s, m, _fill(d, d.rng.choice(NOISE), s, s))


def _root_logs(d: Draft, root: str, fault: str, t0: int, misleading: bool, version: str) -> None:
    signature, support = ROOT_LINES[fault]
    peer = d.rng.choice(d.calls[root]) if d.calls[root] else f"{root}-replica-2"
    if fault == "memory_leak":  # one signature per restart: the minutes whose memory dropped
        mem = d.series[root]["mem"]
        minutes = [m for m in range(t0, MINUTES) if mem[m] < mem[m - 1] - 15]
    else:
        minutes = sorted(d.rng.sample(range(t0, MINUTES), d.rng.randint(2, 3)))
    for m in minutes:
        d.log(root, m, _fill(d, signature, root, peer, version))
    for m in sorted(d.rng.sample(range(t0, MINUTES), d.rng.randint(2, 4))):
        d.log(root, m, _fill(d, d.rng.choice(support), root, peer, version))
    for m in sorted(d.rng.sample(range(t0, MINUTES), d.rng.randint(2, 4))):
        d.log(root, m, "ERROR request failed: " + d.rng.choice(("internal error", "deadline exceeded")))
    if misleading:
        for m in sorted(d.rng.sample(range(t0 - 3, MINUTES), d.rng.randint(5, 7))):
            d.log(root, m, _fill(d, d.rng.choice(MISLEADING[fault]), root, peer))


def _caller_logs(d: Draft, root: str, onset: dict[str, int], wrong_blame: bool) -> None:
    """Callers log timeouts toward the callee the failure came through; with `wrong_blame`, those that also
    call a healthy service blame it in a few lines."""
    for c in sorted(onset, key=lambda s: (onset[s], s)):
        if c == root:
            continue
        via = min((x for x in d.calls[c] if x in onset), key=lambda x: (onset[x], x))
        for m in range(onset[c], MINUTES, d.rng.randint(2, 4)):
            d.log(c, m, d.rng.choice(CALLER_LINES).format(x=via, n=d.rng.randint(1000, 5000)))
        others = [x for x in d.calls[c] if x not in onset]
        if wrong_blame and others:
            for m in sorted(d.rng.sample(range(onset[c], MINUTES), d.rng.randint(1, 3))):
                d.log(c, m, CALLER_LINES[0].format(x=d.rng.choice(others), n=d.rng.randint(1000, 5000)))


def _echo(d: Draft, root: str, t0: int) -> None:
    """A store the root calls sees aborted sessions a few minutes after the root fails, and errors with them."""
    dep, start = d.rng.choice(d.calls[root]), t0 + d.rng.randint(3, 6)
    err, lat = d.rng.uniform(0.06, 0.18), d.base[dep]["latency_ms"] * d.rng.uniform(0.3, 1.0)
    for m in range(start, MINUTES):
        d.add(dep, "error_rate", m, err * ramp(m, start))
        d.add(dep, "latency_ms", m, lat * ramp(m, start))
    for m in sorted(d.rng.sample(range(start, MINUTES), d.rng.randint(3, 5))):
        d.log(dep, m, f"ERROR aborted connection from client {root} (client closed the session)")
    d.log(dep, start + 1, f"WARN client {root} reconnect storm: {d.rng.randint(200, 900)} new sessions/min")


def _batch_job(d: Draft, root: str, t0: int, errors: bool) -> None:
    """A scheduled job on another service: CPU near saturation and slower requests inside its window only."""
    svc = d.rng.choice([s for s in sorted(d.calls) if s != root])
    job = d.rng.choice(("nightly-reindex", "report-export", "cache-warmup", "compaction", "backfill"))
    start = t0 + d.rng.randint(-15, 4)
    end = min(MINUTES - 2, start + d.rng.randint(8, 14))
    cpu = d.rng.uniform(85, 95) - d.base[svc]["cpu"]
    lat, err = d.rng.uniform(0.6, 1.2), d.rng.uniform(0.06, 0.2)
    for m in range(start, end):
        d.add(svc, "cpu", m, cpu * ramp(m, start))
        d.add(svc, "latency_ms", m, d.base[svc]["latency_ms"] * lat * ramp(m, start))
        if errors:
            d.add(svc, "error_rate", m, err * ramp(m, start))
    d.changes += [(start, svc, f"batch job {job} started"), (end, svc, f"batch job {job} finished")]
    d.log(svc, start, f"INFO batch {job} started")
    d.log(svc, start + 2, f"WARN cpu {d.rng.randint(85, 97)}% during batch {job}")
    if errors:
        for m in sorted(d.rng.sample(range(start + 1, end), 3)):
            d.log(svc, m, f"ERROR lock wait timeout exceeded while batch {job} holds the table")
    d.log(svc, end, f"INFO batch {job} finished")


def _deploy(d: Draft, service: str, minute: int) -> str:
    major, minor = d.rng.randint(1, 4), d.rng.randint(2, 19)
    old, new = f"v{major}.{minor}.{d.rng.randint(0, 9)}", f"v{major}.{minor + 1}.0"
    d.changes.append((minute, service, f"deploy {old} -> {new}"))
    d.log(service, minute, f"INFO started version {new}")
    return new


def _changes(d: Draft, root: str, fault: str, t0: int, traps: list[str]) -> str:
    """Deploys in the change log; returns the version a bad deploy started (its exception names it)."""
    others = [s for s in sorted(d.calls) if s != root]
    for s in sorted(d.rng.sample(others, d.rng.randint(0, 2))):
        _deploy(d, s, d.rng.randint(1, t0 - 16))
    if "decoy_deploy" in traps:
        _deploy(d, d.rng.choice(others), t0 - d.rng.randint(2, 6))
    if "root_old_deploy" in traps:
        _deploy(d, root, t0 - d.rng.randint(12, 20))
    if d.rng.random() < 0.5:
        flag = d.rng.choice(("new-checkout", "dark-mode", "search-v2", "recs-ranking"))
        d.changes.append(
            (d.rng.randint(1, MINUTES - 1), d.rng.choice(others), f"feature flag {flag} enabled")
        )
    return _deploy(d, root, t0) if fault == "bad_deploy" else ""


def _alert(d: Draft, t0: int) -> str:
    err = d.series["gateway"]["error_rate"]
    first = next((m for m in range(t0, MINUTES) if err[m] > 0.02), MINUTES - 3)
    page = min(MINUTES - 1, first + 2)
    lat = d.series["gateway"]["latency_ms"][page]
    return (
        f"{hhmm(d.clock, page)} PAGE gateway: error rate {err[page]:.1%} over 5 min (SLO 1%), "
        f"latency {lat:.0f} ms. Incident opened; find the root cause.\n"
    )


def generate_incident(seed: int, incident_id: str = "i1") -> Incident:
    """One incident from one seed: same seed, same incident, byte for byte."""
    rng = random.Random(seed)
    calls = topology(rng)
    fault = rng.choice(FAULTS)
    eligible = [
        s for s in sorted(calls) if s != "gateway" and (calls[s] or fault != "connection_pool_exhausted")
    ]
    root, t0 = rng.choice(eligible), rng.randint(24, 34)
    traps = [t for t, p in TRAPS.items() if rng.random() < p]
    if not calls[root]:
        traps = [t for t in traps if t != "echo"]
    if fault in ("bad_deploy", "memory_leak"):  # a root deploy is the cause there, or coincides with the leak
        traps = [t for t in traps if t != "root_old_deploy"]
    d = Draft(rng, calls, rng.randint(0, 22) * 60 + rng.choice((0, 15, 30, 45)))
    baselines(d)
    added = root_effect(d, root, fault, t0)
    onset = onsets(d, root, t0)
    propagate(d, root, t0, onset, added)
    if "echo" in traps:
        _echo(d, root, t0)
    _batch_job(d, root, t0, errors="batch_errors" in traps)
    version = _changes(d, root, fault, t0, traps)
    _background_logs(d)
    _root_logs(d, root, fault, t0, "misleading_keywords" in traps, version)
    _caller_logs(d, root, onset, wrong_blame="wrong_blame" in traps)
    return Incident(
        id=incident_id,
        seed=seed,
        clock=d.clock,
        calls=calls,
        root=root,
        fault=fault,
        onset=t0,
        metrics={s: [_row(d.series[s], m) for m in range(MINUTES)] for s in sorted(calls)},
        logs={
            s: [f"{hhmm(d.clock, m)}:{sec:02d} {text}" for m, sec, text in sorted(lines)]
            for s, lines in d.logs.items()
        },
        changes=[[hhmm(d.clock, m), s, text] for m, s, text in sorted(d.changes)],
        alert=_alert(d, t0),
        traps=traps,
    )


def _row(series: dict[str, list[float]], m: int) -> list[float]:
    lat, err = max(1.0, series["latency_ms"][m]), min(1.0, max(0.0, series["error_rate"][m]))
    cpu, mem = (min(100.0, max(1.0, series[c][m])) for c in ("cpu", "mem"))
    return [round(lat, 1), round(err, 4), round(cpu, 1), round(mem, 1)]


def write_incident(incident: Incident, out: Path) -> None:
    """The incident's material, and nothing of its truth, under `out` (e.g. incidents/i1)."""
    for sub in ("metrics", "logs"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    (out / "alert.txt").write_text(incident.alert)
    (out / "graph.json").write_text(json.dumps({"calls": incident.calls}, indent=2) + "\n")
    rows = ["time,service,change", *(",".join(r) for r in incident.changes)]
    (out / "changes.csv").write_text("\n".join(rows) + "\n")
    for s in incident.services:
        lines = ["time,latency_ms,error_rate,cpu,mem"]
        for m, (lat, err, cpu, mem) in enumerate(incident.metrics[s]):
            lines.append(f"{hhmm(incident.clock, m)},{lat:.1f},{err:.4f},{cpu:.1f},{mem:.1f}")
        (out / "metrics" / f"{s}.csv").write_text("\n".join(lines) + "\n")
        (out / "logs" / f"{s}.txt").write_text("".join(f"{line}\n" for line in incident.logs[s]))


def answer_schema(incidents: list[Incident]) -> dict:
    """JSON schema of answer.json: every value a grammar-constrained model can write is a valid one."""
    services = sorted({s for i in incidents for s in i.calls})
    diagnosis = {
        "type": "object",
        "properties": {
            "root_service": {"type": "string", "enum": services},
            "fault": {"type": "string", "enum": list(FAULTS)},
            "ruled_out": {"type": "array", "items": {"type": "string", "enum": services}, "maxItems": 3},
            "evidence": {"type": "string", "maxLength": 160},
        },
        "required": ["root_service", "fault", "ruled_out", "evidence"],
        "additionalProperties": False,
    }
    ids = [i.id for i in incidents]
    return {
        "title": "incident-rca answer",
        "type": "object",
        "properties": {
            "incidents": {
                "type": "object",
                "properties": dict.fromkeys(ids, diagnosis),
                "required": ids,
                "additionalProperties": False,
            }
        },
        "required": ["incidents"],
        "additionalProperties": False,
    }


def digest(salt: str, incident: str, value: str) -> str:
    """What grader/truth.json stores instead of a value; the grader computes the same from the answer."""
    return hashlib.sha256(f"{salt}:{incident}:{value}".encode()).hexdigest()


def grader_salt(task_dir: Path = DEFAULT_OUT) -> str:
    """The salt of the hidden grader in the task's make_hidden.py."""
    return hidden_truth.grader_salt(task_dir / GENERATOR)


def write_case(out: Path, seed: int = DEFAULT_SEED, incidents: int = 4) -> list[Incident]:
    """The whole task directory: the incidents, answer_schema.json and the truth in make_hidden.py are
    generated; task.toml, statement.md and the rest of make_hidden.py are hand-written, copied from the
    built-in task."""
    out = Path(out)
    shutil.rmtree(out / "incidents", ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    generator = (DEFAULT_OUT / GENERATOR).read_text()
    if out.resolve() != DEFAULT_OUT.resolve():
        for rel in STATIC:
            shutil.copyfile(DEFAULT_OUT / rel, out / rel)
    case = [generate_incident(seed * 1000 + k, f"i{k}") for k in range(1, incidents + 1)]
    for incident in case:
        write_incident(incident, out / "incidents" / incident.id)
    (out / "answer_schema.json").write_text(json.dumps(answer_schema(case), indent=2) + "\n")
    salt = grader_salt(DEFAULT_OUT)
    truth = {
        i.id: {"root_service": digest(salt, i.id, i.root), "fault": digest(salt, i.id, i.fault)} for i in case
    }
    truth_json = json.dumps(truth, indent=2) + "\n"
    (out / GENERATOR).write_text(hidden_truth.with_truth(generator, truth_json, DEFAULT_OUT / GENERATOR))
    return case


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="case seed; incident k uses seed*1000+k")
    p.add_argument("--incidents", type=int, default=4, help="how many incidents the case holds")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="task directory to (re)write")
    p.add_argument("--truth-out", type=Path, help="also write the plain truth here (keep it out of --out)")
    args = p.parse_args(argv)
    if args.truth_out is not None and args.truth_out.resolve().is_relative_to(args.out.resolve()):
        p.error(f"--truth-out {args.truth_out} is inside --out {args.out}: the truth would be task material")
    case = write_case(args.out, args.seed, args.incidents)
    if args.truth_out is not None:
        truth = {i.id: {"root_service": i.root, "fault": i.fault} for i in case}
        args.truth_out.write_text(json.dumps(truth, indent=2) + "\n")
    print(f"wrote {args.out}: {', '.join(f'{i.id} ({len(i.calls)} services)' for i in case)}")


if __name__ == "__main__":
    main()
