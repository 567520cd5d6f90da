"""Profiles for model size: the same round for a 135M scientist and for a capable one.

What makes a 135M model useful is scaffolding: hypotheses forced by the grammar to a direction and a real
target of the best program, value menus instead of free numbers, the best node as the only parent, short
prompts (`small`). A capable model is held back by it: it would do coordinate search over constants. So
`capable` frees the hypotheses, lets the scientist choose the parent among the shown nodes, drops the
value menus, lets the executor rewrite functions and whole files, and gives prompts more room. The round
is the same under both; only action spaces and prompt budgets differ.

A profile is a set of defaults: any field the user sets (file, `--set`, flag) wins. `auto` picks `small`
for the embedded model and local models under 1B parameters, `capable` for larger ones and for served
models whose size cannot be read (an OpenAI-compatible server: pass `--profile small` for a small one).
The config's own defaults are the `small` profile's values, so `SMALL` is empty.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

SMALL: dict[str, Any] = {}
"""The config's defaults are this profile's values (tuned on the 135M embedded model)."""

CAPABLE: dict[str, Any] = {
    "scientist": {"directed": False, "parents": 0, "max_tokens": 900, "refines": 6},
    "executor": {
        "value_menu": False,
        "constants_first": False,
        "narrow_actions": 0,
        "ops": [
            "replace_function",
            "replace_lines",
            "write_file",
            "set_constant",
            "set_keyword",
            "swap_call",
            "set_return",
        ],
        "max_tokens": 1024,
        "show_chars": 8000,
    },
    "render": {"budget_tokens": 2400, "statement_chars": 2000, "best": 5, "recent": 5},
    "space": {"prompt_tokens": 700},
    "analysis": {"plan_axes": True},
    "investigator": {"narrow": False, "note_each": False, "overview_first": False, "menus_from_notes": False},
}
"""Free hypotheses on the plan's axes, the scientist's choice of parent, no value menus, whole-function
and file edits, larger prompt budgets; an investigator free to pick any action, pattern and note, whose
answer menus hold what the part's material names rather than what its notes name."""

PROFILES = {"small": SMALL, "capable": CAPABLE}
SMALL_BELOW = 1_000_000_000
"""Local models with fewer parameters than this get the small profile under `auto`."""


def parameter_count(model_dir: Path) -> int | None:
    """Parameters of a local Hugging Face model, from its safetensors sizes or else its config; None when
    the folder is not readable as one."""
    files = list(model_dir.glob("*.safetensors"))
    if files:
        cfg = _read_json(model_dir / "config.json") or {}
        width = 2 if str(cfg.get("torch_dtype", "float32")) in ("bfloat16", "float16") else 4
        return sum(f.stat().st_size for f in files) // width
    cfg = _read_json(model_dir / "config.json")
    if not cfg or "hidden_size" not in cfg:
        return None
    h, layers = cfg["hidden_size"], cfg.get("num_hidden_layers", 0)
    inter = cfg.get("intermediate_size", 4 * h)
    return cfg.get("vocab_size", 0) * h + layers * (4 * h * h + 3 * h * inter)


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def auto_profile(backend: str, model: str | None) -> str:
    if model is None and backend in ("transformers", "vllm"):
        return "small"  # the embedded SmolLM2-135M
    if model is not None and backend != "openai" and Path(model).is_dir():
        n = parameter_count(Path(model))
        if n is not None:
            return "small" if n < SMALL_BELOW else "capable"
    return "capable"


def apply_profile(data: dict[str, Any]) -> dict[str, Any]:
    """The config data with its profile resolved (`auto` named) and the profile's defaults filled in
    under whatever the data sets explicitly."""
    out = copy.deepcopy(data)
    name = out.get("profile", "auto")
    if name == "auto":
        model = out.get("scientist_model", {})
        name = auto_profile(model.get("backend", "transformers"), model.get("model"))
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose one of: auto, {', '.join(PROFILES)}")
    out["profile"] = name
    return _under(PROFILES[name], out)


def _under(defaults: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    for key, value in defaults.items():
        if isinstance(value, dict) and isinstance(data.get(key, {}), dict):
            data[key] = _under(value, data.get(key, {}))
        elif key not in data:
            data[key] = copy.deepcopy(value)
    return data
