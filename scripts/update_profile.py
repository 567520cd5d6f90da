"""Where a test-time-training update's seconds go: the state prompt's forwards, the drawn lists' forwards,
and the backward passes, per update of a stored run's groups replayed at the defaults.

An update at the defaults (`training.grpo.grpo_update`) runs the prompt forward (without gradients) and
the group's lists forward and backward once per optimizer step, plus a forward under the base model
(the KL's reference) and one after the last step (the update's figures). This replays a finished TTT
run's groups through `scripts/ttt_replay.py`'s path with timers around the model's forward calls and
the backward passes, so the shares say which part bounds the update's cost.

Usage: OMP_NUM_THREADS=1 .venv/bin/python scripts/update_profile.py RUN_DIR [--lr 1e-4] [--steps 4]
       [--groups 2] [--train-on move] [--weight-coef 2] [--modules lm_head]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import ttt_replay  # noqa: E402

import arts.policy.backends.decoding as decoding  # noqa: E402
import arts.training.grpo as grpo  # noqa: E402
import arts.training.ttt as ttt  # noqa: E402
from arts.search.config import read_stored_config  # noqa: E402

SECONDS: Counter = Counter()
TOKENS: Counter = Counter()


def _timed(fn, kind_of):
    def wrapped(*args, **kwargs):
        t = time.perf_counter()
        out = fn(*args, **kwargs)
        kind, tokens = kind_of(*args, **kwargs)
        SECONDS[kind] += time.perf_counter() - t
        TOKENS[kind] += tokens
        return out

    return wrapped


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="a finished run with test-time training (its stored groups)")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--groups", type=int, default=None, help="replay only the run's first N groups")
    ap.add_argument("--train-on", choices=["action", "move"], default="action")
    ap.add_argument("--weight-coef", type=float, default=0.0, help="the stated-probability loss's weight")
    ap.add_argument("--modules", nargs="+", default=["all-linear"], help="the adapter's target modules (lm_head)")
    args = ap.parse_args()
    decoding._forward = _timed(
        decoding._forward,
        lambda model, ids, cache, logits_to_keep=0: (
            "prompt" if isinstance(logits_to_keep, int) and logits_to_keep == 1 else "lists",
            ids.numel(),
        ),
    )
    backward = torch.Tensor.backward
    torch.Tensor.backward = _timed(backward, lambda *a, **k: ("backward", 0))
    rows = []
    update = grpo.grpo_update

    def profiled(*a, **k):
        SECONDS.clear()
        TOKENS.clear()
        t = time.perf_counter()
        stats = update(*a, **k)
        total = time.perf_counter() - t
        if stats.steps:
            parts = {kind: SECONDS[kind] for kind in ("prompt", "lists", "backward")}
            rows.append((total, stats.steps, parts, dict(TOKENS)))
            shares = "  ".join(f"{k} {v:.1f}s ({v / total:.0%})" for k, v in parts.items())
            print(f"update: {total:.1f}s, {stats.steps} steps: {shares}; tokens {dict(TOKENS)}", flush=True)
        return stats

    ttt.grpo_update = profiled
    groups = ttt_replay.groups_of(args.run)[: args.groups]
    temperature = read_stored_config(args.run / "config.toml").scientist.temperature
    ttt_replay.replay(
        None, groups, args.lr, args.steps, 0, temperature, prompt_grad=False, train_on=args.train_on,
        weight_coef=args.weight_coef, modules=args.modules if args.modules != ["all-linear"] else "all-linear",
    )  # fmt: skip
    if rows:
        total = sum(r[0] for r in rows)
        for kind in ("prompt", "lists", "backward"):
            print(
                f"{kind}: {sum(r[2][kind] for r in rows) / total:.0%} of {total:.0f}s over {len(rows)} updates"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
