"""How a phrase choice's heat (`scientist.choice_heat`) changes the base model's chance of writing a class of
moves: over every slot of a run's sampled lists (written axis first) that allows the move, the probability
of writing it there (`training.watch.slot_probabilities`, everything before the slot as sampled), with the
stored schema's heat set to each value in turn. A fresh adapter (LoRA's zero-initialised B) is the base.

Usage: OMP_NUM_THREADS=1 .venv/bin/python scripts/choice_heat.py RUN_DIR... --move "increase STEPS"
       [--heats 1,2,3] [--lists 8]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from arts.policy.backends.spelling import HEAT  # noqa: E402
from arts.policy.backends.transformers import TransformersBackend  # noqa: E402
from arts.search.config import read_stored_config  # noqa: E402
from arts.search.store import Store  # noqa: E402
from arts.training.grpo import lora_config  # noqa: E402
from arts.training.watch import slot_probabilities  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--move", required=True)
    ap.add_argument("--heats", default="1,2,2.5,3")
    ap.add_argument("--lists", type=int, default=8, help="at most this many lists per run")
    args = ap.parse_args(argv)
    heats = [float(h) for h in args.heats.split(",")]
    backend, got = None, {h: [] for h in heats}
    for run in args.runs:
        cfg = read_stored_config(run / "config.toml")
        if backend is None:
            backend = TransformersBackend(cfg.scientist_model.model, dtype="float32", seed=cfg.seed)
            backend.add_adapter("fresh", lora_config(cfg.ttt.grpo))
        with Store.open_readonly(run) as store:
            rollouts = [r for r in store.load_state().rollouts.values() if r.tokens]
        lists = list({tuple(r.tokens): r for r in sorted(rollouts, key=lambda r: r.id)}.values())[
            : args.lists
        ]
        for r in lists:
            for h in heats:
                schema = {**(r.json_schema or {}), HEAT: h}
                found = slot_probabilities(
                    backend, r.prompt, schema, r.tokens, args.move, "fresh", cfg.scientist.temperature
                )
                got[h] += [base for _, base in found]
    print("| heat | slots | mean probability of writing the move where offered |")
    print("|---|---|---|")
    for h in heats:
        mean = math.fsum(got[h]) / len(got[h]) if got[h] else float("nan")
        print(f"| {h:g} | {len(got[h])} | {mean:.3f} |")


if __name__ == "__main__":
    main()
