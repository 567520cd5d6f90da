"""Test-time training inside the search: the hook's numbers, rewards and checkpoints, resume after a
SIGKILL, the CLI wiring, and (slow) a real-model TTT search.

The tiny random model stands in for the scientist where the test is about the schedule; the executor
is then `RuleBackend` (its edits are random, so groups carry reward signal). The slow test runs the
embedded model as scientist and executor through `arts search --ttt`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file

from arts.policy.base import BackendError
from arts.policy.scientist import candidate_schema, canonical_action, proposal_schema
from arts.rewards import RewardConfig
from arts.search.cli import _overrides, build_parser
from arts.search.config import SearchConfig, load_config
from arts.search.state import Node, Rollout
from arts.search.store import Store
from tests.test_search import RuleBackend, make_task
from arts.training.grpo import GRPOConfig
from arts.training.logprobs import grammar_text
from arts.training.ttt import TestTimeTraining, weights_digest

ROOT = Path(__file__).resolve().parent.parent
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


def test_ttt_needs_a_backend_it_can_train(tmp_path):
    with pytest.raises(BackendError, match="transformers backend"):
        TestTimeTraining(RuleBackend(), GRPOConfig(), RewardConfig(), tmp_path)


def test_config_and_flags(tmp_path):
    with pytest.raises(ValueError, match="method arts"):
        SearchConfig(ttt=True, method="greedy")
    with pytest.raises(ValueError, match="at least 2 actions"):
        SearchConfig(ttt=True, group=1)
    args = build_parser().parse_args(
        ["search", "t", "--ttt", "--update-every", "2", "--lora-rank", "4", "--lr", "1e-3"]
    )
    cfg = load_config(None, _overrides(args))
    assert cfg.ttt and (cfg.grpo.update_every, cfg.grpo.lora_rank, cfg.grpo.lr) == (2, 4, 1e-3)
    assert not load_config(None, _overrides(build_parser().parse_args(["search", "t"]))).ttt


def fake_search(run_dir: Path, backend) -> SimpleNamespace:
    """The parts of `search.loop.Search` the hook touches, over a real store."""
    store = Store.open(run_dir)
    s = SimpleNamespace(store=store, state=store.load_state(), round=1, log=lambda line: None)
    s.scientist = SimpleNamespace(backend=backend, adapter=None)
    seed = store.add(Node(status="seed", score=-4.0, raw_score=-4.0))
    s.state.nodes[seed.id] = seed
    return s


def draw(s, ttt, index: int) -> Rollout:
    schema = proposal_schema([1], len(CANDIDATES)).model_json_schema()
    action = canonical_action(CANDIDATES[index])
    r = s.store.add(
        Rollout(
            round=1,
            group=1,
            prompt=PROMPT,
            candidates=CANDIDATES,
            drawn=index,
            action=action,
            json_schema=schema,
        )
    )
    s.state.rollouts[r.id] = r
    return ttt.on_rollout(s, r)


def test_hook_records_old_logprobs_rewards_and_checkpoints(tmp_path, tiny_backend):
    s = fake_search(tmp_path / "run", tiny_backend)
    ttt = TestTimeTraining(tiny_backend, GRPOConfig(lr=1e-2), RewardConfig(), tmp_path / "run")
    ttt.resume(s)
    assert s.scientist.adapter == "ttt" and (tmp_path / "run/adapters/0/adapter_model.safetensors").is_file()
    rollouts = [draw(s, ttt, i) for i in (0, 1, 2, 3)]
    for r in rollouts:  # the backend's own masked log-prob of the action under the adapter in force
        tokens = tiny_backend.tokenizer.encode(grammar_text(r.action)) + [tiny_backend.tokenizer.eos_token_id]
        expected = sum(tiny_backend.logprobs(PROMPT, tokens, schema=candidate_schema([1]), adapter="ttt"))
        assert r.old_logprob == pytest.approx(expected, abs=1e-3) and r.adapter == "adapters/0"
        assert s.store.get(Rollout, r.id).old_logprob == r.old_logprob
    for r, (status, score) in zip(
        rollouts, [("valid", -1.0), ("valid", -0.25), ("valid", -7.0), ("invalid", None)]
    ):
        node = s.store.add(Node(parent=1, depth=1, round=1, status=status, score=score, rollout=r.id))
        s.state.nodes[node.id] = node
        r.node = node.id
    ttt.after_round(s)
    assert [s.store.get(Rollout, r.id).reward for r in rollouts] == [1.0, 1.0, 0.0, 0.0]  # vs the seed's -4
    (event,) = s.store.events("update")
    assert event.payload["k"] == 1 and event.payload["groups_used"] == 1 and ttt.label == "adapters/1"
    first, second = tmp_path / "run/adapters/0", tmp_path / "run/adapters/1"
    assert {p.name for p in second.iterdir()} == {
        "adapter_config.json", "adapter_model.safetensors", "optimizer.pt", "trainer_state.json"
    }  # fmt: skip
    assert not (first / "optimizer.pt").exists()  # only the newest checkpoint keeps optimizer state
    assert json.loads((second / "trainer_state.json").read_text())["last_round"] == 1
    config = json.loads((second / "adapter_config.json").read_text())
    assert Path(config["base_model_name_or_path"]) == tiny_backend.path
    assert (
        load_file(first / "adapter_model.safetensors").keys()
        == load_file(second / "adapter_model.safetensors").keys()
    )
    assert weights_digest(load_file(first / "adapter_model.safetensors")) != weights_digest(
        load_file(second / "adapter_model.safetensors")
    )
    s.store.close()


RUNNER = """
import sys
sys.path.insert(0, {root!r})
from pathlib import Path
from arts.policy.backends.transformers import TransformersBackend
from tests.test_search import RuleBackend
import arts.search.run as r
r.make_backend = lambda mc, sink, seed: (
    TransformersBackend({tiny!r}, usage_sink=sink, seed=seed) if mc.backend == "transformers" else RuleBackend(seed, delay={delay})
)
from arts.search.config import SearchConfig
cfg = SearchConfig(task={task!r}, ttt=True, group=4, budget={{"evals": 400, "rounds": {rounds}}},
                   executor_model={{"backend": "rules"}}, grpo={{"lr": 1e-2}},
                   scientist={{"audits": 0, "inspect": 0, "candidates": 2, "max_tokens": 640}})
if {resume}:
    r.resume_run(Path({run!r}))
else:
    r.start_run(cfg, Path({run!r}))
"""


def runner(tmp_path: Path, tiny: Path, rounds: int, resume: bool, delay: float = 0.0) -> list[str]:
    code = RUNNER.format(
        root=str(ROOT), tiny=str(tiny), task=str(tmp_path / "task"), run=str(tmp_path / "run"),
        rounds=rounds, resume=resume, delay=delay,
    )  # fmt: skip
    return [sys.executable, "-c", code]


def test_resume_after_sigkill_continues_from_the_saved_adapter(tmp_path, tiny_model_dir):
    make_task(tmp_path / "task")
    proc = subprocess.Popen(
        runner(tmp_path, tiny_model_dir, rounds=40, resume=False, delay=0.2), stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True, start_new_session=True,
    )  # fmt: skip
    for line in proc.stdout:
        if line.startswith("update 1:"):
            break
    os.killpg(proc.pid, signal.SIGKILL)  # in the next round: after update 1, before update 2
    proc.wait()
    run = tmp_path / "run"
    assert [p.name for p in sorted((run / "adapters").iterdir())] == ["0", "1"]
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
    assert starts[1] == {"k": 1, "resumed": True, "optimizer_restored": True, "weights": saved}
    assert updates == list(range(1, len(updates) + 1)) and len(updates) >= 2, updates
    state = json.loads((run / f"adapters/{updates[-1]}/trainer_state.json").read_text())
    assert state["k"] == updates[-1] and state["last_round"] <= last
    summary = json.loads((run / "summary.json").read_text())
    assert summary["updates"]["count"] == len(updates)


@pytest.mark.slow
def test_real_model_ttt_search_updates_the_scientist(tmp_path):
    """`arts search --ttt` with the embedded model as scientist and executor on a small task.
    Invalid actions are penalised (reward -1) so that a group mixing valid and invalid actions carries
    signal even when no valid one beats the seed."""
    from arts.search.cli import main

    task = make_task(tmp_path / "task")
    code = main([
        "search", str(task), "--ttt", "--group", "3", "-k", "3", "--audits", "0", "--rounds", "3",
        "--evals", "30", "--run-dir", str(tmp_path / "run"), "--set", "scientist.inspect=0",
        "--set", "reward.invalid=-1.0",
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


def test_served_scientist_samples_each_checkpoint_under_a_new_adapter_name(
    tmp_path, tiny_model_dir, monkeypatch
):
    """TTT with the scientist behind an OpenAI-compatible server (`arts serve`, as vLLM would be): the
    weights train in a local copy and every checkpoint is loaded into the server under a new name."""
    import arts.search.run
    from arts.policy.backends.serve import build_app
    from arts.policy.backends.transformers import TransformersBackend
    from arts.search.run import start_run
    from tests.test_openai_backend import serving

    served = TransformersBackend(str(tiny_model_dir), seed=0)
    executor, real_make = RuleBackend(), search.run.make_backend

    def make(mc, sink, seed):
        if mc.model == "rules":
            executor.sink = sink
            return executor
        return real_make(mc, sink, seed)

    monkeypatch.setattr("arts.search.run.make_backend", make)
    with serving(build_app(served, served_name="tiny")) as url:
        cfg = SearchConfig(
            task=str(make_task(tmp_path / "task")),
            group=4,
            ttt=True,
            trainer_model=str(tiny_model_dir),
            scientist_model={"backend": "openai", "base_url": url, "model": "tiny"},
            executor_model={"backend": "transformers", "model": "rules"},
            scientist={"candidates": 2, "audits": 0, "inspect": 0, "max_tokens": 560},
            budget={"evals": 12},
        )
        summary = start_run(cfg, tmp_path / "run", log=lambda line: None)
    with Store.open(tmp_path / "run", create=False) as store:
        names = [e.payload["name"] for e in store.events("adapter_served")]
        rollouts = store.all(Rollout)
    assert summary["updates"]["count"] >= 1 and names[0] == "arts-ttt-0" and "arts-ttt-1" in names
    assert "arts-ttt-1" in served.adapters
    assert any(r.adapter == "adapters/1" for r in rollouts)  # a later round sampled from the served update
