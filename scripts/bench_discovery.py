"""Discovery benchmark: arts with a model vs the random-mutation baseline, same tasks, same evaluation budget.

For every optimize-kind built-in task this runs one `arts` search (the embedded 135M model unless
`--model`) and `mutate` searches with several seeds (no model: random edits over the executor's own
action space), each with `--evals` evaluations, then writes a table: best score per method, whether arts
beat the seed and the baseline's median, the share of evaluations that were valid, and model seconds per
round. Every run keeps its run directory under `--out`, so each number in the table can be traced back.

    python scripts/bench_discovery.py --evals 20 --group 4 --mutate-seeds 0 1 2 --out runs/bench \
        --table docs/benchmark.md

Mutate runs are separate `arts search` processes (`--jobs` at a time) and finish first; arts then runs
task after task in this process (the model loaded once) on an otherwise idle machine, so its seconds per
round are its own.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from arts.search.config import SearchConfig  # noqa: E402
from arts.search.run import start_run  # noqa: E402
from arts.search.store import Store  # noqa: E402
from arts.tasks.base import builtin_names, resolve_task  # noqa: E402

PURPOSES = {
    "proposal": ("propose", "inspect"),
    "executor": ("executor", "investigate", "answer"),
    "analysis": ("plan", "causes", "critic", "judge", "compare"),
}
"""Model calls by role, from the store's usage events (audits happen once, before the first round)."""


def run_stats(run_dir: Path) -> dict:
    """Best score, seed score, valid evaluations and model seconds per round of a finished run."""
    summary = json.loads((run_dir / "summary.json").read_text())
    with Store.open(run_dir, create=False) as store:
        evals = [e.payload for e in store.events("eval")]
        rounds = int(store.get_meta("round", 0))
        usage = [e.payload for e in store.events("usage")]
    by = {k: sum(u["wall_s"] for u in usage if u["purpose"] in purposes) for k, purposes in PURPOSES.items()}
    model_s = sum(u["wall_s"] for u in usage)
    per_round = {k: v / rounds if rounds else 0.0 for k, v in by.items()}
    return {
        "round_core_s": per_round["proposal"] + per_round["executor"],
        "round_analysis_s": per_round["analysis"],
        "best": summary["best"]["score"],
        "seed": summary["baseline"],
        "evals": len(evals),
        "valid_evals": sum(1 for e in evals if e["valid"]),
        "rounds": rounds,
        "model_s_per_round": model_s / rounds if rounds else 0.0,
        "wall_s": summary["wall_s"],
    }


def arts_run(task: str, args: argparse.Namespace, run_dir: Path) -> dict:
    if (run_dir / "summary.json").is_file():  # finished in an earlier invocation (--reuse)
        return run_stats(run_dir)
    if run_dir.exists():  # cut off mid-run: start it again
        shutil.rmtree(run_dir)
    overrides = {
        "task": task,
        "method": "arts",
        "seed": args.seed,
        "group": args.group,
        "budget": {"evals": args.evals},
        "scientist": {"audits": args.audits},
    }
    if args.model:
        overrides["scientist_model"] = {"model": args.model}
    cfg = SearchConfig.model_validate(overrides)
    with open(run_dir.with_suffix(".log"), "w") as log:
        start_run(cfg, run_dir, log=lambda line: print(line, file=log, flush=True))
    return run_stats(run_dir)


def mutate_run(task: str, seed: int, args: argparse.Namespace, run_dir: Path) -> dict:
    if (run_dir / "summary.json").is_file():  # finished in an earlier invocation (--reuse)
        return run_stats(run_dir)
    cmd = [sys.executable, "-m", "arts.search.cli", "search", task, "--method", "mutate", "--seed", str(seed)]
    cmd += ["--evals", str(args.evals), "--group", str(args.group), "--run-dir", str(run_dir)]
    with open(run_dir.with_suffix(".log"), "w") as log:
        subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, check=True)
    return run_stats(run_dir)


def direction(task: str) -> int:
    return 1 if resolve_task(task).config.metric.direction == "maximize" else -1


def table(rows: list[dict], args: argparse.Namespace) -> str:
    head = (
        "| task | seed | arts best | mutate best (median; runs) | arts > seed | arts > mutate median "
        "| valid evals arts | valid evals mutate | arts model s/round: proposal + N executions; analysis |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for r in rows:
        a, ms, sign = r["arts"], r["mutate"], direction(r["task"])
        med = statistics.median(m["best"] for m in ms)
        runs = ", ".join(f"{m['best']:.5g}" for m in ms)
        valid_m = sum(m["valid_evals"] for m in ms), sum(m["evals"] for m in ms)
        lines.append(
            f"| {r['task']} | {a['seed']:.5g} | {a['best']:.5g} | {med:.5g} ({runs}) "
            f"| {'yes' if sign * (a['best'] - a['seed']) > 0 else 'no'} "
            f"| {'yes' if sign * (a['best'] - med) > 0 else 'no'} "
            f"| {a['valid_evals']}/{a['evals']} | {valid_m[0]}/{valid_m[1]} "
            f"| {a['round_core_s']:.1f}; {a['round_analysis_s']:.1f} |"
        )
    beat_seed = sum(direction(r["task"]) * (r["arts"]["best"] - r["arts"]["seed"]) > 0 for r in rows)
    beat_mut = sum(
        direction(r["task"]) * (r["arts"]["best"] - statistics.median(m["best"] for m in r["mutate"])) > 0
        for r in rows
    )
    valid = sum(r["arts"]["valid_evals"] for r in rows), sum(r["arts"]["evals"] for r in rows)
    foot = (
        f"\narts beat the seed on {beat_seed} of {len(rows)} tasks and the mutate median on {beat_mut}; "
        f"{valid[0]} of {valid[1]} arts evaluations were valid "
        f"({100 * valid[0] / max(valid[1], 1):.0f}%). {args.evals} evaluations per run, group {args.group}, "
        f"arts seed {args.seed}, mutate seeds {' '.join(map(str, args.mutate_seeds))}.\n"
    )
    return head + "\n".join(lines) + "\n" + foot


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", nargs="*", default=None, help="default: every optimize-kind built-in")
    p.add_argument("--evals", type=int, default=20)
    p.add_argument("--group", type=int, default=4)
    p.add_argument("--audits", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mutate-seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--model", default=None, help="scientist/executor model (default: embedded)")
    p.add_argument("--jobs", type=int, default=2, help="mutate runs at once")
    p.add_argument("--out", type=Path, default=Path("runs/bench"))
    p.add_argument("--table", type=Path, default=None, help="also write the markdown table here")
    p.add_argument(
        "--reuse", type=Path, default=None, help="an earlier output folder: finished runs are kept"
    )
    args = p.parse_args()
    tasks = args.tasks or [t for t in builtin_names() if resolve_task(t).config.kind == "optimize"]
    out = args.reuse or args.out / time.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=args.reuse is not None)
    rows = {t: {"task": t, "mutate": []} for t in tasks}
    with ThreadPoolExecutor(args.jobs) as pool:  # the baseline first, so arts's timings are its own
        futures = {
            (t, s): pool.submit(mutate_run, t, s, args, out / f"{t}-mutate-{s}")
            for t in tasks
            for s in args.mutate_seeds
        }
        for (t, s), f in futures.items():
            rows[t]["mutate"].append(f.result())
            print(f"{t}: mutate seed {s} best {rows[t]['mutate'][-1]['best']:.5g}", flush=True)
    for t in tasks:
        t0 = time.time()
        rows[t]["arts"] = arts_run(t, args, out / f"{t}-arts")
        a = rows[t]["arts"]
        print(
            f"{t}: arts best {a['best']:.5g} (seed {a['seed']:.5g}), valid {a['valid_evals']}/{a['evals']}, "
            f"{a['round_core_s']:.1f}+{a['round_analysis_s']:.1f} model s/round, {time.time() - t0:.0f} s",
            flush=True,
        )
    text = table(list(rows.values()), args)
    (out / "results.json").write_text(json.dumps(list(rows.values()), indent=2))
    (out / "table.md").write_text(text)
    print(text)
    if args.table:
        args.table.parent.mkdir(parents=True, exist_ok=True)
        args.table.write_text(text)


if __name__ == "__main__":
    main()
