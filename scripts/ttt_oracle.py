"""Would the scientist learn a class of moves if every round paid it exactly? Signal against transfer.

A TTT run on a probe learns little (docs/benchmark.md); two causes are possible. Either the signal is too
thin (the paying class is rarely drawn, so few groups reward it), or what an update learns on one round's
prompt does not carry to the next round's prompt. This script separates them. It replays a finished run's
own sampled lists, round by round, with a stationary oracle reward: 1 for a candidate whose hypothesis
starts with the watched class, 0 for any other. With `--candidates drawn` a round's groups hold only the
drawn candidates (the search's signal, the reward made exact); with `all`, every candidate each list wrote
(as much signal as the lists hold). Before each update the class's draw probability (`training.watch`) is
taken on every list of the round that offers it, under the adapter and under the base (held out: that
round is not trained on yet), and after the update on the same lists again (fitted: the round just trained
on). Held out near 1 while fitted rises means the update does not transfer between rounds; held out rising
means it does, and the search lacks signal.

Usage: .venv/bin/python scripts/ttt_oracle.py RUN_DIR... --watch "increase STEPS" [--candidates drawn all]
       [--lr 1e-4] [--steps 4] [--train-on move] [--rounds 6] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from arts.policy.backends.transformers import TransformersBackend  # noqa: E402
from arts.policy.spans import candidate_token_spans  # noqa: E402
from arts.search.config import read_stored_config  # noqa: E402
from arts.search.store import Store  # noqa: E402
from arts.training.grpo import GRPOConfig  # noqa: E402
from arts.training.ttt import ADAPTER, ActionGroup, Trainer  # noqa: E402
from arts.training.watch import measure  # noqa: E402


def rounds_of(run_dir: Path) -> list[list]:
    """The run's sampled lists (one rollout standing for each), grouped by round, in round order."""
    with Store.open_readonly(run_dir) as store:
        state = store.load_state()
    lists: dict[int, dict[tuple, list]] = defaultdict(dict)
    for r in sorted(state.rollouts.values(), key=lambda r: r.id):
        if r.tokens and r.candidates:
            lists[r.round].setdefault(tuple(r.tokens), []).append(r)
    return [list(by_list.values()) for _, by_list in sorted(lists.items())]


def watched(backend, lists: list[list], move: str, temperature: float) -> float | None:
    """Geometric mean over the lists that offer `move` of its draw probability's ratio, adapter to base."""
    logs = []
    for members in lists:
        got = measure(backend, members[:1], move, ADAPTER, temperature)
        if got and got.get("ratio") and math.isfinite(got["ratio"]) and got["ratio"] > 0:
            logs.append(math.log(got["ratio"]))
    return math.exp(statistics.fmean(logs)) if logs else None


def groups_for(trainer: Trainer, lists: list[list], move: str, which: str) -> list[ActionGroup]:
    """One group per list: its drawn candidates (`drawn`) or all its candidates (`all`), oracle-rewarded."""
    decode = trainer.backend.tokenizer.decode
    out = []
    for members in lists:
        first = members[0]
        spans = candidate_token_spans(decode(first.tokens), first.tokens, decode)
        if len(spans) != len(first.candidates):
            continue
        picks = sorted({r.drawn for r in members}) if which == "drawn" else range(len(spans))
        rewards = [float(str(first.candidates[i].get("hypothesis", "")).startswith(move)) for i in picks]
        if len(set(rewards)) < 2:
            continue  # no signal: GRPO would skip it
        full = trainer.proposal_logprobs(first.prompt, first.json_schema, first.tokens)
        if full is None:
            continue
        out.append(ActionGroup(first.prompt, first.json_schema,
                               [json.dumps(first.candidates[i]) for i in picks], rewards,
                               [full[spans[i][0]:spans[i][1]] for i in picks],
                               tokens=first.tokens, spans=[spans[i] for i in picks]))  # fmt: skip
    return out


def oracle(
    model, rounds: list[list], move: str, which: str, config: GRPOConfig, seed: int, temperature: float
) -> dict:
    backend = TransformersBackend(model, seed=seed)
    trainer = Trainer(backend, config, Path(tempfile.mkdtemp()), temperature=temperature, seed=seed)
    trainer.start()
    rows, updates = [], 0
    for lists in rounds:
        held = watched(backend, lists, move, temperature) if updates else 1.0
        groups = groups_for(trainer, lists, move, which)
        result = trainer.update(groups) if groups else None
        if result is not None and result.applied:
            updates += 1
        fitted = watched(backend, lists, move, temperature) if updates else 1.0
        rows.append({"round": lists[0][0].round, "updates": updates, "groups": len(groups),
                     "held_out": held, "fitted": fitted,
                     **({"kl": result.stats.kl, "steps": result.stats.steps, "kl_stop": result.stats.kl_stop}
                        if result is not None and result.applied else {})})  # fmt: skip
    return {"candidates": which, "rows": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dirs", type=Path, nargs="+")
    ap.add_argument("--watch", required=True, help='the class of moves paid ("increase STEPS")')
    ap.add_argument("--candidates", nargs="+", choices=["drawn", "all"], default=["drawn", "all"])
    ap.add_argument("--lr", type=float, default=GRPOConfig().lr)
    ap.add_argument("--steps", type=int, default=GRPOConfig().steps)
    ap.add_argument("--train-on", choices=["action", "move"], default="move")
    ap.add_argument("--weight-coef", type=float, default=0.0, help="GRPOConfig.weight_coef")
    ap.add_argument("--kl-max", type=float, default=GRPOConfig().kl_max, help="GRPOConfig.kl_max; 0: none")
    ap.add_argument("--rounds", type=int, default=6, help="the first rounds of each run replayed")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    config = GRPOConfig(lr=args.lr, steps=args.steps, train_on=args.train_on, weight_coef=args.weight_coef,
                        kl_max=args.kl_max or None)  # fmt: skip
    runs = []
    for run_dir in args.run_dirs:
        cfg = read_stored_config(run_dir / "config.toml")
        rounds = rounds_of(run_dir)[: args.rounds]
        print(f"{run_dir}: {len(rounds)} rounds, {sum(map(len, rounds))} lists", flush=True)
        for which in args.candidates:
            got = oracle(cfg.scientist_model.model, rounds, args.watch, which, config, cfg.seed,
                         cfg.scientist.temperature)  # fmt: skip
            runs.append({"run": str(run_dir), **got})
            for row in got["rows"]:
                print(f"  {which} round {row['round']}: {row['groups']} groups, {row['updates']} updates;"
                      f" held out x{_f(row['held_out'])}, fitted x{_f(row['fitted'])}"
                      f" (steps {row.get('steps', '-')}, KL {_f(row.get('kl'))})", flush=True)  # fmt: skip
            if args.json:
                args.json.write_text(json.dumps(runs, indent=2))
    return 0


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


if __name__ == "__main__":
    sys.exit(main())
