"""`ttt.grpo.learn_forced`: a direction the compass poll forced is trained as the scientist's choice, under
the list's grammar without the hold (`Proposal.open_schema`); under the grammar that sampled it its
tokens have probability 1 and an update learns nothing from it."""

from __future__ import annotations

import json
import re
import sqlite3

from arts.policy.scientist import Scientist, ScientistConfig
from arts.training.grpo import GRPOConfig
from arts.training.ttt import ADAPTER, ActionGroup, Trainer
from tests.doubles import STATE, make_task, tiny_scientist

HELD = {"X": ("decrease",), "Y": ("increase",)}
"""The poll held `increase X` and `decrease Y` back: each target's share forces the other way."""
VERBS = re.compile(r'"\^\(\(?([a-z|]+)\)? X[|)]')
"""The directions a stored hypothesis pattern offers X, as `^((increase|decrease|probe) X)...`."""
OPEN = {"X": ("increase", "decrease"), "Y": ("increase", "decrease")}


def _lists(backend):
    scientist = Scientist(backend, ScientistConfig(candidates=2, temperature=1.0, max_tokens=400))
    scientist.adapter = ADAPTER
    props = scientist.propose_lists(STATE, [1], tail=False, n=3, seed=7, targets=HELD, open_targets=OPEN)
    return [p for p in props if len(p.spans) == 2]


def _span(trainer, prop, schema, i: int) -> float:
    s, e = prop.spans[i]
    return sum(trainer.proposal_logprobs(prop.messages, schema, prop.completion.token_ids)[s:e])


def _choice(trainer, prop, i: int) -> float:
    """The log-prob of candidate i's direction as a choice: its span under the open grammar less under the
    one that sampled it (the spelling of a forced word is free under both and cancels)."""
    return _span(trainer, prop, prop.open_schema, i) - _span(trainer, prop, prop.json_schema, i)


def test_a_forced_direction_trains_only_under_the_open_grammar(tmp_path, tiny_backend):
    trainer = Trainer(tiny_backend, GRPOConfig(lr=1e-2, train_on="move"), tmp_path / "run")
    trainer.start()
    props = _lists(tiny_backend)
    assert len(props) >= 2
    a, b = props[0], props[1]
    assert a.open_schema is not None and a.open_schema != a.json_schema
    assert [c.hypothesis.split()[:2] for c in a.candidates] == [["decrease", "X"], ["increase", "Y"]]
    assert _choice(trainer, a, 0) < -0.1  # certain under the grammar that sampled it, a choice when open

    def update(schema_of):
        """decrease X (list a's first candidate) paid, increase Y (list b's second) lost."""
        spans, tokens = [a.spans[0], b.spans[1]], [a.completion.token_ids, b.completion.token_ids]
        old = [trainer.proposal_logprobs(p.messages, schema_of(p), t)[s:e]
               for p, t, (s, e) in zip((a, b), tokens, spans)]  # fmt: skip
        group = ActionGroup(a.messages, schema_of(a), ["a", "b"], [1.0, -1.0], old, spans=spans,
                            action_tokens=tokens)  # fmt: skip
        for _ in range(3):
            assert trainer.update([group]).applied

    start = _choice(trainer, a, 0)
    update(lambda p: p.json_schema)
    forced = _choice(trainer, a, 0) - start
    update(lambda p: p.open_schema)
    opened = _choice(trainer, a, 0) - start - forced
    assert opened > 0.05 and opened > forced + 0.05, (forced, opened)  # decrease X rose where it is a choice


def test_a_target_forced_per_slot_is_a_choice_under_the_open_grammar(tmp_path, tiny_backend):
    """With one target per slot the harness, not the scientist, chooses each candidate's target; the open
    grammar offers every target at every slot, so a paid target's choice is what an update raises."""
    trainer = Trainer(tiny_backend, GRPOConfig(lr=1e-2, train_on="move"), tmp_path / "run")
    trainer.start()
    scientist = Scientist(tiny_backend, ScientistConfig(candidates=2, temperature=1.0, max_tokens=400))
    scientist.adapter = ADAPTER
    props = scientist.propose_lists(STATE, [1], tail=False, n=3, seed=7, targets=OPEN, open_targets=OPEN)
    a, b = [p for p in props if len(p.spans) == 2][:2]
    assert [c.hypothesis.split()[1] for c in a.candidates] == ["X", "Y"]  # one target per slot
    assert a.open_schema is not None
    assert "^((increase|decrease) X|(increase|decrease) Y)" in json.dumps(a.open_schema)
    start = _choice(trainer, a, 0)
    assert start < -0.1  # certain where it was sampled, a choice among X and Y where open
    spans, tokens = [a.spans[0], b.spans[1]], [a.completion.token_ids, b.completion.token_ids]
    old = [trainer.proposal_logprobs(p.messages, p.open_schema, t)[s:e] for p, t, (s, e) in zip((a, b), tokens, spans)]
    group = ActionGroup(a.messages, a.open_schema, ["a", "b"], [1.0, -1.0], old, spans=spans, action_tokens=tokens)
    for _ in range(3):
        assert trainer.update([group]).applied
    assert _choice(trainer, a, 0) > start + 0.05  # X at slot 0 paid: chosen there more often


def _search(monkeypatch, tmp_path, tiny_model_dir, name: str, *sets: str) -> list[dict]:
    """`arts search --ttt` on the toy task with the tiny scientist, `increase X` held back in every round:
    the directions each stored rollout's grammar offers X."""
    from arts.search.cli.main import main

    tiny_scientist(monkeypatch, tiny_model_dir)
    monkeypatch.setattr("arts.search.compass.held", lambda state, normalise: {"increase X"})
    task = tmp_path / f"task-{name}"
    make_task(task)
    run = tmp_path / name
    argv = ["search", str(task), "--run-dir", str(run), "--rounds", "2", "--evals", "400", "-q", "--ttt",
            "--set", "executor_model.backend=rules", "--set", "scientist.audits=0", "--set", "scientist.inspect=0",
            "--set", "scientist.candidates=2", "--set", "scientist.max_tokens=400", "--set", "group=2"]  # fmt: skip
    for s in sets:
        argv += ["--set", s]
    assert main(argv) == 0
    with sqlite3.connect(run / "arts.db") as db:
        rows = [json.loads(d) for (d,) in db.execute("select data from rollouts")]
    assert rows
    return [set(VERBS.search(json.dumps(r["json_schema"])).group(1).split("|")) for r in rows]


def test_arts_search_stores_the_open_grammar_with_learn_forced(monkeypatch, tmp_path, tiny_model_dir):
    opened = _search(monkeypatch, tmp_path, tiny_model_dir, "open", "ttt.grpo.learn_forced=true")
    assert opened and all({"increase", "decrease"} <= verbs for verbs in opened)
    sampled = _search(monkeypatch, tmp_path, tiny_model_dir, "sampled")
    assert sampled and all("decrease" in verbs and "increase" not in verbs for verbs in sampled)
