"""The `arts bench` sub-command: its flags, and the function the `arts` command calls.

`add_parser(subparsers)` adds `bench` to the `arts` command's sub-parsers; `cmd_bench(args)` runs it.
The module imports nothing heavy, so `arts --help` stays fast; `python -m arts.search.bench.cli` runs the
same sub-command on its own.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

EXAMPLE = """example:
  arts bench --tasks char-lm circle-packing-26 --methods arts,arts-ttt,greedy,mutate --seeds 5 \\
      --evals 30 --out bench/learning --jobs 2
  arts bench --tasks probes --methods arts,arts-ttt --seeds 5 --evals 16 --out bench/probes
Run the same command again to continue a killed bench: finished runs are kept, unfinished ones resumed.
"""


def _methods(values: list[str]) -> list[str]:
    return [m.strip() for v in values for m in v.split(",") if m.strip()]


def _overrides(items: list[str] | None) -> dict[str, Any]:
    from arts.search.config import parse_value

    out = {}
    for item in items or []:
        path, sep, value = item.partition("=")
        if not sep or not path.strip():
            raise ValueError(
                f"--set {item!r}: write it as field.path=value, e.g. --set scientist.candidates=3"
            )
        out[path.strip()] = parse_value(value.strip())
    return out


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `bench` sub-command to `subparsers` (from `ArgumentParser.add_subparsers`)."""
    p = subparsers.add_parser(
        "bench",
        help="run tasks x methods x seeds at equal budgets; tables, IQM with intervals, curves",
        description="Every (task, method, seed) run at the same evaluation budget with the same model,\n"
        "in worker processes, resumable; writes runs.parquet/csv, updates.csv, summary.md and\n"
        "PNG figures into --out.",
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--tasks", nargs="+", required=True, metavar="TASK",
        help="built-in names, task directories, or a suite: probes (the learning probes, each with its "
        "paying class of moves watched under --ttt), diagnosis (the answer tasks: incident-rca, "
        "regression-bisect)",
    )  # fmt: skip
    p.add_argument(
        "--methods", nargs="+", default=["arts,arts-ttt,greedy,mutate"], metavar="METHOD",
        help="comma- or space-separated: arts, arts-ttt (arts with test-time training), greedy, random, mutate, "
        "module:attr, or an ablation of arts: arts-no-observations, arts-no-comparison, arts-no-attribution, "
        "arts-no-critic, arts-k1, arts-reflection; any of them + -warm starts from --adapter "
        "(default: arts,arts-ttt,greedy,mutate)",
    )  # fmt: skip
    p.add_argument(
        "--seeds", nargs="+", default=["5"], metavar="S",
        help="a count (5: seeds 0-4) or the seeds themselves (0 3 7, or 7, for one) (default: 5)",
    )  # fmt: skip
    p.add_argument(
        "--evals", type=int, default=30, help="evaluation budget of every run (default %(default)s)"
    )
    p.add_argument("--out", type=Path, required=True, help="the bench folder (created; reused to continue)")
    p.add_argument("--jobs", type=int, default=1, help="runs at a time, one worker process each (default 1)")
    p.add_argument(
        "--report", action="store_true",
        help="run nothing: write the tables, figures and summary of the runs finished so far",
    )  # fmt: skip
    p.add_argument("--model", help="scientist and executor model of every run (default: the embedded model)")
    p.add_argument(
        "--set", action="append", metavar="PATH=VALUE", help="a config field for every run, e.g. group=4"
    )
    p.add_argument(
        "--adapter", type=Path, help="the adapter the METHOD-warm methods start from (arts-warm, arts-ttt-warm: "
        "a warm start from `arts train`, against the same method from the base weights)",
    )  # fmt: skip
    p.add_argument("--ray", action="store_true", help="run each search as a Ray task (a cluster; see README)")
    p.add_argument("--ray-address", help="with --ray: the cluster to join (default: start a local one)")
    p.add_argument(
        "--ray-cpus", type=int, default=1, help="with --ray: CPUs each search declares (default 1)"
    )
    p.add_argument(
        "--ray-gpus", type=float, default=0.0, help="with --ray: GPUs (a share) each search declares"
    )
    p.set_defaults(fn=cmd_bench)
    return p


def config_from(args: argparse.Namespace):
    """The bench config the parsed flags describe."""
    from arts.search.bench.plan import BenchConfig, parse_seeds

    return BenchConfig(
        tasks=args.tasks,
        methods=_methods(args.methods),
        seeds=parse_seeds(args.seeds),
        evals=args.evals,
        out=args.out,
        jobs=args.jobs,
        model=args.model,
        overrides=_overrides(args.set),
        adapter=args.adapter,
        ray=args.ray,
        ray_address=args.ray_address,
        ray_cpus=args.ray_cpus,
        ray_gpus=args.ray_gpus,
    )


def cmd_bench(args: argparse.Namespace) -> int:
    """Run (or continue) the bench; 0 when every run finished, 1 when some failed (listed in summary.md)."""
    from arts.search.bench.runner import run_bench

    cfg = config_from(args)
    results = run_bench(cfg, log=lambda line: print(line, flush=True), run=not args.report)
    if args.report:
        return 0
    failed = [r.row for r in results if r.row["status"] != "finished"]
    if failed:
        print(
            f"{len(failed)} run(s) failed; see {cfg.out / 'summary.md'}; run the command again to retry them"
        )
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    from arts.search.store import StoreError
    from arts.tasks.base import TaskError

    parser = argparse.ArgumentParser(prog="arts")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except (ValueError, KeyError, TaskError, StoreError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
