"""Test-time training: the trainer on hand-made groups, the search's schedule (`search.learning`) on a
real ledger, and the whole path through a run (resume after a SIGKILL, a served scientist, and (slow)
the embedded model).

The trainer and the schedule run on the tiny random model: the tests are about numbers, checkpoints and
records, not about what a real model proposes. End to end, the scientist is the tiny model and the
executor is `RuleBackend` (its edits are random, so groups carry reward signal).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file

from arts.policy.base import BackendError
from arts.policy.proposal_schema import candidate_schema, canonical_action, proposal_schema
from arts.rewards import RewardConfig, group_advantages
from arts.search.learning import Learning
from arts.search.ledger import Ledger
from arts.search.state import Node, Rollout
from arts.search.store import Store
from arts.training.grpo import GRPOConfig
from arts.training.ttt import ActionGroup, Trainer, weights_digest
from tests.doubles import make_task, rules_executor, runner, serving

PROMPT = [
    {"role": "system", "content": "You are a research scientist. Answer with JSON only."},
    {"role": "user", "content": "Nodes: 1 (seed, -4). Propose 4 experiments."},
]
CANDIDATES = [
    {
        "parent": 1,
        "hypothesis": f"set X to {x} to move closer to three",
        "axis": "x value",
        "probability": 0.25,
    }
    for x in ("2.0", "2.5", "3.0", "9.0")
]
ACTIONS = [canonical_action(c) for c in CANDIDATES]
QUOTED = canonical_action({"parent": 1, "hypothesis": 'set X to "3" exactly', "axis": "x value"})
"""An action the grammar rejects (string fields allow no escapes): it can be neither scored nor trained on."""
SCHEMA = proposal_schema([1], len(CANDIDATES)).model_json_schema()

LINEAR = "rank 8, alpha 16, down_proj, gate_proj, k_proj, o_proj, q_proj, up_proj, v_proj"
"""The `ttt_start` event's layers of an adapter at the defaults: every linear layer of the body."""


def lora(backend) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in backend.model.named_parameters() if ".ttt." in n}


def group(trainer: Trainer, rewards: list[float], actions: list[str] = ACTIONS) -> ActionGroup:
    """A group as the search hands it over: old log-probs under the adapter in force."""
    return ActionGroup(PROMPT, SCHEMA, actions, rewards, trainer.old_logprobs(PROMPT, SCHEMA, actions))


# ---- the trainer -----------------------------------------------------------------------------------


def test_trainer_needs_a_backend_it_can_train(tmp_path):
    with pytest.raises(BackendError, match="transformers backend"):
        Trainer(SimpleNamespace(name="rules"), GRPOConfig(), tmp_path)


def test_old_logprobs_are_the_backends_masked_logprobs_in_one_batch(tmp_path, tiny_backend):
    trainer = Trainer(tiny_backend, GRPOConfig(), tmp_path / "run")
    info = trainer.start()
    assert (info.k, info.resumed, info.optimizer_restored, info.state) == (0, False, False, {"k": 0})
    assert (tmp_path / "run/adapters/0/adapter_model.safetensors").is_file()
    values = trainer.old_logprobs(PROMPT, SCHEMA, [ACTIONS[0], ACTIONS[1], ACTIONS[0], QUOTED])
    assert values[3] is None and values[0] == values[2]
    for action, got in zip(ACTIONS, values[:2]):
        tokens = tiny_backend.tokenizer.encode(action) + [tiny_backend.tokenizer.eos_token_id]
        expected = tiny_backend.logprobs(PROMPT, tokens, schema=candidate_schema([1]), adapter="ttt")
        assert sum(got) == pytest.approx(sum(expected), abs=1e-3) and len(got) == len(tokens)


def test_an_update_changes_the_adapter_and_writes_the_next_checkpoint(tmp_path, tiny_backend):
    trainer = Trainer(tiny_backend, GRPOConfig(lr=1e-2), tmp_path / "run")
    trainer.start()
    rewards = [1.0, 1.0, 0.0, 0.0]
    assert abs(sum(group_advantages(rewards))) < 1e-9  # what the state alone explains cancels
    before = lora(tiny_backend)
    result = trainer.update([group(trainer, rewards)], note={"last_round": 3, "rollouts": [5, 6, 7, 8]})
    after = lora(tiny_backend)
    assert result.applied and result.k == trainer.k == 1 and trainer.label == "adapters/1"
    assert result.stats.groups_used == 1 and result.stats.samples == 4 and result.scoring_s > 0
    assert any("lora_B" in n and not torch.equal(before[n], after[n]) for n in before)
    first, second = tmp_path / "run/adapters/0", tmp_path / "run/adapters/1"
    assert trainer.checkpoint == second
    assert {p.name for p in second.iterdir()} == {
        "adapter_config.json", "adapter_model.safetensors", "optimizer.pt", "trainer_state.json"
    }  # fmt: skip
    assert not (first / "optimizer.pt").exists()  # only the newest checkpoint keeps optimizer state
    state = json.loads((second / "trainer_state.json").read_text())
    assert state["k"] == 1 and state["last_round"] == 3 and state["rollouts"] == [5, 6, 7, 8]
    assert state["stats"] == result.stats.model_dump()
    config = json.loads((second / "adapter_config.json").read_text())
    assert Path(config["base_model_name_or_path"]) == tiny_backend.path
    saved = load_file(second / "adapter_model.safetensors")
    assert saved.keys() == load_file(first / "adapter_model.safetensors").keys()
    assert weights_digest(saved) != weights_digest(load_file(first / "adapter_model.safetensors"))


def test_equal_rewards_change_nothing_and_save_nothing(tmp_path, tiny_backend):
    trainer = Trainer(tiny_backend, GRPOConfig(lr=1e-2), tmp_path / "run")
    trainer.start()
    before = lora(tiny_backend)
    result = trainer.update([group(trainer, [1.0, 1.0, 1.0, 1.0])])
    assert not result.applied and (result.stats.groups_used, result.stats.groups_skipped) == (0, 1)
    assert trainer.k == 0 and not (tmp_path / "run/adapters/1").exists()
    assert all(torch.equal(before[n], t) for n, t in lora(tiny_backend).items())


def test_a_reward_raises_the_probability_of_the_rewarded_action(tmp_path, tiny_backend):
    trainer = Trainer(tiny_backend, GRPOConfig(lr=1e-2, steps=1), tmp_path / "run")
    trainer.start()
    start = [sum(v) for v in trainer.old_logprobs(PROMPT, SCHEMA, ACTIONS)]
    for _ in range(3):
        assert trainer.update([group(trainer, [1.0, 0.0, 0.0, 0.0])]).applied
    end = [sum(v) for v in trainer.old_logprobs(PROMPT, SCHEMA, ACTIONS)]
    assert end[0] > start[0] + 0.1
    assert sum(end[1:]) < sum(start[1:])


def test_start_resumes_the_newest_checkpoint_with_its_optimizer(tmp_path, tiny_backend, tiny_model_dir):
    from arts.policy.backends.transformers import TransformersBackend

    first = Trainer(tiny_backend, GRPOConfig(lr=1e-2), tmp_path / "run")
    first.start()
    first.update([group(first, [1.0, 0.0, 1.0, 0.0])], note={"last_round": 2})
    other = TransformersBackend(str(tiny_model_dir), seed=0)
    again = Trainer(other, GRPOConfig(lr=1e-2), tmp_path / "run")
    info = again.start()
    assert (info.k, info.resumed, info.optimizer_restored) == (1, True, True)
    assert info.state["last_round"] == 2 and again.label == "adapters/1"
    assert info.weights == weights_digest(load_file(tmp_path / "run/adapters/1/adapter_model.safetensors"))
    assert all(torch.equal(t, lora(tiny_backend)[n]) for n, t in lora(other).items())
    saved, restored = first.optimizer.state_dict()["state"], again.optimizer.state_dict()["state"]
    assert saved.keys() == restored.keys() and len(saved) > 0
    for i in saved:
        assert torch.equal(saved[i]["exp_avg"], restored[i]["exp_avg"])
        assert torch.equal(saved[i]["exp_avg_sq"], restored[i]["exp_avg_sq"])


def test_lora_on_the_output_head_alone_learns_saves_no_embeddings_and_resumes(tmp_path, tiny_backend, tiny_model_dir):
    """`ttt.grpo.target_modules = ["lm_head"]`: the head is tied to the embeddings, which peft would save
    whole beside the LoRA; a checkpoint holds the head's LoRA alone, and a new process resumes from it."""
    from arts.policy.backends.transformers import TransformersBackend

    config = GRPOConfig(lr=1e-2, steps=2, target_modules=["lm_head"])
    trainer = Trainer(tiny_backend, config, tmp_path / "run")
    trainer.start()
    start = [sum(v) for v in trainer.old_logprobs(PROMPT, SCHEMA, ACTIONS)]
    for _ in range(2):
        assert trainer.update([group(trainer, [1.0, 0.0, 0.0, 0.0])]).applied
    assert sum(trainer.old_logprobs(PROMPT, SCHEMA, ACTIONS)[0]) > start[0] + 0.1
    saved = load_file(tmp_path / "run/adapters/2/adapter_model.safetensors")
    assert saved and all("lm_head" in n and "lora_" in n for n in saved)
    other = TransformersBackend(str(tiny_model_dir), seed=0)
    again = Trainer(other, config, tmp_path / "run")
    info = again.start()
    assert info.k == 2 and info.weights == weights_digest(saved)
    assert all(torch.equal(t, lora(tiny_backend)[n]) for n, t in lora(other).items())


# ---- the schedule in the search --------------------------------------------------------------------


class Served:
    """A serving backend's adapter loading, recorded (each folder must be a complete checkpoint)."""

    name = "served"

    def __init__(self) -> None:
        self.loaded: list[tuple[str, Path]] = []

    def load_adapter(self, name: str, path: Path) -> None:
        assert (Path(path) / "adapter_model.safetensors").is_file()
        self.loaded.append((name, Path(path)))


def learning(run_dir: Path, backend, update_every: int = 1, serving=None) -> tuple[Learning, list, list]:
    """Learning over a fresh or existing store (a new seed node on a fresh one); returns it with the
    adapter names it asked the agents to use and its log lines."""
    fresh = not (run_dir / "arts.db").exists()
    ledger = Ledger(Store.open(run_dir))
    if fresh:
        ledger.add(Node(status="seed", score=-4.0, raw_score=-4.0))
    uses, lines = [], []
    trainer = Trainer(backend, GRPOConfig(lr=1e-2), run_dir)
    ttt = Learning(
        trainer,
        ledger,
        RewardConfig(),
        update_every,
        use_adapter=uses.append,
        log=lines.append,
        serving=serving,
    )
    ttt.start()
    return ttt, uses, lines


def draw(ttt: Learning, round: int, action: str) -> Rollout:
    index = ACTIONS.index(action) if action in ACTIONS else 0
    r = Rollout(
        round=round, group=round, prompt=PROMPT, candidates=CANDIDATES, drawn=index, action=action,
        json_schema=SCHEMA,
    )  # fmt: skip
    return ttt.score(ttt.ledger.add(r))


def end_round(ttt: Learning, round: int) -> None:
    """What the arts round does last: reward the finished groups, then update when M rounds have passed."""
    ttt.reward(round)
    ttt.update(round)


def outcome(ttt: Learning, rollout: Rollout, score: float | None, reason: str = "") -> Node:
    status = "valid" if score is not None else "invalid"
    node = ttt.ledger.add(
        Node(
            parent=1,
            depth=1,
            round=rollout.round,
            status=status,
            score=score,
            rollout=rollout.id,
            reason=reason,
        )
    )
    rollout.node = node.id
    ttt.ledger.update(rollout)
    return node


def payloads(ttt: Learning, kind: str) -> list[dict]:
    return [e.payload for e in ttt.ledger.store.events(kind)]


def test_each_rollout_gets_its_old_logprob_and_adapter_from_one_batch_per_proposal(tmp_path, tiny_backend):
    ttt, uses, _ = learning(tmp_path / "run", tiny_backend)
    assert uses == ["ttt"] and payloads(ttt, "ttt_start")[0]["k"] == 0
    calls = []
    score = ttt.trainer.old_logprobs
    ttt.trainer.old_logprobs = lambda *a: calls.append(a) or score(*a)
    rollouts = [draw(ttt, 1, a) for a in (ACTIONS[0], ACTIONS[2], ACTIONS[0], ACTIONS[3])]
    assert len(calls) == 1  # the first draw scored every candidate of the proposal
    expected = [sum(v) for v in score(PROMPT, SCHEMA, ACTIONS)]
    for r, i in zip(rollouts, (0, 2, 0, 3)):
        stored = ttt.ledger.store.get(Rollout, r.id)
        assert stored.old_logprob == pytest.approx(expected[i], abs=1e-4) and stored.adapter == "adapters/0"
        assert ttt.ledger.state.rollouts[r.id] == stored
    unscorable = draw(ttt, 1, QUOTED)
    assert unscorable.old_logprob is None and payloads(ttt, "ttt_unscorable")[0]["rollout"] == unscorable.id


def test_groups_are_rewarded_against_their_parents_and_trained_every_m_rounds(tmp_path, tiny_backend):
    ttt, uses, lines = learning(tmp_path / "run", tiny_backend, update_every=2)
    first = [draw(ttt, 1, a) for a in ACTIONS]
    for r, score in zip(first, [-1.0, -0.25, -7.0, None]):
        outcome(ttt, r, score)
    end_round(ttt, 1)
    assert [ttt.ledger.store.get(Rollout, r.id).reward for r in first] == [
        1.0,
        1.0,
        0.0,
        0.0,
    ]  # vs the seed's -4
    assert payloads(ttt, "update") == [] and ttt.ledger.meta("ttt_last_round") is None  # M = 2
    second = [draw(ttt, 2, a) for a in (ACTIONS[2], ACTIONS[3], QUOTED, ACTIONS[0])]
    for r, score, reason in zip(second, [-0.5, -5.0, -0.1, None], ["", "", "", "interrupted (killed)"]):
        outcome(ttt, r, score, reason)
    end_round(ttt, 2)
    # against the parent (the seed, -4): -0.5 is below most scores seen before the group and still paid
    assert [ttt.ledger.store.get(Rollout, r.id).reward for r in second] == [1.0, 0.0, 1.0, None]
    assert [(p["group"], p["round"], p["history"]) for p in payloads(ttt, "rewards")] == [
        (1, 1, 1),
        (2, 2, 4),
    ]
    (event,) = payloads(ttt, "update")
    assert (event["k"], event["round"], event["adapter"], event["groups_used"]) == (1, 2, "adapters/1", 2)
    assert event["samples"] == 6  # neither the unscorable nor the interrupted action is trained on
    assert ttt.ledger.meta("ttt_last_round") == 2 and ttt.ledger.store.get_meta("ttt_last_round") == 2
    state = json.loads((tmp_path / "run/adapters/1/trainer_state.json").read_text())
    assert state["last_round"] == 2 and sorted(state["rollouts"]) == sorted(r.id for r in first + second[:2])
    assert uses == ["ttt", "ttt"] and lines[-1].startswith("update 1: loss")
    assert draw(ttt, 3, ACTIONS[1]).adapter == "adapters/1"


def test_a_round_without_signal_skips_the_update(tmp_path, tiny_backend):
    ttt, uses, lines = learning(tmp_path / "run", tiny_backend)
    for r in [draw(ttt, 1, a) for a in ACTIONS[:2]]:
        outcome(ttt, r, None)
    end_round(ttt, 1)
    (skipped,) = payloads(ttt, "update_skipped")
    assert (skipped["round"], skipped["since_round"], skipped["groups_skipped"]) == (1, 0, 1)
    assert ttt.ledger.meta("ttt_last_round") == 1 and payloads(ttt, "update") == []
    assert lines == ["update skipped: 1 group(s) without signal (all rewards equal) since round 0"]
    assert uses == ["ttt"] and not (tmp_path / "run/adapters/1").exists()


def test_a_served_scientist_loads_each_checkpoint_under_a_new_name(tmp_path, tiny_backend):
    with pytest.raises(BackendError, match="cannot load adapters"):
        learning(tmp_path / "refused", tiny_backend, serving=SimpleNamespace(name="plain"))
    served = Served()
    ttt, uses, _ = learning(tmp_path / "run", tiny_backend, serving=served)
    for r, score in zip([draw(ttt, 1, a) for a in ACTIONS[:2]], [-1.0, -9.0]):
        outcome(ttt, r, score)
    end_round(ttt, 1)
    run = tmp_path / "run"
    assert served.loaded == [("arts-ttt-0", run / "adapters/0"), ("arts-ttt-1", run / "adapters/1")]
    assert uses == ["arts-ttt-0", "arts-ttt-1"]
    assert payloads(ttt, "adapter_served") == [{"k": 0, "name": "arts-ttt-0"}, {"k": 1, "name": "arts-ttt-1"}]


def test_a_restart_continues_from_the_checkpoint_and_rescores_old_logprobs(
    tmp_path, tiny_backend, tiny_model_dir
):
    from arts.policy.backends.transformers import TransformersBackend

    run = tmp_path / "run"
    ttt, _, _ = learning(run, tiny_backend)
    for r, score in zip([draw(ttt, 1, a) for a in ACTIONS], [-1.0, -9.0, -0.5, -8.0]):
        outcome(ttt, r, score)
    end_round(ttt, 1)
    second = [draw(ttt, 2, a) for a in ACTIONS]  # sampled under adapters/1, then the process dies
    for r, score in zip(second, [-0.1, -9.0, -0.2, -8.0]):
        outcome(ttt, r, score)
    shifted = second[3].model_copy(update={"old_logprob": second[3].old_logprob + 0.5})
    ttt.ledger.update(shifted)  # a stored old log-prob the adapter no longer gives
    ttt.ledger.store.close()

    again, uses, _ = learning(run, TransformersBackend(str(tiny_model_dir), seed=0))
    start = payloads(again, "ttt_start")[-1]
    saved = weights_digest(load_file(run / "adapters/1/adapter_model.safetensors"))
    assert start == {"k": 1, "resumed": True, "optimizer_restored": True, "weights": saved, "layers": LINEAR}
    assert again.last_round == 1 and uses == ["ttt"]
    end_round(again, 2)
    assert [p["k"] for p in payloads(again, "update")] == [1, 2]
    (drift,) = payloads(again, "ttt_old_logprob_drift")  # only the shifted action's sum disagrees
    assert drift["group"] == 2 and drift["max_abs"] == pytest.approx(0.5, abs=1e-3)


def test_a_checkpoint_whose_update_event_was_lost_is_logged_again(tmp_path, tiny_backend):
    run = tmp_path / "run"
    trainer = Trainer(tiny_backend, GRPOConfig(lr=1e-2), run)
    trainer.start()
    result = trainer.update([group(trainer, [0.0, 1.0, 0.0, 0.0])], note={"last_round": 3, "rollouts": []})
    ttt, _, _ = learning(run, tiny_backend)  # killed after the checkpoint, before its event
    (event,) = payloads(ttt, "update")
    assert event == {
        "k": 1, "round": 3, "adapter": "adapters/1", **result.stats.model_dump(),
        "scoring_s": result.scoring_s, "recovered": True,
    }  # fmt: skip
    assert ttt.last_round == 3 and ttt.trainer.label == "adapters/1"


# ---- through a run ---------------------------------------------------------------------------------


def test_ttt_config_and_flags():
    from arts.search.cli.main import build_parser
    from arts.search.cli.search import overrides as _overrides
    from arts.search.config import SearchConfig, load_config
    from arts.search.run import method_of

    with pytest.raises(ValueError, match="method arts"):
        method_of(SearchConfig(ttt={"enabled": True}, method="greedy"))
    with pytest.raises(ValueError, match="at least 2 actions"):
        SearchConfig(ttt={"enabled": True}, group=1)
    args = build_parser().parse_args(
        ["search", "t", "--ttt", "--update-every", "2", "--lora-rank", "4", "--lr", "1e-3"]
    )
    cfg = load_config(None, _overrides(args))
    assert cfg.ttt.enabled and (cfg.ttt.grpo.update_every, cfg.ttt.grpo.lora_rank, cfg.ttt.grpo.lr) == (
        2,
        4,
        1e-3,
    )
    assert not load_config(None, _overrides(build_parser().parse_args(["search", "t"]))).ttt.enabled
    hot = build_parser().parse_args(["search", "t", "--ttt", "--set", "scientist.choice_heat=2"])
    assert load_config(None, _overrides(hot)).scientist.choice_heat == 2.0
    own = build_parser().parse_args(["search", "t", "--ttt", "--set", "ttt.grpo.weight_share=false"])
    assert load_config(None, _overrides(own)).ttt.grpo.weight_share is False
    head = build_parser().parse_args(["search", "t", "--ttt", "--set", 'ttt.grpo.target_modules=["lm_head"]'])
    assert load_config(None, _overrides(head)).ttt.grpo.target_modules == ["lm_head"]


def test_resume_after_sigkill_continues_from_the_saved_adapter(tmp_path, tiny_model_dir):
    make_task(tmp_path / "task")
    proc = subprocess.Popen(
        runner(tmp_path, tiny_model_dir, rounds=40, resume=False, delay=0.2), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    for line in proc.stdout:
        if line.startswith("update 1:"):
            break
    os.killpg(proc.pid, signal.SIGKILL)  # in the next round: after update 1, before update 2
    err = proc.stderr.read()
    proc.wait()
    run = tmp_path / "run"
    assert [p.name for p in sorted((run / "adapters").iterdir())] == ["0", "1"], err[-2000:]
    saved = weights_digest(load_file(run / "adapters/1/adapter_model.safetensors"))
    config = (run / "config.toml").read_text()
    (run / "config.toml").write_text(config.replace("rounds = 40", "rounds = 8"))
    out = subprocess.run(
        runner(tmp_path, tiny_model_dir, 8, resume=True), capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-2000:]
    with Store.open(run, create=False) as store:
        starts = [e.payload for e in store.events("ttt_start")]
        updates = [e.payload["k"] for e in store.events("update")]
        last = store.get_meta("round")
    assert starts[1] == {"k": 1, "resumed": True, "optimizer_restored": True, "weights": saved, "layers": LINEAR}
    assert updates == list(range(1, len(updates) + 1)) and len(updates) >= 2, updates
    state = json.loads((run / f"adapters/{updates[-1]}/trainer_state.json").read_text())
    assert state["k"] == updates[-1] and state["last_round"] <= last
    summary = json.loads((run / "summary.json").read_text())
    assert summary["updates"]["count"] == len(updates)


def test_served_scientist_samples_each_checkpoint_under_a_new_adapter_name(
    tmp_path, tiny_model_dir, monkeypatch
):
    """TTT with the scientist behind an OpenAI-compatible server (`arts serve`, as vLLM would be): the
    weights train in a local copy and every checkpoint is loaded into the server under a new name."""
    from arts.policy.backends.serve import build_app
    from arts.policy.backends.transformers import TransformersBackend
    from arts.search.config import SearchConfig
    from arts.search.run import start_run

    served = TransformersBackend(str(tiny_model_dir), seed=0)
    rules_executor(monkeypatch)
    with serving(build_app(served, served_name="tiny")) as url:
        cfg = SearchConfig(
            task=str(make_task(tmp_path / "task")),
            group=4,
            ttt={"enabled": True, "trainer_model": str(tiny_model_dir)},
            scientist_model={"backend": "openai", "base_url": url, "model": "tiny"},
            executor_model={"backend": "transformers", "model": "rules"},
            scientist={"candidates": 2, "audits": 1, "inspect": 1, "max_tokens": 560},
            # a served model gets the capable profile's prompt budgets; this one has a 2048-token context
            # and a tokenizer that makes more tokens of a prompt than the served-model estimate counts
            render={"budget_tokens": 600},
            space={"prompt_tokens": 200},
            budget={"evals": 12},
        )
        summary = start_run(cfg, tmp_path / "run", log=lambda line: None)
    with Store.open(tmp_path / "run", create=False) as store:
        events = store.events()
        rollouts = store.all(Rollout)
    names = [e.payload["name"] for e in events if e.kind == "adapter_served"]
    assert summary["updates"]["count"] >= 1 and names[0] == "arts-ttt-0" and "arts-ttt-1" in names
    assert "arts-ttt-1" in served.adapters
    assert any(r.adapter == "adapters/1" for r in rollouts)  # a later round sampled from the served update
    # every scientist call (audit, inspection, proposal) ran under the adapter in force at the time
    in_force, checked = None, set()
    for e in events:
        if e.kind == "adapter_served":
            in_force = e.payload["name"]
        elif e.kind == "usage" and e.payload["purpose"] in ("audit", "inspect", "propose"):
            assert e.payload["adapter"] == in_force, (e.payload["purpose"], e.payload["adapter"], in_force)
            checked.add(e.payload["purpose"])
    assert checked == {"audit", "inspect", "propose"}
    # under TTT the proposal grammar offers several parents, and the trained action names the one drawn
    offered = [_parent_enum(r.json_schema) for r in rollouts]
    assert max(len(o) for o in offered) > 1
    assert all(json.loads(r.action)["parent"] in o for r, o in zip(rollouts, offered))


def _parent_enum(schema: dict) -> list[int]:
    """The parent ids a stored proposal schema allowed (the enum of its candidates' `parent` field)."""
    found: list[int] = []

    def walk(node):
        if isinstance(node, dict):
            parent = node.get("properties", {}).get("parent")
            if isinstance(parent, dict):
                found.extend(parent.get("enum", [parent["const"]] if "const" in parent else []))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(schema)
    return sorted(set(found))


@pytest.mark.slow
def test_real_model_ttt_search_updates_the_scientist(tmp_path):
    """`arts search --ttt` with the embedded model as scientist and executor on a small task.
    Invalid actions are penalised (reward -1) so that a group mixing valid and invalid actions carries
    signal even when no valid one beats the seed."""
    from arts.search.cli.main import main

    task = make_task(tmp_path / "task")
    code = main([
        "search", str(task), "--ttt", "--group", "3", "-k", "3", "--audits", "0", "--rounds", "3",
        "--evals", "30", "--run-dir", str(tmp_path / "run"), "--set", "scientist.inspect=0",
        "--set", "ttt.reward.invalid=-1.0",
    ])  # fmt: skip
    assert code == 0
    run = tmp_path / "run"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["updates"]["count"] >= 1
    with Store.open(run, create=False) as store:
        (first, *_) = store.events("update")
        rollouts = store.load_state().rollouts.values()
    assert first.payload["k"] == 1 and first.payload["groups_used"] >= 1
    assert (run / "adapters/1/adapter_model.safetensors").is_file()
    assert all(r.old_logprob is not None and torch.isfinite(torch.tensor(r.old_logprob)) for r in rollouts)
    assert {r.adapter for r in rollouts} >= {"adapters/0", "adapters/1"}
