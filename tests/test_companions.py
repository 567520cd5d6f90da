"""Companions (`search.companions`): the undrawn candidates of a round's lists that name an experiment the
round ran are trained with its reward, on their own sampled tokens; through `arts search --ttt`, the
update then trains on more actions than were drawn."""

from __future__ import annotations

from arts.search.companions import companions
from arts.search.state import Rollout
from arts.training.grpo import GRPOConfig
from arts.training.ttt import Trainer
from tests.doubles import make_task, sampled_proposal, tiny_scientist


def _rollout(prop, candidates, drawn: int, reward: float, rid: int) -> Rollout:
    tokens = prop.completion.token_ids
    return Rollout(id=rid, group=1, candidates=candidates, drawn=drawn, tokens=tokens,
                   span=list(prop.spans[drawn]), reward=reward)  # fmt: skip


def test_an_undrawn_candidate_of_an_experiment_that_ran_takes_its_reward(tmp_path, tiny_backend):
    Trainer(tiny_backend, GRPOConfig(), tmp_path / "run").start()  # the adapter the scientist samples from
    prop = sampled_proposal(tiny_backend, k=3)
    assert len(prop.spans) == len(prop.candidates) == 3
    c = [x.model_dump() for x in prop.candidates]
    c[0].update(parent=1, hypothesis="increase TOL to a smaller tolerance")
    c[1].update(parent=1, hypothesis="decrease TOL")
    c[2].update(parent=1, hypothesis="increase TOL by x2")  # the same experiment as c[0]: parent and move
    decode = lambda ids: tiny_backend.tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731
    found = companions([_rollout(prop, c, 0, -1.0, 1)], decode)
    assert [(f.reward, f.span) for f in found] == [(-1.0, tuple(prop.spans[2]))]
    assert found[0].tokens == prop.completion.token_ids and '"increase TOL by x2"' in found[0].action
    # drawn candidates are never their own companions; two draws of one experiment paid apart: the mean
    both = [_rollout(prop, c, 0, -1.0, 1), _rollout(prop, c, 2, 0.0, 2)]
    assert companions(both, decode) == []
    c[1].update(hypothesis="increase TOL")
    found = companions([_rollout(prop, c, 0, -1.0, 1), _rollout(prop, c, 2, 0.0, 2)], decode)
    assert [(f.reward, f.span) for f in found] == [(-0.5, tuple(prop.spans[1]))]
    c[1].update(parent=2)  # another parent: another experiment
    assert companions([_rollout(prop, c, 0, -1.0, 1)], decode)[0].span == tuple(prop.spans[2])
    assert len(companions([_rollout(prop, c, 0, -1.0, 1)], decode)) == 1


def _ttt_search(monkeypatch, tmp_path, tiny_model_dir, name: str, *sets: str):
    """`arts search --ttt` on the toy task with the tiny model as scientist, 2 rounds of 3 lists of 3; the
    run's state and update events."""
    from arts.search.cli.main import main
    from arts.search.store import Store

    tiny_scientist(monkeypatch, tiny_model_dir)
    run = tmp_path / name
    argv = ["search", str(tmp_path / "task"), "--run-dir", str(run), "--rounds", "2", "--evals", "400", "-q",
            "--ttt", "--lr", "1e-2", "--set", "executor_model.backend=rules", "--set", "scientist.audits=0",
            "--set", "scientist.inspect=0", "--set", "scientist.candidates=3", "--set", "scientist.max_tokens=640",
            "--set", "group=3", "--set", "ttt.reward.name=gain_sign"]  # fmt: skip
    for s in sets:
        argv += ["--set", s]
    assert main(argv) == 0
    with Store.open(run) as store:
        return store.load_state(), [e.payload for e in store.events("update")]


def test_companions_join_the_update_through_arts_search(monkeypatch, tmp_path, tiny_model_dir):
    make_task(tmp_path / "task")
    state, updates = _ttt_search(monkeypatch, tmp_path, tiny_model_dir, "with", "ttt.companions=true")
    assert updates, "no update was applied"
    joined = sum(u["companions"] for u in updates)
    assert joined > 0  # the random model's lists repeat an experiment that ran
    assert all(u["samples"] == len([r for r in state.rollouts.values() if r.round == u["round"]]) + u["companions"]
               for u in updates)  # fmt: skip
    _, plain = _ttt_search(monkeypatch, tmp_path, tiny_model_dir, "without")
    assert plain and all(u["companions"] == 0 for u in plain)
