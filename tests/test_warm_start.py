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
from tests.doubles import RuleBackend, make_task


def trained_adapter(backend, folder):
    """An adapter folder as `arts export` writes one: checkpoint 0 of a trainer whose B matrices were moved."""
    trainer = Trainer(backend, GRPOConfig(), folder, seed=3)
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


def test_a_warm_start_of_another_rank_names_the_fix(tmp_path, tiny_model_dir):
    from arts.policy.backends.transformers import TransformersBackend

    warm = trained_adapter(TransformersBackend(str(tiny_model_dir), seed=0), tmp_path / "earlier")
    other = TransformersBackend(str(tiny_model_dir), seed=0)
    with pytest.raises(ValueError, match="lora_rank 8"):
        Trainer(other, GRPOConfig(lora_rank=4), tmp_path / "run", init=warm).start()


def test_a_search_samples_its_proposals_from_the_warm_start_adapter(tmp_path, tiny_model_dir, monkeypatch):
    import arts.search.run
    from arts.policy.backends.transformers import TransformersBackend

    warm = trained_adapter(TransformersBackend(str(tiny_model_dir), seed=0), tmp_path / "earlier")
    executor, real_make, seen = RuleBackend(), arts.search.run.make_backend, {}

    def make(mc, sink, seed):
        if mc.model == "rules":
            executor.sink = sink
            return executor
        seen["scientist"] = real_make(mc, sink, seed)
        return seen["scientist"]

    monkeypatch.setattr("arts.search.run.make_backend", make)
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
