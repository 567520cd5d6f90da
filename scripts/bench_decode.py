"""Benchmark decoding speed choices for the embedded model on a CPU, against the memory-bandwidth ceiling.

A 135M model decoding one token reads every weight once, so tokens/s cannot exceed the machine's memory
bandwidth over the weights' bytes. This script measures that ceiling (a large tensor copy: read + write),
then greedy tokens/s of: the backend's own loop (fp32), bare `model.generate` (fp32), `model.generate`
with a static KV cache, the backend on int8 dynamically quantized linear layers, on bf16 weights (a
search's default on a CPU with native bf16), on int8 weights with bf16 activations (weight-only), and
`model.generate` on bf16 weights.
For each variant that changes the weights it also measures how close its logits stay to fp32's: the
largest change of a log-prob at fp32's chosen token, and the share of fp32's greedy tokens it would
choose too (teacher-forced on fp32's completion). Variants run interleaved, `--reps` times each, and the
median is kept: on a shared machine, read the ratios of one run, not the absolute figures. Decoding is
not all of a search's model time: it also measures prefill (prompt tokens/s of one forward over a
proposal-sized prompt) in fp32, bf16 and int8 weight-only, since what decodes faster may prefill slower.

Usage: .venv/bin/python scripts/bench_decode.py [--threads 1] [--tokens 48] [--reps 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import time
import warnings
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from arts.policy.backends.transformers import TransformersBackend  # noqa: E402
from arts.policy.backends.weights import cpu_has_bf16  # noqa: E402
from arts.policy.base import Sampling  # noqa: E402

PROMPT = (
    "The seed program packs circles on two rings. Node 3 moved the inner ring outwards and the sum of "
    "radii rose from 0.96 to 1.20; node 5 shrank the margin and it fell. Propose the next experiment. "
) * 4


def bandwidth_gbs(megabytes: int = 1024, reps: int = 5) -> float:
    """GB/s of a large copy, counting the bytes read and written."""
    src = torch.ones(megabytes * 2**20 // 4)
    dst = torch.empty_like(src)
    dst.copy_(src)
    best = min(_seconds(lambda: dst.copy_(src)) for _ in range(reps))
    return 2 * src.numel() * 4 / best / 1e9


def _seconds(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def closeness(ref: Any, other: Any, ids: torch.Tensor) -> dict[str, float]:
    """Teacher-forced on `ids` (prompt + fp32's completion): the largest log-prob change at fp32's
    choice, and the share of positions where both choose the same token."""
    with torch.inference_mode():
        a = torch.log_softmax(ref(ids).logits[0].float(), -1)
        b = torch.log_softmax(other(ids).logits[0].float(), -1)
    choice = a.argmax(-1, keepdim=True)
    return {
        "max_logprob_change": float((a.gather(1, choice) - b.gather(1, choice)).abs().max()),
        "same_greedy_token": float((b.argmax(-1, keepdim=True) == choice).float().mean()),
    }


class WeightOnlyInt8(torch.nn.Module):
    """A linear layer with int8 weights (one scale per output row) and bf16 activations: the weights'
    bytes halve again against bf16, while the activations are not quantized (unlike `quantize_dynamic`)."""

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        w = linear.weight.detach().float()
        scale = w.abs().amax(1).clamp(min=1e-8) / 127
        self.register_buffer("weight_int8", (w / scale[:, None]).round().clamp(-128, 127).to(torch.int8))
        self.register_buffer("scale", scale.to(torch.bfloat16))
        self.bias = linear.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1]).to(torch.bfloat16)
        y = torch.ops.aten._weight_int8pack_mm(flat, self.weight_int8, self.scale).reshape(*x.shape[:-1], -1)
        return y.to(x.dtype) if self.bias is None else y.to(x.dtype) + self.bias


def weight_only_int8(model: Any) -> Any:
    """`model` (bf16) with every linear layer, the output layer too, as `WeightOnlyInt8`."""
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, torch.nn.Linear):
                setattr(module, name, WeightOnlyInt8(child))
    return model


def run(args: argparse.Namespace) -> dict[str, Any]:
    backend = TransformersBackend(None)
    fp32 = backend._base
    weight_bytes = sum(p.numel() * p.element_size() for p in fp32.parameters())
    greedy = Sampling(temperature=0.0, max_tokens=args.tokens)
    prompt_ids = torch.tensor([backend.encode_prompt(PROMPT)])
    ids = {"input_ids": prompt_ids, "attention_mask": torch.ones_like(prompt_ids)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        int8 = torch.ao.quantization.quantize_dynamic(
            copy.deepcopy(fp32), {torch.nn.Linear}, dtype=torch.qint8
        )
    bf16 = copy.deepcopy(fp32).to(torch.bfloat16)
    w8 = weight_only_int8(copy.deepcopy(bf16))

    def with_backend(model: Any):
        def go() -> int:
            backend._base = model
            backend.prefixes.clear()  # the prompt runs every time, as it does for model.generate
            try:
                return backend.generate(PROMPT, sampling=greedy)[0][0].completion_tokens
            finally:
                backend._base = fp32

        return go

    def bare(model: Any = fp32, **kw: Any):
        def go() -> int:
            out = model.generate(
                **ids, max_new_tokens=args.tokens, min_new_tokens=args.tokens, do_sample=False, **kw
            )
            return out.shape[1] - ids["input_ids"].shape[1]

        return go

    variants = {
        "backend fp32": with_backend(fp32),
        "model.generate fp32": bare(),
        "model.generate static cache": bare(cache_implementation="static"),
        "backend int8 dynamic": with_backend(int8),
        "backend bf16": with_backend(bf16),
        "model.generate bf16": bare(bf16),
        "backend int8 weight-only": with_backend(w8),
    }
    long_ids = torch.tensor([backend.encode_prompt(PROMPT * 3)])

    def prefill(model: Any):
        def go() -> int:
            with torch.no_grad():
                model(input_ids=long_ids, use_cache=False)
            return long_ids.shape[1]

        return go

    variants |= {
        "prefill fp32": prefill(fp32),
        "prefill bf16": prefill(bf16),
        "prefill int8 weight-only": prefill(w8),
    }
    for go in variants.values():  # warm up (and compile what compiles)
        go()
    rates: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(args.reps):
        for name, go in variants.items():
            t0 = time.perf_counter()
            n = go()
            rates[name].append(n / (time.perf_counter() - t0))
    completion = backend.generate(PROMPT, sampling=greedy)[0][0]
    forced = torch.cat([ids["input_ids"], torch.tensor([completion.token_ids])], dim=1)
    gbs = bandwidth_gbs()
    return {
        "threads": torch.get_num_threads(),
        "native_bf16": cpu_has_bf16(),
        "weights_mb": weight_bytes / 2**20,
        "bandwidth_gbs": gbs,
        "ceiling_tokens_s": gbs * 1e9 / weight_bytes,
        "tokens_s": {k: statistics.median(v) for k, v in rates.items() if not k.startswith("prefill")},
        "prefill_tokens": long_ids.shape[1],
        "prefill_tokens_s": {
            k[8:]: statistics.median(v) for k, v in rates.items() if k.startswith("prefill")
        },
        "closeness": {
            "int8 dynamic": closeness(fp32, int8, forced),
            "bf16": closeness(fp32, bf16, forced),
            "int8 weight-only": closeness(fp32, w8, forced),
        },
    }


def report(res: dict[str, Any]) -> None:
    ceiling = res["ceiling_tokens_s"]
    print(
        f"threads {res['threads']}, fp32 weights {res['weights_mb']:.0f} MB, copy bandwidth "
        f"{res['bandwidth_gbs']:.1f} GB/s: ceiling {ceiling:.0f} tokens/s"
    )
    base = res["tokens_s"]["backend fp32"]
    for name, rate in res["tokens_s"].items():
        print(
            f"  {name:30s} {rate:6.1f} tokens/s  {rate / base:5.2f}x backend  {100 * rate / ceiling:5.1f}% of ceiling"
        )
    for name, c in res["closeness"].items():
        print(
            f"  {name:30s} largest log-prob change {c['max_logprob_change']:.3f} nats, "
            f"same greedy token {100 * c['same_greedy_token']:.1f}%"
        )
    pre = res["prefill_tokens_s"]
    for name in ("bf16", "int8 weight-only"):
        print(
            f"  prefill of {res['prefill_tokens']} tokens: fp32 {pre['fp32']:.0f} tokens/s, {name} "
            f"{pre[name]:.0f} tokens/s ({pre[name] / pre['fp32']:.2f}x fp32)"
        )
    bare = res["tokens_s"]["model.generate fp32"]
    print(f"\nbackend / model.generate tokens/s (greedy): {base / bare:.2f}")
    default = "backend bf16" if res.get("native_bf16") else "backend fp32"
    rates = res["tokens_s"]
    print(
        f"a search's default here ({default}) / model.generate fp32: {rates[default] / bare:.2f}; "
        f"/ model.generate bf16: {rates[default] / rates['model.generate bf16']:.2f}"
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--tokens", type=int, default=48, help="greedy tokens per completion")
    p.add_argument("--reps", type=int, default=3, help="timed runs of each variant (the median is kept)")
    p.add_argument("--json", default=None, help="also write the figures to this file")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    res = run(args)
    report(res)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
