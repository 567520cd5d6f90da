"""Replay a test-time-training run's groups under other GRPO settings, and ask each the credit question.

A TTT run stores every group it trained on (the state prompt, the sampled proposal's tokens, each drawn
candidate's span and reward). This script trains a fresh adapter on those groups in the run's order, one
update per round, for each learning rate given; before each update it scores the round's group (which that
adapter has not seen) under the adapter and under the base model, and counts, over pairs of differently
rewarded actions, how often the adapter had raised the better one more (`training.credit`: 0.5 is no
learning). It answers "would another learning rate have learned something that carries to later rounds?"
without running a search again. Given several runs, it also pools them: per learning rate the mean of the
runs' concordances, and per rate after the first its paired difference from the first rate, each with a
bootstrap 95% interval stratified by task (`search.bench.metrics.mean_ci`). The replay is off policy (the actions were sampled by the run's own
adapter); each update starts at ratio 1 under the replayed adapter, as an on-policy update would.

Usage: .venv/bin/python scripts/ttt_replay.py RUN_DIR... [--lr 2e-4 1e-3 5e-3] [--steps 4] [--threads 1]
       [--reward beats_parent] [--prompt-grad on|off|both] [--dtype float32|bfloat16]
       [--watch "decrease TOL"] [--train-on action move] [--weight-coef 0 1] [--weight-share on|off|both] [--replay 0 3] [--kl-max 0.01]
       [--modules all-linear lm_head]
       [--json out.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from arts.policy.backends.transformers import TransformersBackend  # noqa: E402
from arts.rewards import RewardConfig  # noqa: E402
from arts.search.bench.metrics import mean_ci  # noqa: E402
from arts.search.config import read_stored_config  # noqa: E402
from arts.search.rollout_rewards import due_rewards  # noqa: E402
from arts.search.store import Store  # noqa: E402
from arts.training.credit import CreditAction, base_span_logprobs, credit  # noqa: E402
from arts.training.grpo import GRPOConfig  # noqa: E402
from arts.training.ttt import ADAPTER, ActionGroup, Trainer  # noqa: E402
from arts.training.watch import measure  # noqa: E402


def groups_of(run_dir: Path, reward: str | None = None) -> list[list]:
    """The run's rewarded groups that carry sampled tokens, in round order. With `reward` (a reward
    function's name), every action is rewarded anew from the node scores as `search.rollout_rewards`
    rewards it (so that runs without TTT, or under another reward, can be replayed too)."""
    with Store.open_readonly(run_dir) as store:
        state = store.load_state()
    if reward is not None:
        for r in state.rollouts.values():
            r.reward = None
        for g in due_rewards(state, RewardConfig(name=reward)):
            for r, value in zip(g.rollouts, g.rewards):
                r.reward = value
    by_group: dict[int, list] = defaultdict(list)
    for r in state.rollouts.values():
        if r.reward is not None and r.tokens and len(r.span) == 2:
            by_group[r.group].append(r)
    return [sorted(g, key=lambda r: r.id) for _, g in sorted(by_group.items())]


def replay(
    model: str | None, groups: list[list], lr: float, steps: int, seed: int, temperature: float,
    prompt_grad: bool = True, dtype: str = "float32", watch: str | None = None, train_on: str = "action",
    weight_coef: float = 0.0, replay_rounds: int = 0, kl_max: float | None = GRPOConfig().kl_max,
    weight_share: bool = True, modules: str | list[str] = "all-linear", kl_coef: float = 0.0,
) -> dict:  # fmt: skip
    backend = TransformersBackend(model, seed=seed, dtype=dtype)
    config = GRPOConfig(lr=lr, steps=steps, prompt_grad=prompt_grad, train_on=train_on,
                        weight_coef=weight_coef, replay=replay_rounds, kl_max=kl_max,
                        weight_share=weight_share, target_modules=modules, kl_coef=kl_coef)  # fmt: skip
    trainer = Trainer(backend, config, Path(tempfile.mkdtemp()), temperature=temperature, seed=seed)
    earlier: list[ActionGroup] = []  # the groups trained on so far, newest last
    trainer.start()
    actions, kls, entropies, updates, seconds, ratio0, watched = [], [], [], 0, 0.0, 0.0, []
    for members in groups:
        first = members[0]
        full = {}  # each sampled list scored once under the adapter in force
        for r in members:
            if tuple(r.tokens) not in full:
                full[tuple(r.tokens)] = trainer.proposal_logprobs(first.prompt, first.json_schema, r.tokens)
        if any(v is None for v in full.values()):
            continue
        old = [full[tuple(r.tokens)][r.span[0] : r.span[1]] for r in members]
        based = [
            base_span_logprobs(
                backend, first.prompt, first.json_schema, r.tokens, [tuple(r.span)], temperature
            )
            for r in members
        ]
        if any(b is None for b in based):
            continue
        if updates and watch and (got := measure(backend, members, watch, ADAPTER, temperature)):
            watched.append({"round": first.round, "updates": updates, "ratio": got["ratio"],
                            **{k: got[k] / got[f"{k}_base"] for k in ("offer", "weight") if k in got}})  # fmt: skip
        if updates:  # the adapter has seen only earlier rounds: this group is held out
            actions += [
                CreditAction(first.group, r.reward, math.fsum(o), b[0])
                for r, o, b in zip(members, old, based)
            ]
        group = ActionGroup(first.prompt, first.json_schema, [r.action for r in members],
                            [r.reward for r in members], old, spans=[tuple(r.span) for r in members])  # fmt: skip
        if len(full) == 1:
            group.tokens = first.tokens
        else:
            group.action_tokens = [r.tokens for r in members]
        again = (
            [dataclasses.replace(g, replayed=True) for g in earlier[-replay_rounds:]] if replay_rounds else []
        )
        result = trainer.update([group, *again])
        earlier.append(group)
        ratio0 = max(ratio0, result.stats.old_drift)
        if result.applied:
            updates += 1
            kls.append(result.stats.kl)
            entropies.append(result.stats.entropy)
            seconds += result.stats.seconds
    check = credit(actions)
    return {"lr": lr, "steps": steps, "prompt_grad": prompt_grad, "train_on": train_on, "weight_coef": weight_coef,
            "modules": modules, "kl_coef": kl_coef, "kls": kls, "entropies": entropies,
            "weight_share": weight_share, "replay": replay_rounds, "dtype": dtype,
            "ratio0": ratio0,
            "updates": updates, "watch": watched,
            "kl_last": kls[-1] if kls else None, "entropy_last": entropies[-1] if entropies else None,
            "update_s": seconds / updates if updates else None,
            **check.model_dump()}  # fmt: skip


def _name(row: dict) -> str:
    return (
        f"lr {row['lr']:g} prompt gradient {'on' if row['prompt_grad'] else 'off'}"
        f" on {row.get('train_on', 'action')}"
        + (f" weight {row['weight_coef']:g}" if row.get("weight_coef") else "")
        + (" (own value)" if row.get("weight_coef") and not row.get("weight_share", True) else "")
        + (f" replay {row['replay']}" if row.get("replay") else "")
        + (f" LoRA on {row['modules'] if isinstance(row['modules'], str) else ','.join(row['modules'])}"
           if row.get("modules", "all-linear") != "all-linear" else "")  # fmt: skip
        + (f" KL coef {row['kl_coef']:g}" if row.get("kl_coef") else "")
    )


def pooled(runs: list[dict]) -> list[str]:
    """Per setting (learning rate, prompt gradient), the mean concordance over the runs with pairs, and its
    paired difference from the first setting, each with an interval stratified by task."""
    names = [_name(row) for row in runs[0]["rows"]]
    tasks = list(dict.fromkeys(r["task"] for r in runs))

    def strata(value) -> list[list[float]]:
        return [[v for r in runs if r["task"] == t and (v := value(r)) is not None] for t in tasks]

    def at(r: dict, i: int) -> float | None:
        return r["rows"][i]["concordance"]

    lines = []
    for i, name in enumerate(names):
        values = strata(lambda r, i=i: at(r, i))
        pairs = sum(r["rows"][i]["pairs"] for r in runs)
        line = f"{name}: mean concordance {mean_ci(values).fmt()} over {sum(map(len, values))} runs, {pairs} pairs"
        if i:
            diff = strata(
                lambda r, i=i: None if at(r, i) is None or at(r, 0) is None else at(r, i) - at(r, 0)
            )
            line += f"; minus {names[0]}: {mean_ci(diff).fmt()}"
        lines.append(line)
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dirs", type=Path, nargs="+")
    ap.add_argument("--lr", type=float, nargs="+", default=[2e-4, 1e-3, 5e-3])
    ap.add_argument("--steps", type=int, default=GRPOConfig().steps, help="optimizer steps per update")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reward", default=None, help="reward every action anew with this reward function "
                    "(default: the rewards the run stored; a run without TTT stores none)")  # fmt: skip
    ap.add_argument("--prompt-grad", choices=["on", "off", "both"], default="on",
                    help="back-propagate through the prompt (GRPOConfig.prompt_grad); both: replay each way")  # fmt: skip
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32",
                    help="the weights' dtype (ratio0, printed per run: how far the old log-probs scored at"
                    " sampling time are from the update's own first forward under it)")  # fmt: skip
    ap.add_argument("--watch", default=None, help='a class of moves ("decrease TOL") whose held-out draw '
                    "probability (training.watch) is taken before each update after the first")  # fmt: skip
    ap.add_argument("--train-on", nargs="+", choices=["action", "move"], default=["action"],
                    help="the tokens the loss counts (GRPOConfig.train_on); several: replay each")  # fmt: skip
    ap.add_argument("--weight-coef", type=float, nargs="+", default=[0.0],
                    help="the stated-probability loss's weight (GRPOConfig.weight_coef); several: replay each")  # fmt: skip
    ap.add_argument("--weight-share", choices=["on", "off", "both"], default="on",
                    help="that loss on the candidate's share of its list (GRPOConfig.weight_share); both: each")  # fmt: skip
    ap.add_argument("--replay", type=int, nargs="+", default=[0],
                    help="earlier rounds' groups each update trains on again (GRPOConfig.replay); several: replay each")  # fmt: skip
    ap.add_argument("--kl-max", type=float, default=GRPOConfig().kl_max,
                    help="an update's KL bound per token (ttt.grpo.kl_max); 0: none")  # fmt: skip
    ap.add_argument("--modules", nargs="+", default=["all-linear"],
                    help='the layers LoRA adapts (ttt.grpo.target_modules): "all-linear", or names joined by '
                    'commas ("lm_head", "q_proj,v_proj"); several: replay each')  # fmt: skip
    ap.add_argument("--kl-coef", type=float, nargs="+", default=[0.0],
                    help="the KL penalty's weight to the base (ttt.grpo.kl_coef); several: replay each")  # fmt: skip
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    runs = []
    for run_dir in args.run_dirs:
        cfg = read_stored_config(run_dir / "config.toml")
        groups = groups_of(run_dir, args.reward)
        print(f"{run_dir}: {len(groups)} groups with sampled tokens and rewards", flush=True)
        rows = []
        grads = {"on": [True], "off": [False], "both": [True, False]}[args.prompt_grad]
        shares = {"on": [True], "off": [False], "both": [True, False]}[args.weight_share]
        settings = [
            (lr, grad, on, w, rep, share, mod, klc)
            for klc in args.kl_coef
            for mod in [m if m == "all-linear" else m.split(",") for m in args.modules]
            for lr in args.lr
            for grad in grads
            for on in args.train_on
            for w in args.weight_coef
            for rep in args.replay
            for share in shares
        ]
        for lr, grad, on, w, rep, share, mod, klc in settings:
            t0 = time.perf_counter()
            row = replay(
                cfg.scientist_model.model,
                groups,
                lr,
                args.steps,
                cfg.seed,
                cfg.scientist.temperature,
                grad,
                args.dtype,
                args.watch,
                on,
                w,
                rep,
                args.kl_max or None,
                share,
                mod,
                klc,
            )
            rows.append(row)
            c, u = row["concordance"], row["update_s"]
            print(
                f"  {_name(row)}: {row['updates']} updates "
                f"({'-' if u is None else f'{u:.1f}'} s each), KL to base at the last "
                f"{row['kl_last'] or 0:.2e}/token (entropy {row['entropy_last'] or 0:.3f}/token), held-out concordance {'-' if c is None else f'{c:.3f}'} "
                f"over {row['pairs']} pairs, sampling-time old log-probs off by up to {row['ratio0']:.2g} "
                f"({time.perf_counter() - t0:.0f}s)"
                + "".join(
                    f"\n    watch round {w['round']} after {w['updates']} updates: x{w['ratio']:.3f}"
                    f" (offer x{w.get('offer', math.nan):.3f}, weight x{w.get('weight', math.nan):.3f})"
                    for w in row["watch"]
                ),  # fmt: skip
                flush=True,
            )
        runs.append({"run": str(run_dir), "task": cfg.task, "rows": rows})
        if args.json:  # after every run: a long replay keeps what it finished
            args.json.write_text(json.dumps(runs, indent=2))
    if len(runs) > 1:
        print("\n".join(pooled(runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
