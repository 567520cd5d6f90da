"""Warm starts: a search (with or without test-time training) starts from an adapter trained earlier, and
under TTT the scientist may choose among several parents, so the group teaches node choice too."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from arts.search.cli.main import main
from arts.search.methods.targets import parent_ids
from arts.search.state import Node, SearchState
from arts.search.store import Store
from arts.training.grpo import GRPOConfig
from arts.training.ttt import Trainer
from tests.doubles import make_task, rules_executor


def trained_adapter(backend, folder, config=None):
    """An adapter folder as `arts export` writes one: checkpoint 0 of a trainer whose B matrices were moved."""
    trainer = Trainer(backend, config or GRPOConfig(), folder, seed=3)
    with torch.no_grad():
        for name, p in backend.model.named_parameters():
            if ".ttt." in name and "lora_B" in name:
                p.add_(0.01)
    trainer.start()
    return folder / "adapters" / "0"


def test_ttt_starts_training_from_the_given_adapter(tmp_path, tiny_model_dir):
    from arts.policy.backends.transformers import TransformersBackend

    warm = trained_adapter(TransformersBackend(str(tiny_model_dir), seed=0), tmp_path / "earlier")
    fresh = TransformersBackend(str(tiny_model_dir), seed=0)
    info = Trainer(fresh, GRPOConfig(), tmp_path / "run", init=warm).start()
    saved = load_file(tmp_path / "run" / "adapters" / "0" / "adapter_model.safetensors")
    expected = load_file(warm / "adapter_model.safetensors")
    assert saved.keys() == expected.keys() and all(torch.equal(saved[k], expected[k]) for k in saved)
    assert info.state["warm_start"] == str(warm) and not info.resumed


def test_a_warm_start_and_a_resumed_checkpoint_decide_the_adapters_layers_and_rank(tmp_path, tiny_model_dir):
    """A warm start trained with other layers or another rank (an `arts train --method grpo` over runs with
    LoRA on the output head, into a search at the defaults) is taken as it is: the trainer adapts its layers
    at its rank; a resumed run keeps its checkpoint's, whatever the config now says."""
    from arts.policy.backends.transformers import TransformersBackend

    head = GRPOConfig(target_modules=["lm_head"], lora_rank=4, lora_alpha=8.0)
    warm = trained_adapter(TransformersBackend(str(tiny_model_dir), seed=0), tmp_path / "earlier", head)
    trainer = Trainer(TransformersBackend(str(tiny_model_dir), seed=0), GRPOConfig(), tmp_path / "run", init=warm)
    info = trainer.start()
    assert info.layers == "rank 4, alpha 8, lm_head" and trainer.config.target_modules == ["lm_head"]
    saved = load_file(tmp_path / "run" / "adapters" / "0" / "adapter_model.safetensors")
    assert saved.keys() == load_file(warm / "adapter_model.safetensors").keys()
    again = Trainer(TransformersBackend(str(tiny_model_dir), seed=0), GRPOConfig(lora_rank=16), tmp_path / "run")
    resumed = again.start()
    assert resumed.resumed and resumed.layers == info.layers and resumed.weights == info.weights


def test_a_warm_start_of_another_base_model_names_the_fix(tmp_path, tiny_model_dir):
    from safetensors.torch import save_file

    from arts.policy.backends.transformers import TransformersBackend

    warm = trained_adapter(TransformersBackend(str(tiny_model_dir), seed=0), tmp_path / "earlier")
    weights = load_file(warm / "adapter_model.safetensors")  # LoRA A of a model with another hidden size
    save_file({k: torch.zeros(v.shape[0], 32) if "lora_A" in k else v for k, v in weights.items()},
              warm / "adapter_model.safetensors")  # fmt: skip
    other = TransformersBackend(str(tiny_model_dir), seed=0)
    with pytest.raises(ValueError, match="does not fit this model's layers .*give an adapter of the scientist"):
        Trainer(other, GRPOConfig(), tmp_path / "run", init=warm).start()


def test_a_search_samples_its_proposals_from_the_warm_start_adapter(tmp_path, tiny_model_dir, monkeypatch):
    from arts.policy.backends.transformers import TransformersBackend

    warm = trained_adapter(TransformersBackend(str(tiny_model_dir), seed=0), tmp_path / "earlier")
    seen = rules_executor(monkeypatch)
    task = make_task(tmp_path / "task")
    code = main([
        "search", str(task), "--model", str(tiny_model_dir), "--executor-model", "rules", "--evals", "2",
        "--rounds", "1", "--audits", "0", "--set", "scientist.inspect=0", "--set", f"scientist.adapter={warm}",
        "--run-dir", str(tmp_path / "run"),
    ])  # fmt: skip
    assert code == 0
    with Store.open(tmp_path / "run", create=False) as store:
        usage = [e.payload for e in store.events("usage") if e.payload["purpose"] == "propose"]
    assert usage and all(u["adapter"] == "warm-start" for u in usage)
    assert "warm-start" in seen["scientist"].adapters


def test_arts_search_ttt_trains_the_layers_of_its_warm_start(tmp_path, tiny_model_dir, monkeypatch):
    """The user's path: `arts search --ttt` at the default layers, from a warm start of LoRA on the output
    head: the run trains the head at the warm start's rank and says so in its `ttt_start` event."""
    from arts.policy.backends.transformers import TransformersBackend

    head = GRPOConfig(target_modules=["lm_head"], lora_rank=4, lora_alpha=8.0)
    warm = trained_adapter(TransformersBackend(str(tiny_model_dir), seed=0), tmp_path / "earlier", head)
    rules_executor(monkeypatch)
    code = main([
        "search", str(make_task(tmp_path / "task")), "--model", str(tiny_model_dir), "--executor-model", "rules",
        "--evals", "2", "--rounds", "1", "--audits", "0", "--ttt", "--adapter", str(warm),
        "--set", "scientist.inspect=0", "--run-dir", str(tmp_path / "run"),
    ])  # fmt: skip
    assert code == 0
    with Store.open(tmp_path / "run", create=False) as store:
        [start] = [e.payload for e in store.events("ttt_start")]
    assert start["layers"] == "rank 4, alpha 8, lm_head" and not start["resumed"]


def test_under_ttt_a_proposal_may_start_from_the_best_and_the_most_recent_nodes():
    nodes = {1: Node(id=1, status="seed", score=0.1)}
    for i, score in zip(range(2, 7), [0.9, 0.5, 0.8, 0.2, 0.3]):
        nodes[i] = Node(id=i, parent=1, status="valid", score=score)
    state = SearchState(nodes=nodes)
    assert parent_ids(state, [], 1, optimize=True) == [2]  # the small profile: the best node only
    assert parent_ids(state, [], 3, optimize=True) == [2, 4, 6]  # the best two, then the newest
    assert parent_ids(state, [1, 2], 0, optimize=True) == [1, 2]  # 0: every shown node


def test_ttt_starts_from_the_parent_arts_would_choose(tmp_path, monkeypatch):
    """No cost before learning: under --ttt a fresh adapter proposes from the same parents as arts (the
    best node), so arts-ttt differs from arts only by what the updates teach; more parents are a choice."""
    from arts.search.config import load_config

    assert (
        load_config(None, {"ttt.enabled": True}).scientist.parents
        == load_config(None, {}).scientist.parents
        == 1
    )
    assert load_config(None, {"ttt.enabled": True, "scientist.parents": 3}).scientist.parents == 3
