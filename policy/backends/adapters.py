"""LoRA adapters on a loaded base model: attached, loaded, swapped, disabled and deleted without reloading
the base (peft). `LoraAdapters` is the transformers backend's share of that work; it needs `_base` (the
base model) and keeps `_peft` (the peft model once an adapter exists)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from arts.policy.base import BackendError


def _check_adapter_name(name: str) -> None:
    # peft registers each adapter as a submodule attribute; torch refuses names like "train" or "eval".
    if not name or "." in name or hasattr(torch.nn.Module, name):
        raise BackendError(
            f"adapter name {name!r} is not usable (no dots, not a torch Module attribute); try 'step_3'"
        )


class LoraAdapters:
    """Adapter management over `self._base` (see the module docstring)."""

    _base: Any
    _peft: Any = None

    @property
    def adapters(self) -> list[str]:
        return list(self._peft.peft_config) if self._peft is not None else []

    def add_adapter(self, name: str, config: Any) -> None:
        """A new LoRA adapter from a peft config (for training); the base weights stay frozen."""
        from peft import get_peft_model

        _check_adapter_name(name)
        with warnings.catch_warnings():
            # LoRA on an output head tied to the embeddings: checkpoints leave the embeddings out and a
            # merged export unties the head first (training.checkpoint, training.export), as peft asks
            warnings.filterwarnings("ignore", message=".*tie_word_embeddings.*ensure_weight_tying")
            if self._peft is None:
                self._peft = get_peft_model(self._base, config, adapter_name=name)
            else:
                self._peft.add_adapter(name, config)

    def load_adapter(self, name: str, path: str | Path) -> None:
        """Load (or replace) adapter `name` from a saved peft folder, frozen; `generate(adapter=name)`
        selects it. The argument order (name, path) matches the other backends and `policy.backends.serve`."""
        from peft import PeftModel

        if not (Path(path) / "adapter_config.json").is_file():
            raise BackendError(f"{path} is no LoRA adapter folder (adapter_config.json is missing)")
        _check_adapter_name(name)
        if self._peft is None:
            self._peft = PeftModel.from_pretrained(
                self._base, str(path), adapter_name=name, is_trainable=False
            )
            return
        if name in self._peft.peft_config:
            self._peft.delete_adapter(name)
        self._peft.load_adapter(str(path), adapter_name=name, is_trainable=False)

    def delete_adapter(self, name: str) -> None:
        if name not in self.adapters:
            raise BackendError(f"adapter {name!r} is not loaded; loaded: {self.adapters or 'none'}")
        self._peft.delete_adapter(name)

    @contextmanager
    def _adapter(self, name: str | None) -> Iterator[None]:
        """Run with adapter `name` active, or with every adapter disabled for None. Restores the active
        adapter and every parameter's requires_grad afterwards (peft's switches change them)."""
        if name is not None and name not in self.adapters:
            raise BackendError(f"adapter {name!r} is not loaded; call load_adapter({name!r}, folder) first")
        peft = self._peft
        if peft is None or not peft.peft_config:
            yield
            return
        flags = [(p, p.requires_grad) for p in peft.parameters()]
        active = peft.active_adapter
        previous = active if isinstance(active, str) and active in peft.peft_config else None
        try:
            if name is None:
                with peft.disable_adapter():
                    yield
            else:
                peft.set_adapter(name)
                yield
        finally:
            if name is not None and previous is not None:
                peft.set_adapter(previous)
            for param, flag in flags:
                param.requires_grad_(flag)
