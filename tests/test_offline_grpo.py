"""`arts train --method grpo`: a run's stored groups replayed through the test-time update, on their own
sampled tokens, into an adapter that `--adapter` loads; refused where no group carries signal."""

from __future__ import annotations

import json

import torch

from arts.search.cli.main import main
from arts.search.config import SearchConfig, to_toml
from arts.search.state import Node, Rollout
from arts.search.store import Store
from arts.training.credit import base_span_logprobs
from arts.training.grpo import GRPOConfig, lora_config
from arts.training.logprobs import span_targets
from arts.training.offline_grpo import interleaved
from arts.training.ttt import ADAPTER
from tests.doubles import sampled_proposal


def stored_run(tmp_path, backend, rewards: list[float]):
    """A run on the tiny model whose one group holds the drawn candidates of one sampled proposal."""
    torch.manual_seed(0)
    backend.add_adapter(ADAPTER, lora_config(GRPOConfig()))  # fresh LoRA: the base policy samples
    prop = sampled_proposal(backend)
    run = tmp_path / "run"
    cfg = SearchConfig(task="toy", scientist_model={"model": str(backend.path)}, scientist={"temperature": 1.0},
                       ttt={"grpo": {"lr": 1e-2}})  # the run's settings, which the replay takes  # fmt: skip
    run.mkdir()
    (run / "config.toml").write_text(to_toml(cfg))
    with Store.open(run) as store:
        store.add(Node(status="seed", score=0.0, raw_score=0.0))
        for span, reward in zip(prop.spans, rewards):
            store.add(Rollout(round=1, group=1, prompt=prop.messages, json_schema=prop.json_schema,
                              action="candidate", reward=reward, tokens=prop.completion.token_ids,
                              span=list(span)))  # fmt: skip
    return run, prop


def drawn_logprob(backend, prop, adapter: str | None) -> float:
    """The first drawn candidate's summed log-prob, under `adapter` (None: the base weights)."""
    from arts.training.logprobs import adapter_scope, target_logprobs

    if adapter is None:
        return base_span_logprobs(backend, prop.messages, prop.json_schema, prop.completion.token_ids,
                                  [prop.spans[0]])[0]  # fmt: skip
    targets = span_targets(
        backend, prop.json_schema, prop.completion.token_ids, [(0, len(prop.completion.token_ids))]
    )
    with torch.no_grad(), adapter_scope(backend.model, adapter):
        values, _ = target_logprobs(backend.model, backend.encode_prompt(prop.messages), targets, 0)
    s, e = prop.spans[0]
    return float(values[0, s:e].sum())


def test_grpo_training_replays_the_groups_into_an_adapter_that_raises_what_paid(
    tmp_path, tiny_backend, capsys
):
    run, prop = stored_run(tmp_path, tiny_backend, [1.0, 0.0, 0.0])
    out = tmp_path / "warm"
    argv = ["train", "--from", str(run), "--out", str(out), "--method", "grpo", "--steps", "1"]
    assert main(argv) == 0
    card = json.loads((out / "training.json").read_text())
    assert card["method"] == "grpo" and card["updates"] == 1 and card["per_update"][0]["kl"] > 0
    assert (out / "adapter_config.json").is_file() and not (out / "optimizer.pt").exists()
    tiny_backend.load_adapter("warm", out)
    assert drawn_logprob(tiny_backend, prop, "warm") > drawn_logprob(tiny_backend, prop, None)


def test_grpo_training_refuses_runs_whose_groups_carry_no_signal(tmp_path, tiny_backend, capsys):
    run, _ = stored_run(tmp_path, tiny_backend, [1.0, 1.0, 1.0])
    argv = ["train", "--from", str(run), "--out", str(tmp_path / "warm"), "--method", "grpo"]
    assert main(argv) != 0
    assert "GRPO has nothing to learn from" in capsys.readouterr().err
    assert not (tmp_path / "warm").exists()


def test_groups_are_taken_round_by_round_across_runs():
    groups = [{"run": r, "round": k} for r in ("a", "b") for k in (1, 2, 3)]
    assert [(g["run"], g["round"]) for g in interleaved(groups)] == [
        ("a", 1), ("b", 1), ("a", 2), ("b", 2), ("a", 3), ("b", 3)
    ]  # fmt: skip
