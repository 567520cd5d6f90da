"""How far one test-time update moves the scientist: a sweep of learning rate x steps x LoRA rank on a
stationary problem, to choose `ttt.grpo` defaults from measurements.

The problem: one state prompt and a menu of four single actions (directed hypotheses, the form the small
profile's grammar forces); the first one always pays (reward 1), the others never (0). Each update trains
on one group holding the four actions, their old log-probs taken under the adapter in force at the
scientist's default temperature, exactly as `arts search --ttt` hands groups to `training.ttt.Trainer`.
Per configuration, over `--updates` updates from a fresh adapter:
  - gain: the paying action's summed log-prob rise per update (nats), under the grammar mask and temperature;
  - p_base, p_last: its probability within the menu (softmax of the four summed log-probs) before the
    first update and after the last, and their ratio;
  - gain_held, p_held_ratio: the same on a later state of the search the updates never trained on
    (held out: does what an update learnt carry to the next prompt?);
  - ratio0: the largest |given - recomputed| old log-prob of an action token (`UpdateStats.old_drift`):
    how far the sampling-time scoring is from the update's own first forward, the dtype's consistency;
  - kl_old: the mean per-token KL of one update (to the policy that sampled its group); kl_base: the
    adapter's KL to the base model after the last update; clip: the mean clip fraction; entropy before and
    after; seconds per update.
By default no KL bound acts (`--kl-max` unset), so kl_old shows how far each setting would go; with
`--kl-max`, steps_taken shows where the bound stopped the steps.
The model is a randomly initialised 2-layer Llama (hidden 64) with the embedded model's tokenizer and chat
template (`--model tiny`, as the tests use), or `embedded` / a local model folder.

Usage: OMP_NUM_THREADS=1 .venv/bin/python scripts/ttt_sweep.py [--model tiny] [--lr 2e-4 1e-3 3e-3 1e-2]
       [--steps 1 2 4 8] [--rank 8 16] [--updates 3] [--kl-max X] [--prompt-grad on|off|both]
       [--dtype float32|bfloat16|both] [--modules all-linear lm_head] [--out docs/ttt-sweep.csv]
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from arts.policy.backends.transformers import TransformersBackend  # noqa: E402
from arts.policy.scientist import ScientistConfig  # noqa: E402
from arts.training.grpo import GRPOConfig  # noqa: E402
from arts.training.logprobs import grammar_text  # noqa: E402
from arts.training.ttt import ActionGroup, Trainer  # noqa: E402

PROMPT = [
    {"role": "system", "content": "You are a research scientist running experiments. Answer with JSON only."},
    {
        "role": "user",
        "content": "## Task\nMinimise the validation loss of a small model; the program sets LR, BATCH, "
        "LAYERS.\n\n## Nodes you may start from\n- node 1 (seed): 2.37\n\nPropose the next experiment.",
    },
]
MENU = [
    grammar_text({"parent": 1, "hypothesis": h, "axis": a})
    for h, a in (
        ("increase LR to 0.006", "LR"),
        ("decrease LR to 0.0005", "LR"),
        ("increase BATCH to 128", "BATCH"),
        ("decrease LAYERS to 1", "LAYERS"),
    )
]
HELD_OUT = [
    PROMPT[0],
    {
        "role": "user",
        "content": "## Task\nMinimise the validation loss of a small model; the program sets LR, BATCH, "
        "LAYERS.\n\n## Nodes you may start from\n- node 1 (seed): 2.37\n- node 2 (from 1): 2.29\n\n"
        "Propose the next experiment.",
    },
]
"""A later state of the same search, never trained on: does what an update learnt carry to it?"""
REWARDS = [1.0, 0.0, 0.0, 0.0]
"""The first action always pays: the stationary signal."""
SCHEMA = None
"""No proposal schema: each action is scored under the single-action grammar of its own parent."""
COLUMNS = [
    "model", "modules", "dtype", "lr", "steps", "rank", "kl_max", "prompt_grad", "updates", "steps_taken", "gain", "gain_held",
    "p_base", "p_last", "p_ratio", "p_held_ratio", "ratio0", "kl_old", "kl_base", "clip", "entropy_before", "entropy_after", "update_s",
]  # fmt: skip


def tiny_model(out: Path) -> Path:
    """The tests' tiny random Llama (tests/conftest.py), saved under `out`."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from arts.policy.backends.weights import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(resolve_model(None))
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048, tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def menu_logprobs(trainer: Trainer, prompt: list[dict[str, str]] = PROMPT) -> list[float]:
    return [math.fsum(v) for v in trainer.old_logprobs(prompt, SCHEMA, MENU)]


def paying_probability(summed: list[float]) -> float:
    top = max(summed)
    weights = [math.exp(s - top) for s in summed]
    return weights[0] / sum(weights)


def run_one(
    model: str | None,
    lr: float,
    steps: int,
    rank: int,
    updates: int,
    temperature: float,
    kl_max: float | None,
    prompt_grad: bool = True,
    dtype: str = "float32",
    modules: str = "all-linear",
) -> dict:
    """One configuration from a fresh adapter: `updates` updates on the menu group."""
    backend = TransformersBackend(model, seed=0, dtype=dtype)
    targets = modules if modules == "all-linear" else modules.split(",")
    config = GRPOConfig(lr=lr, steps=steps, lora_rank=rank, lora_alpha=2.0 * rank, kl_max=kl_max,
                        prompt_grad=prompt_grad, target_modules=targets)  # fmt: skip
    trainer = Trainer(backend, config, Path(tempfile.mkdtemp(prefix="arts-sweep-")), temperature=temperature)
    trainer.start()
    first, held_first = menu_logprobs(trainer), menu_logprobs(trainer, HELD_OUT)
    now, stats, seconds = first, [], 0.0
    for _ in range(updates):
        old = trainer.old_logprobs(PROMPT, SCHEMA, MENU)
        t0 = time.perf_counter()
        result = trainer.update([ActionGroup(PROMPT, SCHEMA, MENU, REWARDS, old)])
        seconds += time.perf_counter() - t0
        stats.append(result.stats)
        now = menu_logprobs(trainer)
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    p_base, p_last = paying_probability(first), paying_probability(now)
    held = menu_logprobs(trainer, HELD_OUT)
    return {
        "modules": modules, "dtype": dtype, "lr": lr, "steps": steps, "rank": rank, "kl_max": kl_max, "prompt_grad": prompt_grad,
        "updates": updates, "steps_taken": round(mean([s.steps for s in stats]), 2),
        "gain": round((now[0] - first[0]) / updates, 4), "gain_held": round((held[0] - held_first[0]) / updates, 4),
        "p_base": float(f"{p_base:.4g}"), "p_last": float(f"{p_last:.4g}"),
        "p_ratio": float(f"{p_last / p_base:.4g}"),
        "p_held_ratio": float(f"{paying_probability(held) / paying_probability(held_first):.4g}"),
        "ratio0": float(f"{max(s.old_drift for s in stats):.3g}"), "kl_old": float(f"{mean([s.kl_old for s in stats]):.3g}"), "kl_base": float(f"{stats[-1].kl:.3g}"),
        "clip": round(mean([s.clip_fraction for s in stats]), 4),
        "entropy_before": round(stats[0].entropy_before, 4), "entropy_after": round(stats[-1].entropy, 4),
        "update_s": round(seconds / updates, 3),
    }  # fmt: skip


def main(args: argparse.Namespace) -> int:
    torch.set_num_threads(args.threads)
    model = None if args.model == "embedded" else args.model
    if args.model == "tiny":
        model = str(tiny_model(Path(tempfile.mkdtemp(prefix="arts-tiny-"))))
    temperature = ScientistConfig().temperature
    rows = []
    grads = {"on": [True], "off": [False], "both": [True, False]}[args.prompt_grad]
    dtypes = ["float32", "bfloat16"] if args.dtype == "both" else [args.dtype]
    grid = ((r, s, d, m) for m in args.modules for r in args.rank for s in args.steps for d in dtypes)
    for rank, steps, dtype, modules in grid:
        for lr, grad in ((lr, grad) for lr in args.lr for grad in grads):
            row = {"model": args.model} | run_one(
                model, lr, steps, rank, args.updates, temperature, args.kl_max, grad, dtype, modules
            )
            rows.append(row)
            print(" ".join(f"{k}={row[k]}" for k in COLUMNS), flush=True)
    if args.out:
        with open(args.out, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--model", default="tiny", help="tiny (random 2-layer Llama), embedded, or a model folder"
    )
    ap.add_argument("--lr", type=float, nargs="+", default=[2e-4, 1e-3, 3e-3, 1e-2])
    ap.add_argument("--steps", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--rank", type=int, nargs="+", default=[8, 16])
    ap.add_argument("--updates", type=int, default=3)
    ap.add_argument("--kl-max", type=float, default=None, help="the KL bound per update (default: none)")
    ap.add_argument("--prompt-grad", choices=["on", "off", "both"], default="on",
                    help="back-propagate through the prompt (GRPOConfig.prompt_grad); both: each way")  # fmt: skip
    ap.add_argument(
        "--dtype",
        choices=["float32", "bfloat16", "both"],
        default="float32",
        help="the weights' dtype (the adapter's stays float32, as peft keeps it)",
    )
    ap.add_argument("--modules", nargs="+", default=["all-linear"],
                    help="LoRA targets (GRPOConfig.target_modules): all-linear, or module names joined by commas "
                         "(lm_head: the output head alone); several: each in turn")  # fmt: skip
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None, help="CSV file for the table")
    raise SystemExit(main(ap.parse_args()))
