"""Benchmark one GRPO update (`training.grpo.grpo_update`) against a bare peft forward+backward.

Same model, same LoRA (r=8 on all linear layers), same tokens: one state prompt of ~585 tokens and N=4
grammar-form action completions of 60 tokens each, one AdamW step each.
  - grpo: the prompt runs once with gradients, its KV cache is shared by the N completions, the
    grammar masks are applied, clipped-ratio loss (what test-time training runs);
  - bare: the plain padded batch of N full sequences (prompt + completion) through the peft model,
    log-softmax at the completion positions, advantage-weighted loss, no mask.
Each variant runs in its own process (one warm-up update, then one timed update), so that its memory
peak is its own: seconds of the timed update, and its memory peak (resident set size sampled every
2 ms on CPU; `max_memory_allocated` on CUDA) in total (model and optimizer state included: the
figure compared) and above the level at its start (on CPU that level keeps what the allocator
retained from the warm-up, so the difference is indicative only). One run each: a benchmark of a shared machine, not a statistics exercise.

Usage: .venv/bin/python scripts/bench_grpo.py [--model DIR] [--prompt-tokens 585]
       [--completion-tokens 60] [--n 4] [--rank 8] [--threads 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil  # noqa: E402
import torch  # noqa: E402
from pydantic import ConfigDict, Field, create_model  # noqa: E402

from arts.policy.backends.transformers import TransformersBackend  # noqa: E402
from arts.training.grpo import Group, GRPOConfig, grpo_update, lora_config, make_optimizer  # noqa: E402
from arts.training.logprobs import adapter_scope, build_targets, grammar_text, score_targets  # noqa: E402

PARAGRAPH = (
    "- node 3 from 1: replace the greedy placement by a jittered hexagonal lattice -> 1.2031 "
    "- node 7 from 3: simulated annealing over the centres with a cooling schedule -> 1.1107 "
)
WORDS = (
    "shrink every radius by a small factor then regrow them greedily while keeping the packing valid".split()
)
LongAction = create_model(
    "Action",
    __config__=ConfigDict(extra="forbid"),
    parent=(int, ...),
    hypothesis=(str, Field(min_length=8, max_length=600)),
    axis=(str, Field(min_length=2, max_length=30)),
)


def messages(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "Answer with JSON only."}, {"role": "user", "content": text}]


def state_prompt(backend: TransformersBackend, target: int) -> list[dict[str, str]]:
    """System + user messages of exactly (or just under) `target` tokens after chat templating."""
    text = "## Search state\n"
    while len(backend.encode_prompt(messages(text + PARAGRAPH))) <= target:
        text += PARAGRAPH
    for word in PARAGRAPH.split():
        if len(backend.encode_prompt(messages(f"{text}{word} "))) > target:
            break
        text += f"{word} "
    return messages(text)


def actions(backend: TransformersBackend, n: int, tokens: int) -> list[str]:
    """n different grammar-form actions of exactly `tokens` tokens each (the stop token included)."""
    out = []
    for i in range(n):
        words: list[str] = []
        while True:
            words.append(WORDS[(len(words) + i) % len(WORDS)])
            text = grammar_text({"parent": i % 3, "hypothesis": " ".join(words), "axis": "radii"})
            if len(backend.tokenizer.encode(text, add_special_tokens=False)) + 1 >= tokens:
                out.append(text)
                break
    return out


class Peak:
    """Peak memory above the level at entry: CUDA allocator stats, else sampled resident set size."""

    def __enter__(self) -> Peak:
        self.cuda = torch.cuda.is_available()
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
            self.start = torch.cuda.memory_allocated()
            return self
        self.proc, self.start, self.top, self.running = psutil.Process(), 0, 0, True
        self.start = self.top = self.proc.memory_info().rss
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self) -> None:
        while self.running:
            self.top = max(self.top, self.proc.memory_info().rss)
            time.sleep(0.002)

    def __exit__(self, *exc: object) -> None:
        if self.cuda:
            self.top = torch.cuda.max_memory_allocated()
        else:
            self.running = False
            self.thread.join()

    @property
    def gib(self) -> float:
        return (self.top - self.start) / 2**30


def bare_update(model, prompt_ids: list[int], targets, advantages: list[float], optimizer) -> None:
    """The plain batch: N full sequences, right-padded, through the peft model; no prompt sharing."""
    seqs = [prompt_ids + t.tokens for t in targets]
    width, device = max(map(len, seqs)), model.device
    ids = torch.tensor([s + [0] * (width - len(s)) for s in seqs], device=device)
    attention = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs], device=device)
    logits = model(input_ids=ids, attention_mask=attention).logits.float()
    loss = torch.zeros((), device=device)
    for row, t in enumerate(targets):
        start = len(prompt_ids) - 1
        logp = torch.log_softmax(logits[row, start : start + len(t.tokens)], -1)
        picked = logp.gather(-1, torch.tensor(t.tokens, device=device)[:, None]).squeeze(-1)
        loss = loss - advantages[row] * picked.mean() / len(targets)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


def one_variant(args: argparse.Namespace) -> dict:
    """Run one variant in this process: build, warm up, time one update."""
    torch.set_num_threads(args.threads)
    backend = TransformersBackend(args.model, seed=0)
    config = GRPOConfig(lora_rank=args.rank, lora_alpha=2 * args.rank, steps=1)  # one AdamW step, as bare
    torch.manual_seed(0)
    backend.add_adapter("bench", lora_config(config))
    model, optimizer = backend.model, make_optimizer(backend.model, "bench", config)
    prompt = backend.encode_prompt(state_prompt(backend, args.prompt_tokens))
    targets = build_targets(backend, LongAction, actions(backend, args.n, args.completion_tokens))
    rewards = [float(i % 2) for i in range(args.n)]
    with adapter_scope(model, "bench"):
        old = score_targets(model, prompt, targets, backend.tokenizer.pad_token_id)
        group = Group(prompt, targets, rewards, old)
        advantages = [1.0 if r else -1.0 for r in rewards]
        run = {
            "grpo": lambda: grpo_update(model, backend.tokenizer, [group], config, optimizer),
            "bare": lambda: bare_update(model, prompt, targets, advantages, optimizer),
        }[args.variant]
        run()  # warm-up
        with Peak() as peak:
            start = time.perf_counter()
            run()
            if torch.cuda.is_available():
                torch.cuda.synchronize()  # kernels are queued: the clock stops when they are done
            seconds = time.perf_counter() - start
    return {
        "variant": args.variant, "seconds": round(seconds, 2), "peak_gib": round(peak.gib, 3),
        "peak_total_gib": round(peak.top / 2**30, 3),
        "prompt_tokens": len(prompt), "completion_tokens": [len(t.tokens) for t in targets],
        "threads": args.threads, "device": "cuda" if torch.cuda.is_available() else "cpu",
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None, help="model directory (default: the embedded SmolLM2-135M)")
    p.add_argument("--prompt-tokens", type=int, default=585)
    p.add_argument("--completion-tokens", type=int, default=60)
    p.add_argument("--n", type=int, default=4)
    p.add_argument("--rank", type=int, default=8)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--variant", choices=["grpo", "bare"], help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.variant:
        print(json.dumps(one_variant(args)))
        return 0
    results = {}
    for variant in ("grpo", "bare"):
        cmd = [sys.executable, __file__, *(argv if argv is not None else sys.argv[1:]), "--variant", variant]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            sys.exit(f"the {variant} variant failed:\n{done.stderr[-3000:]}")
        out = done.stdout
        results[variant] = json.loads(out.strip().splitlines()[-1])
        print(json.dumps(results[variant]))
    g, b = results["grpo"], results["bare"]
    ratio = {"seconds_bare_over_grpo": round(b["seconds"] / g["seconds"], 2)}
    ratio["peak_total_bare_over_grpo"] = round(b["peak_total_gib"] / g["peak_total_gib"], 2)
    print(json.dumps(ratio))
    if args.json:
        Path(args.json).write_text(json.dumps({**results, "ratio": ratio}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
