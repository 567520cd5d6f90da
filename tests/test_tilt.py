"""The draw tilted by what a trained adapter implies (`training.tilt`): nothing under a fresh adapter, the
rewarded move raised after updates, and through `arts search`, a warm start that changes what is drawn."""

from __future__ import annotations

import json
import math

import pytest

from arts.training.grpo import GRPOConfig
from arts.training.tilt import move_log_ratios, tilted
from arts.training.ttt import ADAPTER, ActionGroup, Trainer
from tests.doubles import make_task, sampled_proposal, tiny_scientist


def test_tilted_multiplies_by_the_capped_exponential():
    assert tilted([0.5, 0.25, 0.25], [0.0, 1.0, -10.0], 2.0, 3.0) == pytest.approx(
        [0.5, 0.25 * math.exp(2.0), 0.25 * math.exp(-3.0)]
    )
    assert tilted([0.3, 0.7], [5.0, -5.0], 0.0, 3.0) == [0.3, 0.7]


def _trained(tmp_path, backend, updates: int):
    """A trainer whose `updates` updates rewarded the first candidate of one sampled proposal."""
    trainer = Trainer(backend, GRPOConfig(lr=1e-2), tmp_path / "run")
    trainer.start()
    prop = sampled_proposal(backend)
    tokens, spans = prop.completion.token_ids, prop.spans
    rewards = [1.0] + [0.0] * (len(spans) - 1)
    for _ in range(updates):
        full = trainer.proposal_logprobs(prop.messages, prop.json_schema, tokens)
        group = ActionGroup(prop.messages, prop.json_schema, ["a"] * len(spans), rewards,
                            [full[s:e] for s, e in spans], tokens, spans)  # fmt: skip
        assert trainer.update([group]).applied
    return trainer, prop


def test_a_fresh_adapter_implies_nothing_and_an_update_raises_the_rewarded_move(tmp_path, tiny_backend):
    trainer, prop = _trained(tmp_path, tiny_backend, 0)
    lists = [(prop.completion.token_ids, prop.spans)]
    fresh = move_log_ratios(tiny_backend, ADAPTER, prop.messages, prop.json_schema, lists)[0]
    assert len(fresh) == len(prop.spans) >= 2
    assert fresh == pytest.approx([0.0] * len(fresh), abs=1e-5)  # LoRA's B = 0: the base itself
    trainer, prop = _trained(tmp_path / "b", tiny_backend, 3)
    ratios = move_log_ratios(tiny_backend, ADAPTER, prop.messages, prop.json_schema, lists)[0]
    assert ratios[0] > 0.5 and ratios[0] > max(ratios[1:]) + 0.5
    # read at the move positions alone, the same as from a forward that scores every position
    from arts.training.credit import base_model
    from arts.training.logprobs import adapter_scope, move_positions, score_targets, span_targets

    tokens, pad = prop.completion.token_ids, tiny_backend.tokenizer.eos_token_id
    target = span_targets(tiny_backend, prop.json_schema, tokens, [(0, len(tokens))])
    ids = tiny_backend.encode_prompt(prop.messages)
    with adapter_scope(tiny_backend.model, ADAPTER):
        tuned = score_targets(tiny_backend.model, ids, target, pad, 1.0)[0]
    with base_model(tiny_backend.model):
        base = score_targets(tiny_backend.model, ids, target, pad, 1.0)[0]
    at = [move_positions(tiny_backend.tokenizer, tokens, span) for span in prop.spans]
    assert ratios == pytest.approx([sum(tuned[i] - base[i] for i in pos) for pos in at], abs=1e-4)
    # a list without tokens (a served scientist's) is not scored
    assert move_log_ratios(tiny_backend, ADAPTER, prop.messages, prop.json_schema, [([], [])]) == [None]


def _search(monkeypatch, tmp_path, tiny_model_dir, name: str, *sets: str, seed: int = 0) -> list[dict]:
    """`arts search` on the toy task with the tiny model as scientist and RuleBackend as executor, 2 rounds;
    the run's draw events."""
    from arts.search.cli.main import main
    from arts.search.store import Store

    tiny_scientist(monkeypatch, tiny_model_dir)
    run = tmp_path / name
    argv = ["search", str(tmp_path / "task"), "--run-dir", str(run), "--rounds", "2", "--evals", "400", "-q", "--seed", str(seed),
            "--set", "executor_model.backend=rules", "--set", "scientist.audits=0", "--set", "scientist.inspect=0",
            "--set", "scientist.candidates=2", "--set", "scientist.max_tokens=640", "--set", "group=2"]  # fmt: skip
    for s in sets:
        argv += ["--set", s]
    assert main(argv) == 0
    with Store.open(run) as store:
        return [e.payload for e in store.events("draw")]


def test_a_warm_start_tilts_the_draw_through_arts_search(monkeypatch, tmp_path, tiny_model_dir, tiny_backend):
    """The same lists (same seed, same adapter), drawn with the tilt and without: with a steep tilt each list
    draws, of the candidates it gives any probability, the one of the largest log-ratio, so what is run
    differs because of what the adapter learned."""
    trainer, _ = _trained(tmp_path, tiny_backend, 3)
    make_task(tmp_path / "task")
    warm = f"scientist.adapter={trainer.checkpoint}"
    # seed 6: round 1's lists state a probability above 0 for both their candidates, so a tilt can move
    # the draw there (at seed 0 each list gave one candidate 0, which no tilt raises)
    flat = _search(monkeypatch, tmp_path, tiny_model_dir, "flat", warm, "scientist.tilt=0", seed=6)
    steep = _search(
        monkeypatch,
        tmp_path,
        tiny_model_dir,
        "steep",
        warm,
        "scientist.tilt=50",
        "scientist.tilt_cap=50",
        seed=6,
    )
    assert flat and steep and all("move_log_ratios" not in d for d in flat)
    assert flat[0]["candidates"] == steep[0]["candidates"]  # the first round's lists are the same
    listed = flat[0]["candidates"]
    assert any(all(c["probability"] > 0 for c in listed[i : i + 2]) for i in (0, 2)), (
        "no list a tilt can move"
    )
    changed = False
    for d in steep:
        ratios, per_list = d["move_log_ratios"], 2
        assert len(ratios) == len(d["candidates"]) and any(abs(r) > 1e-3 for r in ratios)
        for index, *_ in d["drawn"]:
            first = index - index % per_list
            weighed = zip(ratios[first : first + per_list], d["candidates"][first : first + per_list])
            mine = [r for r, c in weighed if c["probability"] > 0]  # a weight of 0 stays 0 under any tilt
            assert ratios[index] == max(mine) or max(mine) - ratios[index] < 0.1  # admissible ones only
    for a, b in zip(flat[:1], steep[:1]):  # later rounds start from other nodes
        changed |= [x[0] for x in a["drawn"]] != [x[0] for x in b["drawn"]] or any(
            abs(x[1] - y[1]) > 1e-6 for x, y in zip(a["drawn"], b["drawn"])
        )
    assert changed
    json.dumps(steep)  # the event is stored as JSON


def test_past_the_tail_depth_the_tilt_still_draws_the_move_the_adapter_favours(monkeypatch, tmp_path, tiny_model_dir):
    """Round 2's lists are tail lists (`scientist.tail_depth=1`): the tail is read from the scientist's
    stated probabilities, so a steep tilt (here a scripted adapter that favours each list's first
    candidate) draws the favoured candidate wherever both are stated in the tail. Read from the tilted
    weights, the favoured candidate would always be out of the tail and never drawn."""
    import arts.search.methods.arts as arts_method

    favour = lambda run, proposed: [5.0 if i % 2 == 0 else -5.0 for i in range(len(proposed.candidates))]  # noqa: E731
    monkeypatch.setattr(arts_method, "move_ratios", favour)
    make_task(tmp_path / "task")
    steep = _search(monkeypatch, tmp_path, tiny_model_dir, "tail", "scientist.tilt=50", "scientist.tilt_cap=50",
                    "scientist.tail_depth=1", "scientist.tail_threshold=0.9", seed=6)  # fmt: skip
    tail_lists = 0
    for d in steep[1:]:  # from round 2 the parent is below the seed
        cands = d["candidates"]
        for index, _, tail in d["drawn"]:
            pair = [index - index % 2, index - index % 2 + 1]
            total = sum(cands[i]["probability"] for i in pair)
            if tail and all(0 < cands[i]["probability"] / total < 0.9 for i in pair):
                assert index == pair[0]  # the favoured one, in the tail
                tail_lists += 1
    assert tail_lists, "no tail list with both candidates in the tail"
