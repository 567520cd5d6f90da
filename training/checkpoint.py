"""Adapter checkpoints: `runs/<id>/adapters/<k>/` written atomically, found and loaded back.

A checkpoint is a peft adapter folder (`adapter_config.json` + `adapter_model.safetensors`, keys and
target modules named as in HF, `base_model_name_or_path` = the plain base model directory) that
`PeftModel.from_pretrained` and vLLM's LoRA loader read as they are, plus what resuming needs:
`optimizer.pt` (AdamW state) and `trainer_state.json` (update index, last trained round, stats).
It is written into a hidden sibling folder and renamed into place, so a SIGKILL leaves either the whole
checkpoint or none. Only the newest checkpoint keeps `optimizer.pt` (resuming needs no older one, and
it is twice the adapter's size).

The adapter is written by hand (`get_peft_model_state_dict` + `safetensors` + the config's
`save_pretrained`) rather than by `PeftModel.save_pretrained`: that one puts a non-default adapter in a
sub-folder named after it and takes the base path from the model, while here the layout is fixed.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")
STATE_FILE = "trainer_state.json"
OPTIMIZER_FILE = "optimizer.pt"


def adapters_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "adapters"


def checkpoints(run_dir: Path) -> list[int]:
    """Indices k of the complete checkpoints `adapters/<k>/`, ascending (staging folders are hidden)."""
    root = adapters_dir(run_dir)
    if not root.is_dir():
        return []
    return sorted(
        int(p.name) for p in root.iterdir() if p.name.isdigit() and (p / ADAPTER_FILES[1]).is_file()
    )


def checkpoint_path(run_dir: Path, k: int) -> Path:
    return adapters_dir(run_dir) / str(k)


def save_checkpoint(
    run_dir: Path,
    k: int,
    model: Any,
    adapter: str,
    base_path: Path,
    optimizer: torch.optim.Optimizer | None,
    state: dict[str, Any],
) -> Path:
    """Write checkpoint k atomically; returns its folder. Drops `optimizer.pt` from older checkpoints."""
    from peft import get_peft_model_state_dict
    from safetensors.torch import save_file

    root = adapters_dir(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    target = checkpoint_path(run_dir, k)
    tmp = Path(tempfile.mkdtemp(prefix=f".staging-{k}-", dir=root))
    try:
        # LoRA on the output head (tied to the embeddings) is still LoRA: the base's embeddings stay out
        weights = get_peft_model_state_dict(model, adapter_name=adapter, save_embedding_layers=False)
        save_file(
            {n: t.detach().cpu().contiguous() for n, t in weights.items()},
            tmp / ADAPTER_FILES[1],
            metadata={"format": "pt"},
        )
        config = copy.deepcopy(model.peft_config[adapter])
        config.base_model_name_or_path, config.inference_mode = str(base_path), True
        config.save_pretrained(str(tmp))  # peft's own serialisation of its config (sets, enums)
        if optimizer is not None:
            torch.save(optimizer.state_dict(), tmp / OPTIMIZER_FILE)
        (tmp / STATE_FILE).write_text(json.dumps({"k": k, **state}, indent=2))
        for file in tmp.iterdir():
            file.chmod(0o644)  # safetensors writes 0600; a checkpoint is an ordinary run file
        tmp.chmod(0o755)
        if target.exists():  # a checkpoint k left by a run killed before it logged the update
            shutil.rmtree(target)
        os.rename(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for older in checkpoints(run_dir):
        if older != k:
            (checkpoint_path(run_dir, older) / OPTIMIZER_FILE).unlink(missing_ok=True)
    return target


def read_state(path: Path) -> dict[str, Any]:
    """The `trainer_state.json` of a checkpoint folder ({} when it has none)."""
    file = Path(path) / STATE_FILE
    return json.loads(file.read_text()) if file.is_file() else {}


def load_weights(model: Any, adapter: str, path: Path) -> None:
    """Copy a checkpoint's LoRA weights into the model's (trainable) adapter `adapter`, in place."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    result = set_peft_model_state_dict(model, load_file(Path(path) / ADAPTER_FILES[1]), adapter_name=adapter)
    missing = [k for k in result.missing_keys if f".{adapter}." in k and "lora_" in k]
    if missing or result.unexpected_keys:
        raise ValueError(
            f"{path} does not match the adapter's layers (missing {missing[:3]}, unexpected "
            f"{list(result.unexpected_keys)[:3]}); was it trained with another lora_rank or target_modules?"
        )


def adapter_shape(path: Path | None) -> dict[str, Any] | None:
    """The LoRA shape of an adapter folder as `GRPOConfig` fields (`lora_rank`, `lora_alpha`,
    `target_modules`, the layers peft resolved), read from its `adapter_config.json`; None without one."""
    file = Path(path) / ADAPTER_FILES[0] if path is not None else None
    if file is None or not file.is_file():
        return None
    config = json.loads(file.read_text())
    targets = config.get("target_modules")
    return {
        "lora_rank": int(config.get("r", 8)),
        "lora_alpha": float(config.get("lora_alpha", 2 * int(config.get("r", 8)))),
        "target_modules": sorted(targets) if isinstance(targets, list) else targets,
    }


def load_optimizer(optimizer: torch.optim.Optimizer, path: Path) -> bool:
    """Restore AdamW state from a checkpoint folder; False when it has none (training restarts the
    moment estimates, the weights are still the checkpoint's)."""
    file = Path(path) / OPTIMIZER_FILE
    if not file.is_file():
        return False
    optimizer.load_state_dict(torch.load(file, weights_only=True))
    return True
