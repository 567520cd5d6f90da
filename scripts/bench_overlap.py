"""Benchmark a round at once (`--workers W`, analysis calls together) against one after another.

Runs the same search twice with the same seed and model (default the embedded one): once with
`--workers 1` and the analysis calls asked one after another (the round before rounds overlapped), once
with `--workers W` as a search runs by default. It reads from each run's store, per round: the round's
seconds (round start to the next), the seconds of its experiments (the draw to the round's last
evaluation), of its analysis (from there to the round's end: attribution, comparison) and its
evaluations. With
`--sleep S` the task's evaluation first sleeps S seconds (a copy of the task with a wrapper evaluator),
which makes it evaluation-bound, for the evaluations-per-hour figure. `--method mutate` measures the
worker pool alone (no model: each round's edits are drawn, then evaluated at once). One run each: a
benchmark of a shared machine, quoted as ratios; the two runs' experiments differ once their sampling
order does. The `--workers 1` run loads the model in float32, as rounds did before; the `--workers W`
run in `--dtype` (default auto: what a search picks, bf16 on a CPU with native bf16).

Usage: .venv/bin/python scripts/bench_overlap.py [--task weighted-completion] [--group 4] [--rounds 2]
       [--workers 2] [--sleep 0] [--seed 0] [--method arts|mutate] [--dtype bfloat16] [--out DIR]
       [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

from arts.search.batching import Batching  # noqa: E402
from arts.search.cli.main import main as arts  # noqa: E402
from arts.search.store import Store  # noqa: E402
from arts.tasks.base import resolve_task  # noqa: E402

WRAPPER = """import runpy, sys, time
time.sleep({sleep})
sys.argv = ["{script}", *sys.argv[1:]]
runpy.run_path("{script}", run_name="__main__")
"""


def slow_copy(task: str, sleep: float, out: Path) -> Path:
    """A copy of `task` whose evaluation sleeps `sleep` seconds before running the task's own."""
    source = resolve_task(task)
    src = source.root
    dst = out / f"{src.name}-sleep{sleep:g}"
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    toml = (dst / "task.toml").read_text()
    command, material = source.config.evaluate.command, source.config.material
    script = command[-1]
    (dst / "evaluate_slow.py").write_text(WRAPPER.format(sleep=sleep, script=script))
    old = "command = " + json.dumps(command)
    new = "command = " + json.dumps([*command[:-1], "evaluate_slow.py"])
    if old not in toml:
        raise SystemExit(f"{dst / 'task.toml'}: cannot find `{old}` to wrap")
    toml = toml.replace(old, new)
    toml = toml.replace(
        "material = " + json.dumps(material), "material = " + json.dumps([*material, "evaluate_slow.py"])
    )
    (dst / "task.toml").write_text(toml)
    return dst


def rounds(run: Path) -> list[dict]:
    """Per round: seconds, experiment seconds (draw, or the round's start without one, to its last
    evaluation), evaluations; a round without an evaluation counts its seconds only."""
    with Store.open(run, create=False) as store:
        events = sorted(store.load_state().events.values(), key=lambda e: e.id)
    starts = [(e.payload["round"], e) for e in events if e.kind == "round_start"]
    out = []
    for k, (r, start) in enumerate(starts):
        end_id = starts[k + 1][1].id if k + 1 < len(starts) else events[-1].id + 1
        inside = [e for e in events if start.id <= e.id < end_id]
        draws = [e.ts for e in inside if e.kind == "draw"] or [start.ts]
        evals = [e.ts for e in inside if e.kind == "eval"]
        end = starts[k + 1][1].ts if k + 1 < len(starts) else inside[-1].ts
        out.append(  # a round without an evaluation (nothing admissible drawn) still took its seconds
            {
                "round": r,
                "seconds": end - start.ts,
                "experiments_s": max(evals) - min(draws) if evals else 0.0,
                "analysis_s": end - max(evals) if evals else 0.0,
                "evals": len(evals),
            }
        )
    return out


@contextmanager
def one_call_at_a_time(on: bool):
    """The calls a round batches on one worker (its analysis, the audits) asked one after another, when on:
    `Batching.together` replaced for those; the experiments (several workers) still run at once."""
    if not on:
        yield
        return
    saved = Batching.together

    @contextmanager
    def sequential(self, backend, workers=1):
        if workers > 1:
            with saved(self, backend, workers) as together:
                yield together
            return
        yield lambda jobs: [job() for job in jobs]

    Batching.together = sequential
    try:
        yield
    finally:
        Batching.together = saved


def run(args: argparse.Namespace) -> dict:
    out = Path(args.out or tempfile.mkdtemp(prefix="bench-overlap-"))
    out.mkdir(parents=True, exist_ok=True)
    task = str(slow_copy(args.task, args.sleep, out)) if args.sleep > 0 else args.task
    res: dict = {
        "task": args.task,
        "method": args.method,
        "sleep_s": args.sleep,
        "group": args.group,
        "runs": {},
    }
    for workers in (1, args.workers):
        run_dir = out / f"workers-{workers}"
        if run_dir.exists():
            shutil.rmtree(run_dir)
        argv = ["search", task, "--run-dir", str(run_dir), "--group", str(args.group), "--seed", str(args.seed),
                "--budget.evals", str(args.group * args.rounds), "--workers", str(workers),
                "--method", args.method]  # fmt: skip
        if args.method != "mutate":  # the round before in float32; the other as a search runs it now
            argv += ["--dtype", "float32" if workers == 1 else args.dtype]
        with one_call_at_a_time(workers == 1):
            code = arts(argv)
        if code != 0:
            raise SystemExit(f"the search with --workers {workers} failed; see {run_dir}")
        res["runs"][workers] = rounds(run_dir)
    return res


def report(res: dict, workers: int) -> None:
    totals = {}
    for w, rows in res["runs"].items():
        print(f"\n--workers {w}")
        for row in rows:
            print(
                f"  round {row['round']}: {row['seconds']:7.1f} s, experiments {row['experiments_s']:7.1f} s, "
                f"analysis {row['analysis_s']:7.1f} s, {row['evals']} evals"
            )
        seconds = sum(r["seconds"] for r in rows)
        exp = sum(r["experiments_s"] for r in rows)
        ana = sum(r["analysis_s"] for r in rows)
        evals = sum(r["evals"] for r in rows)
        totals[w] = (seconds, exp, ana, evals)
        print(
            f"  all: {seconds:.1f} s, experiments {exp:.1f} s, analysis {ana:.1f} s, {evals} evals, "
            f"{3600 * evals / max(seconds, 1e-9):.0f} evals/hour"
        )
    (s1, e1, a1, n1), (sw, ew, aw, nw) = totals[1], totals[workers]
    if res["method"] == "arts":
        print(f"\nanalysis seconds, at once / one after another: {aw / max(a1, 1e-9):.2f}")
    print(f"round seconds per evaluation, workers {workers} / 1: {(sw / max(nw, 1)) / (s1 / max(n1, 1)):.2f}")
    print(
        f"experiment seconds per evaluation, workers {workers} / 1: {(ew / max(nw, 1)) / (e1 / max(n1, 1)):.2f}"
    )
    print(f"evaluations per hour, workers {workers} / 1: {(nw / sw) / (n1 / s1):.2f}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--task", default="weighted-completion")
    p.add_argument("--group", type=int, default=4, help="experiments per round (N)")
    p.add_argument(
        "--rounds", type=int, default=2, help="rounds per run (the evaluation budget is N x rounds)"
    )
    p.add_argument("--workers", type=int, default=2, help="the worker count compared with 1")
    p.add_argument("--sleep", type=float, default=0.0, help="seconds each evaluation sleeps first")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--method", default="arts", choices=["arts", "mutate"])
    p.add_argument(
        "--dtype", default="auto", help="weights' dtype of the --workers W run (default auto, as a search)"
    )
    p.add_argument("--out", default=None, help="where the runs go (default a temporary folder)")
    p.add_argument("--json", default=None, help="also write the figures to this file")
    args = p.parse_args(argv)
    res = run(args)
    report(res, args.workers)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
