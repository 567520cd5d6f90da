"""Offline training on a run's rollouts: export them as a dataset, train an adapter with TRL.

`arts rollouts export` writes one row per rewarded rollout as a parquet (or JSON lines) file with a dataset
card, in TRL's conversational prompt-completion layout: `prompt` (the state as chat messages),
`completion` (the action as one assistant message), `reward`, and where it came from (`run`, `round`,
`group`, `node`, `adapter`, `model`, `reward_source`). `datasets.load_dataset(OUT)` reads the folder, and
TRL's trainers take it without a `map`. `arts train` trains a LoRA adapter on records from one or more
runs with TRL: SFT on the rewarded actions (`SFTTrainer`, prompt-completion, loss on the action only)
or DPO on pairs formed inside each group, a rewarded and an unrewarded action drawn from the same state
(`DPOTrainer`; with a peft config its reference model is the base with the adapter disabled, no copy).
Actions are trained in the form the grammar emits (`training.logprobs.grammar_text`), so a trained
adapter keeps writing what constrained decoding accepts.

Records reach this module as plain dicts: the run store belongs to `search`, which `training` does not
import. `main` reads exported folders, so multi-GPU training (`accelerate launch -m
arts.training.offline`) needs no store at all. Deliberately small: CPU-friendly defaults, a few steps, no evaluation split.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from arts.training.logprobs import grammar_text

COLUMNS = (
    "prompt",
    "completion",
    "reward",
    "run",
    "round",
    "group",
    "node",
    "adapter",
    "model",
    "reward_source",
)
"""The exported columns, TRL's first; `reward_source` says whether TTT rewarded the action during the
search ("ttt") or the export computed it from node scores by the run's reward config ("computed")."""
FORMATS = {"parquet": "rollouts.parquet", "jsonl": "rollouts.jsonl"}


class OfflineConfig(BaseModel):
    """An offline training job (`arts train`)."""

    model_config = ConfigDict(extra="forbid")
    method: Literal["sft", "dpo"] = "sft"
    """sft: imitate the rewarded actions; dpo: prefer rewarded over unrewarded actions of one group."""
    steps: int = Field(20, ge=1)
    """Optimizer steps (TRL `max_steps`)."""
    batch_size: int = Field(2, ge=1)
    """Examples per device per step."""
    lr: float = Field(1e-4, gt=0)
    lora_rank: int = Field(8, ge=1)
    lora_alpha: float = Field(16.0, gt=0)
    beta: float = Field(0.1, gt=0)
    """DPO only: the strength of the implicit KL to the base model."""
    max_length: int = Field(4096, ge=64)
    """Prompt plus action tokens. TRL cuts longer examples at the end, which drops the action, and its
    default (1024) is below a long state prompt; keep this above the longest prompt plus ~100."""
    gradient_checkpointing: bool = False
    """Trade compute for memory (worth it on GPUs for large models; slower on a CPU)."""
    seed: int = 0


def rollout_records(
    rollouts: list[dict[str, Any]], run: str, model: str | None, computed: dict[int, float] | None = None
) -> list[dict[str, Any]]:
    """Records from stored rollouts (dumped dicts): those with a reward (stored, or `computed` by rollout
    id for a run without TTT), actions in grammar form as `action` and as TRL's `completion`."""
    out = []
    for r in rollouts:
        reward, source = r.get("reward"), "ttt"
        if reward is None and computed and r.get("id") in computed:
            reward, source = computed[r["id"]], "computed"
        if reward is None or not r.get("action"):
            continue
        prompt = [{"role": m["role"], "content": m["content"]} for m in r["prompt"]]
        action = grammar_text(r["action"])
        out.append(
            {
                "prompt": prompt, "completion": [{"role": "assistant", "content": action}], "action": action,
                "reward": float(reward), "run": run, "round": r["round"], "group": r["group"],
                "node": r.get("node"), "adapter": r.get("adapter"), "model": model, "reward_source": source,
            }
        )  # fmt: skip
    return out


def export_rollouts(records: list[dict[str, Any]], out: Path, fmt: str = "parquet", card: str = "") -> Path:
    """Write records as OUT/rollouts.parquet (or .jsonl) with a README.md dataset card; returns the file.
    `datasets.load_dataset(str(OUT))` reads it back."""
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r}: give one of {', '.join(FORMATS)}")
    if not records:
        raise ValueError(
            "no rollouts to export: the run made no scored model actions (a baseline such as mutate or "
            "greedy proposes none; an arts run has some once its first round has scored a node)"
        )
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} exists and is not empty; choose another --out or remove it")
    from datasets import Dataset

    out.mkdir(parents=True, exist_ok=True)
    data = Dataset.from_list([{k: rec.get(k) for k in COLUMNS} for rec in records])
    path = out / FORMATS[fmt]
    if fmt == "parquet":
        data.to_parquet(str(path))
    else:
        data.to_json(str(path), lines=True)
    (out / "README.md").write_text(dataset_card(len(records), FORMATS[fmt], card))
    return path


def dataset_card(rows: int, file: str, extra: str = "") -> str:
    """README.md of an exported folder: the data file (so `load_dataset(folder)` finds it) and the columns."""
    return (
        f"---\nconfigs:\n- config_name: default\n  data_files: {file}\ntags: [arts, rollouts, trl]\n---\n"
        f"# arts rollouts\n\n{rows} rewarded actions of an arts scientist, one row each, in TRL's"
        " conversational prompt-completion layout:\n\n"
        "```python\nfrom datasets import load_dataset\nds = load_dataset('path/to/this/folder', split='train')\n```\n\n"
        "Columns: `prompt` (the search state as chat messages), `completion` (the action, one assistant"
        " message, as the grammar emitted it), `reward`, `run`, `round`, `group` (actions drawn from one"
        " state: GRPO's group), `node` (the experiment it produced), `adapter` (the LoRA checkpoint that"
        " sampled it; empty: the base model), `model`, `reward_source` (`ttt`: rewarded during the search;"
        " `computed`: from node scores by the run's reward config at export).\n\n" + extra
    )


def load_records(folders: list[str]) -> list[dict[str, Any]]:
    """Records from folders written by `export_rollouts`, read with `datasets.load_dataset`."""
    from datasets import load_dataset

    records = []
    for folder in folders:
        # rebuilt every time: datasets' cache can take a re-exported folder for the one it read before
        rows = load_dataset(str(folder), split="train", download_mode="force_redownload").to_list()
        records += [{**r, "action": r["completion"][0]["content"]} for r in rows]
    return records


def sft_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Conversational prompt-completion rows of the rewarded actions (reward > 0)."""
    return [
        {"prompt": r["prompt"], "completion": [{"role": "assistant", "content": r["action"]}]}
        for r in records
        if r["reward"] > 0
    ]


def dpo_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Preference rows: within each group (same run, same state), every higher-rewarded action against
    every lower-rewarded one with a different text."""
    rows = []
    key = lambda r: (r["run"], r["group"])  # noqa: E731
    for _, members in itertools.groupby(sorted(records, key=key), key=key):
        for a, b in itertools.permutations(list(members), 2):
            if a["reward"] > b["reward"] and a["action"] != b["action"]:
                rows.append(
                    {
                        "prompt": a["prompt"],
                        "chosen": [{"role": "assistant", "content": a["action"]}],
                        "rejected": [{"role": "assistant", "content": b["action"]}],
                    }
                )
    return rows


def _trainer(config: OfflineConfig, base: Path, rows: list[dict[str, Any]], workdir: str) -> Any:
    """The TRL trainer for `config.method`, LoRA on all linear layers of the base model."""
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoTokenizer

    common = dict(
        output_dir=workdir, max_steps=config.steps, per_device_train_batch_size=config.batch_size,
        learning_rate=config.lr, logging_steps=1, save_strategy="no", report_to="none", seed=config.seed,
        max_length=config.max_length, gradient_checkpointing=config.gradient_checkpointing,
        bf16=torch.cuda.is_available() and torch.cuda.is_bf16_supported(),  # bf16 is 5x slower on CPU
        model_init_kwargs={"dtype": "float32"}, dataloader_pin_memory=torch.cuda.is_available(),
    )  # fmt: skip
    lora = LoraConfig(
        r=config.lora_rank, lora_alpha=config.lora_alpha, target_modules="all-linear", task_type="CAUSAL_LM"
    )
    tokenizer = AutoTokenizer.from_pretrained(base)
    data = Dataset.from_list(rows)
    if config.method == "sft":
        from trl import SFTConfig, SFTTrainer

        args = SFTConfig(**common)
        return SFTTrainer(
            model=str(base), args=args, train_dataset=data, processing_class=tokenizer, peft_config=lora
        )
    from trl import DPOConfig, DPOTrainer

    args = DPOConfig(**common, beta=config.beta)
    return DPOTrainer(
        model=str(base), args=args, train_dataset=data, processing_class=tokenizer, peft_config=lora
    )


def train(records: list[dict[str, Any]], out: Path, config: OfflineConfig, model: str | None = None) -> Path:
    """Train an adapter on `records` into `out` (peft format + README.md). `model` overrides the
    records' base model; all records must share one."""
    from arts.policy.backends.weights import resolve_model
    from arts.training.export import PUBLISHED_EMBEDDED

    specs = {r.get("model") for r in records}
    if model is None and len(specs) > 1:
        raise ValueError(f"the runs used different scientist models {sorted(map(str, specs))}; pass --model")
    spec = model if model is not None else next(iter(specs), None)
    # the embedded model's records name it by its published id; its weights are the package's GGUF
    base = resolve_model(None if spec == PUBLISHED_EMBEDDED else spec)
    rows = sft_rows(records) if config.method == "sft" else dpo_rows(records)
    if not rows:
        what = (
            "rewarded actions"
            if config.method == "sft"
            else "groups with both a rewarded and an unrewarded action"
        )
        raise ValueError(f"no {what} in the {len(records)} records; nothing to train on ({config.method})")
    with tempfile.TemporaryDirectory(prefix="arts-train-") as workdir:
        trainer = _trainer(config, base, rows, workdir)
        result = trainer.train()
        trainer.save_model(str(out))
        if not trainer.is_world_process_zero():  # under accelerate, one process writes the card
            return Path(out)
    card = {
        "method": config.method,
        "rows": len(rows),
        "base_model": str(base),
        "train_loss": result.training_loss,
    }
    (Path(out) / "training.json").write_text(json.dumps({**card, "config": config.model_dump()}, indent=2))
    (Path(out) / "README.md").write_text(
        f"---\nbase_model: {base}\nlibrary_name: peft\ntags: [arts, lora, {config.method}]\n---\n"
        f"# arts scientist adapter ({config.method.upper()}, offline)\n\nTrained with TRL on {len(rows)} "
        f"rows from runs {sorted({r['run'] for r in records})}; train loss {result.training_loss:.4f}.\n"
    )
    return Path(out)


def main(argv: list[str] | None = None) -> int:
    """Train from folders written by `arts rollouts export` (the multi-GPU entry point)."""
    p = argparse.ArgumentParser(prog="python -m arts.training.offline", description=main.__doc__)
    p.add_argument("--data", nargs="+", required=True, help="dataset folders from `arts rollouts export`")
    p.add_argument("--out", required=True)
    p.add_argument("--model", help="base model (default: the one recorded in the data)")
    for name, field in OfflineConfig.model_fields.items():
        if name != "gradient_checkpointing":
            p.add_argument(f"--{name.replace('_', '-')}", type=type(field.default), default=field.default)
    p.add_argument("--gradient-checkpointing", action="store_true")
    args = p.parse_args(argv)
    config = OfflineConfig(**{k: getattr(args, k) for k in OfflineConfig.model_fields})
    train(load_records(args.data), Path(args.out), config, args.model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
