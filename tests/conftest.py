"""Shared fixtures: the real embedded model (loaded once per session) and a tiny random model for speed.

Nothing here downloads: the hub is forced offline before transformers is imported.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def embedded_backend():
    """TransformersBackend on the embedded SmolLM2-135M (converted once into the user cache)."""
    from arts.policy.backends.transformers import TransformersBackend

    return TransformersBackend(seed=0)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised 2-layer Llama (hidden 64) with the SmolLM2 tokenizer and chat template."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from arts.policy.backends.weights import resolve_model

    out = tmp_path_factory.mktemp("tiny-llama")
    tokenizer = AutoTokenizer.from_pretrained(resolve_model(None))
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture
def tiny_backend(tiny_model_dir: Path):
    """A fresh backend on the tiny model (function-scoped: adapter tests change it)."""
    from arts.policy.backends.transformers import TransformersBackend

    return TransformersBackend(str(tiny_model_dir), seed=0)


@pytest.fixture
def rules(monkeypatch):
    """The scripted backend every model slot gets in harness tests (no real model is loaded)."""
    from tests.doubles import RuleBackend

    backend = RuleBackend()

    def make(mc, sink, seed):
        backend.sink = sink
        return backend

    monkeypatch.setattr("arts.search.run.make_backend", make)
    return backend
