"""Learning you can see: before each update, the probability the adapter in force gives a watched class of
moves on a prompt it has not trained on, against the base model's (`training.watch`, `ttt.watch`)."""

from __future__ import annotations

import json

import pytest

from arts.policy.proposal_schema import canonical_action, proposal_schema
from arts.rewards import RewardConfig
from arts.search.learning import Learning
from arts.search.ledger import Ledger
from arts.search.state import Node, Rollout
from arts.search.store import Store
from arts.tasks.probe import in_class
from arts.training.grpo import GRPOConfig
from arts.training.ttt import ADAPTER, Trainer
from arts.training.watch import class_logprobs, head, measure, stated_probabilities

PROMPT = [
    {"role": "system", "content": "You are a research scientist. Answer with JSON only."},
    {"role": "user", "content": "Nodes: 1 (seed, -4). Propose 4 experiments."},
]
MOVES = ["increase X by half", "decrease X by half", "rewrite f to return 3", "tune k of fit"]
CANDIDATES = [{"parent": 1, "hypothesis": h, "axis": "value", "probability": 0.25} for h in MOVES]
SCHEMA = proposal_schema([1], len(CANDIDATES)).model_json_schema()


def test_a_fresh_adapter_gives_a_class_the_base_models_probability(tmp_path, tiny_backend):
    trainer = Trainer(tiny_backend, GRPOConfig(), tmp_path / "run")
    trainer.start()
    tuned, base = class_logprobs(tiny_backend, PROMPT, SCHEMA, "increase X", 1, ADAPTER)
    assert tuned == base and tuned < 0


def _rounds(tmp_path, backend, config: GRPOConfig, pays, log=lambda line: None) -> Ledger:
    """Three TTT rounds on `PROMPT`, every candidate drawn, `pays(hypothesis, round)` scoring -1 (else
    -9), with the watch on `increase X`; the run's ledger."""
    ledger = Ledger(Store.open(tmp_path / "run"))
    ledger.add(Node(status="seed", score=-4.0, raw_score=-4.0))
    trainer = Trainer(backend, config, tmp_path / "run")
    ttt = Learning(trainer, ledger, RewardConfig(), 1, use_adapter=lambda name: None, log=log, watch="increase X")
    ttt.start()
    for k in (1, 2, 3):
        rollouts = []
        for i, c in enumerate(CANDIDATES):
            r = ledger.add(Rollout(round=k, group=k, prompt=PROMPT, candidates=CANDIDATES, drawn=i,
                                   action=canonical_action(c), json_schema=SCHEMA))  # fmt: skip
            score = -1.0 if pays(c["hypothesis"], k) else -9.0
            node = ledger.add(Node(parent=1, depth=1, round=k, status="valid", score=score, rollout=r.id))
            r.node = node.id
            rollouts.append(ledger.update(r))
        ttt.sampled(rollouts)
        ttt.reward(k)
        ttt.update(k)
    return ledger


def test_the_watched_class_grows_under_the_adapter_that_was_rewarded_for_it(tmp_path, tiny_backend):
    """`increase X` pays every round: at the second update the adapter trained on round 1 gives it more
    probability than the base on round 2's prompt, which it has not trained on."""
    lines: list[str] = []
    pays = lambda h, k: h.startswith("increase X")  # noqa: E731
    ledger = _rounds(tmp_path, tiny_backend, GRPOConfig(lr=1e-2), pays, lines.append)
    watched = [e.payload for e in ledger.events("watch")]
    assert [w["k"] for w in watched] == [0, 1, 2] and all(w["scored"] for w in watched)
    assert abs(watched[0]["ratio"] - 1.0) < 1e-6  # no update yet: the base model's own probability
    assert watched[-1]["ratio"] > watched[0]["ratio"] and watched[-1]["ratio"] > 1.2
    assert any(line.startswith("watch 'increase X': x") for line in lines)


def test_each_checkpoint_is_watched_once_and_a_skipped_update_adds_no_reading(tmp_path, tiny_backend):
    """Round 2 gives no signal (every experiment scores alike), so its update is skipped and round 3 still
    samples from checkpoint 1, which round 2 has read already: the watch reads checkpoints 0 and 1 once
    each, and the run's events say which round read which."""
    pays = lambda h, k: h.startswith("increase X") and k != 2  # noqa: E731
    ledger = _rounds(tmp_path, tiny_backend, GRPOConfig(), pays)
    assert [e.payload["round"] for e in ledger.events("update_skipped")] == [2]
    watched = [(e.payload["round"], e.payload["k"]) for e in ledger.events("watch")]
    assert watched == [(1, 0), (2, 1)]


def test_on_a_sampled_list_the_class_is_weighed_as_the_draw_weighs_it(tmp_path, tiny_backend):
    """The class's probability of being written where it stands times its expected stated probability over
    its list's (shares that sum to 1), the base model's own under a fresh adapter; a list that does not
    offer the class is not scored."""
    from types import SimpleNamespace

    import torch

    assert head(SCHEMA, 3) == '{"candidates": [{"parent": 3, "hypothesis": "'
    assert head({"properties": {"parent": {}}}, 3) == '{"parent": 3, "hypothesis": "'
    trainer = Trainer(tiny_backend, GRPOConfig(), tmp_path / "run")
    trainer.start()
    listed = [{**{k: v for k, v in c.items() if k != "probability"}, "region": "constants", "probability": p}
              for c, p in zip(CANDIDATES, (0.5, 1, 0.25, 0))]  # fmt: skip
    text = json.dumps({"candidates": listed}, separators=(", ", ": "))
    tokens = tiny_backend.tokenizer.encode(text, add_special_tokens=False)
    rollout = SimpleNamespace(prompt=PROMPT, json_schema=SCHEMA, action="", candidates=listed, tokens=tokens)
    stated = stated_probabilities(tiny_backend, PROMPT, SCHEMA, tokens, ADAPTER)
    assert len(stated) == 4 and all(0 < a == b < 1 for a, b in stated)
    shares = [measure(tiny_backend, [rollout], m.split(" by")[0], ADAPTER) for m in MOVES]
    assert all(s["measure"] == "draw probability" and s["ratio"] == 1.0 for s in shares)
    assert sum(s["weight"] for s in shares) == pytest.approx(1.0)
    assert all(0 < s["offer"] == s["offer_base"] <= 1 for s in shares)  # writing the class where it stands
    assert all(s["draw"] == pytest.approx(s["offer"] * s["weight"]) for s in shares)
    with torch.no_grad():  # the adapter moves: the measure moves with it
        for name, p in tiny_backend.model.named_parameters():
            if f".{ADAPTER}." in name and "lora_B" in name:
                p.normal_(0, 0.5)
    assert measure(tiny_backend, [rollout], "increase X", ADAPTER)["ratio"] != 1.0
    assert measure(tiny_backend, [rollout], "decrease Y", ADAPTER) is None
    decoy = lambda h: in_class(h, "increase", ("X",))  # noqa: E731
    assert measure(tiny_backend, [rollout], "increase", ADAPTER, member=decoy) is None  # X is a decoy
    # the draw's tilt by the move's log-ratio (`training.tilt`): the adapter's weights tilted, shares still 1
    tilted = [measure(tiny_backend, [rollout], m.split(" by")[0], ADAPTER, tilt=(1.0, 3.0)) for m in MOVES]
    assert sum(s["weight"] for s in tilted) == pytest.approx(1.0)
    assert any(abs(s["tilt"] - 1.0) > 1e-3 for s in tilted)
    assert all(s["weight_base"] == u["weight_base"] for s, u in zip(tilted, shares))  # the base's: as stated


def test_a_slot_that_allows_the_class_is_scored_even_where_no_list_wrote_it(tmp_path, tiny_backend):
    """Axis first, two slots: the first allows X or Y with either verb, the second only `increase Y`. The
    list wrote `increase Y` in both; `decrease X` is scored in the first slot only, at the base model's
    probability under a fresh adapter, and moves once the adapter does."""
    import torch

    from arts.policy.proposal_schema import directed_pattern
    from arts.training.watch import slot_probabilities

    shares = [{"X": ("increase", "decrease"), "Y": ("increase", "decrease")}, {"Y": ("increase",)}]
    schema = proposal_schema([1], 2, patterns=[directed_pattern(m) for m in shares], shares=shares,
                             axis_first=True).model_json_schema()  # fmt: skip
    listed = [
        {"parent": 1, "axis": "Y", "hypothesis": "increase Y", "region": "constants", "probability": 0.5}
    ] * 2
    tokens = tiny_backend.tokenizer.encode(json.dumps({"candidates": listed}), add_special_tokens=False)
    trainer = Trainer(tiny_backend, GRPOConfig(), tmp_path / "run")
    trainer.start()
    got = slot_probabilities(tiny_backend, PROMPT, schema, tokens, "decrease X", ADAPTER)
    assert len(got) == 1 and 0 < got[0][0] == got[0][1] < 1
    assert len(slot_probabilities(tiny_backend, PROMPT, schema, tokens, "increase Y", ADAPTER)) == 2
    with torch.no_grad():
        for name, p in tiny_backend.model.named_parameters():
            if f".{ADAPTER}." in name and "lora_B" in name:
                p.normal_(0, 0.5)
    moved = slot_probabilities(tiny_backend, PROMPT, schema, tokens, "decrease X", ADAPTER)
    assert moved[0][0] != moved[0][1] and moved[0][1] == got[0][1]
    # the live watch: sampled lists, none of which wrote the class, are measured where it was offered
    rollout = Rollout(
        round=1, group=1, prompt=PROMPT, candidates=listed, drawn=0, probability=0.5,
        action=canonical_action(listed[0]), json_schema=schema, tokens=tokens, span=(0, len(tokens)),
    )  # fmt: skip
    watched = measure(tiny_backend, [rollout], "decrease X", ADAPTER)
    assert watched["measure"] == "slot probability" and watched["slots"] == 1
    assert watched["ratio"] == pytest.approx(moved[0][0] / moved[0][1])
    assert measure(tiny_backend, [rollout], "decrease Z", ADAPTER) is None  # offered nowhere


def test_arts_search_watches_a_probes_class_without_its_decoys(monkeypatch, tmp_path, tiny_model_dir):
    """A task's `[probe]` reaches the watch through `arts search --ttt`: its paying class and its decoys."""
    from arts.search import learning
    from arts.search.cli.main import main
    from tests.doubles import make_task, tiny_scientist

    task = make_task(tmp_path / "task")
    with (task / "task.toml").open("a") as f:
        f.write('\n[probe]\npaying = "increase"\ndecoys = ["X"]\n')
    seen: list[tuple] = []
    monkeypatch.setattr(
        learning,
        "measure",
        lambda _b, _r, move, *rest: seen.append((move, rest[-1]("increase X"), rest[-1]("increase Y"))),
    )
    tiny_scientist(monkeypatch, tiny_model_dir)
    argv = ["search", str(task), "--run-dir", str(tmp_path / "run"), "--rounds", "2", "--evals", "400", "-q",
            "--ttt", "--set", "executor_model.backend=rules", "--set", "scientist.audits=0",
            "--set", "scientist.inspect=0", "--set", "scientist.candidates=2", "--set", "group=2"]  # fmt: skip
    assert main(argv) == 0
    assert seen and all(s == ("increase", False, True) for s in seen)  # X is the decoy
