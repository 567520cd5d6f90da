"""On-policy test-time training: the drawn candidate's own sampled tokens inside the verbalized proposal,
under the prompt, the candidates before it, the proposal's grammar and the adapter that sampled them."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import AutoTokenizer

from arts.policy.backends import decoding
from arts.policy.scientist import Scientist, ScientistConfig
from arts.policy.spans import item_spans, token_spans
from arts.training.grpo import GRPOConfig
from arts.training.logprobs import adapter_scope, move_positions, target_logprobs
from arts.training.stated import stated_positions
from arts.training.ttt import ADAPTER, ActionGroup, Trainer
from tests.doubles import STATE, sampled_proposal


def test_item_spans_finds_each_complete_candidate_and_drops_a_cut_off_one():
    text = '{"candidates": [{"a": 1, "b": "x}"}, {"a": 2}, {"a": 3, "b'
    spans = item_spans(text)
    assert [text[a:b] for a, b in spans] == ['{"a": 1, "b": "x}"}', '{"a": 2}']


def test_token_spans_cover_the_characters_of_each_item(tiny_model_dir):
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    text = '{"candidates": [{"parent": 1, "hypothesis": "raise X"}, {"parent": 1, "hypothesis": "lower X"}]}'
    ids = tok.encode(text, add_special_tokens=False)
    chars = item_spans(text)
    spans = token_spans(ids, tok.decode, chars)
    for (a, b), (s, e) in zip(chars, spans):
        covered = tok.decode(ids[s:e])
        assert text[a:b] in covered and len(covered) < len(text[a:b]) + 6  # at most a boundary token more


def test_training_targets_are_the_sampled_tokens_and_the_ratio_starts_at_one(tmp_path, tiny_backend):
    trainer = Trainer(tiny_backend, GRPOConfig(), tmp_path / "run")
    trainer.start()
    prop = sampled_proposal(tiny_backend)
    assert prop.spans and len(prop.spans) == len(prop.candidates)
    sampled = prop.completion.token_ids
    full = trainer.proposal_logprobs(prop.messages, prop.json_schema, sampled)
    assert full is not None and len(full) == len(sampled)
    # the sampling-time log-probs (temperature 1, after the grammar mask) are what scoring recomputes
    if prop.completion.logprobs:
        assert max(abs(a - b) for a, b in zip(full, prop.completion.logprobs)) < 1e-3
    old = [full[s:e] for s, e in prop.spans]
    g = ActionGroup(prop.messages, prop.json_schema, ["a"] * len(old), [1.0, 0.0, 0.0][: len(old)], old,
                    sampled, prop.spans)  # fmt: skip
    built = trainer._group(g)
    for target, (s, e) in zip(built.targets, prop.spans):
        assert target.tokens == sampled[:e] and target.span == (s, e)  # the trained ids are the sampled ones
    with torch.no_grad():
        new, _ = target_logprobs(tiny_backend.model, built.prompt_ids, built.targets, 0)
    for row, (s, e) in enumerate(prop.spans):
        assert max(abs(math.exp(n - o) - 1) for n, o in zip(new[row, s:e].tolist(), old[row])) < 1e-4
    assert trainer.update([g]).stats.old_drift < 1e-4  # the update's own first forward agrees


def test_a_reward_raises_the_drawn_candidates_own_tokens(tmp_path, tiny_backend):
    trainer = Trainer(tiny_backend, GRPOConfig(lr=1e-2), tmp_path / "run")
    trainer.start()
    prop = sampled_proposal(tiny_backend)
    sampled, spans = prop.completion.token_ids, prop.spans
    before = trainer.proposal_logprobs(prop.messages, prop.json_schema, sampled)
    rewards = [1.0] + [0.0] * (len(spans) - 1)
    for _ in range(3):
        full = trainer.proposal_logprobs(prop.messages, prop.json_schema, sampled)
        g = ActionGroup(prop.messages, prop.json_schema, ["a"] * len(spans), rewards,
                        [full[s:e] for s, e in spans], sampled, spans)  # fmt: skip
        assert trainer.update([g]).applied
    after = trainer.proposal_logprobs(prop.messages, prop.json_schema, sampled)
    s, e = spans[0]
    assert sum(after[s:e]) > sum(before[s:e]) + 0.1


@pytest.mark.parametrize("heat", [1.0, 3.0])
def test_old_logprobs_are_the_sampling_policys_at_the_default_temperature(
    tmp_path, tiny_backend, monkeypatch, heat
):
    """The scientist samples at its default temperature (not 1): the log-prob the trainer stores for a drawn
    token, and the one the update recomputes, are those of the distribution the sampler drew it from; with
    a choice heat (a directed proposal's target and verb tokens drawn hotter), those tokens' too."""
    temperature = ScientistConfig().temperature
    assert temperature != 1.0
    drawn: list[float] = []
    heated: list[float] = []
    choose = decoding.choose_tokens

    def recording(logits, temp, top_p, generator, scales=None):  # the masked logits the sampler draws from
        heated.extend(s for s in scales or [] if s != 1.0)
        chosen = choose(logits, temp, top_p, generator, scales)
        hot = logits / (temp * torch.tensor(scales or [1.0] * len(logits))[:, None])
        drawn.extend(torch.log_softmax(hot, -1).gather(1, chosen[:, None]).squeeze(1).tolist())
        return chosen

    monkeypatch.setattr(decoding, "choose_tokens", recording)
    tiny_backend.jump_forward = False  # every token comes from the sampler (forced runs do not)
    trainer = Trainer(tiny_backend, GRPOConfig(), tmp_path / "run", temperature=temperature)
    trainer.start()
    config = ScientistConfig(candidates=3, max_tokens=400, choice_heat=heat, axis_first=True)
    scientist = Scientist(tiny_backend, config, adapter=ADAPTER)
    targets = {"STEPS": ("increase", "decrease"), "CHUNK": ("increase", "decrease")} if heat != 1 else None
    prop = scientist.propose(STATE, [1, 2], tail=False, seed=7, targets=targets)
    sampled = prop.completion.token_ids
    assert prop.spans and len(drawn) == len(sampled)
    assert set(heated) == ({heat} if heat != 1 else set())
    stored = trainer.proposal_logprobs(prop.messages, prop.json_schema, sampled)
    assert max(abs(a - b) for a, b in zip(stored, drawn)) < 1e-4
    at_one = Trainer(tiny_backend, GRPOConfig(), tmp_path / "one").proposal_logprobs(
        prop.messages, prop.json_schema, sampled
    )
    assert max(abs(a - b) for a, b in zip(at_one, drawn)) > 1e-2  # temperature 1 is another policy
    old = [stored[s:e] for s, e in prop.spans]
    g = ActionGroup(prop.messages, prop.json_schema, ["a"] * len(old), [1.0, 0.0, 0.0][: len(old)], old,
                    sampled, prop.spans)  # fmt: skip
    built = trainer._group(g)
    with torch.no_grad(), adapter_scope(tiny_backend.model, ADAPTER):
        new, _ = target_logprobs(tiny_backend.model, built.prompt_ids, built.targets, 0, trainer.temperature)
    for row, (s, e) in enumerate(prop.spans):
        assert max(abs(n - o) for n, o in zip(new[row, s:e].tolist(), old[row])) < 1e-4


def test_the_move_is_the_parent_and_the_verb_and_target_of_a_directed_hypothesis(tiny_model_dir):
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    directed = '{"parent": 3, "hypothesis": "decrease TOL to 1e-9 now", "axis": "TOL", "probability": 0.4}'
    free = '{"parent": 12, "hypothesis": "use a Newton step", "axis": "other", "probability": 0.25}'
    axis_first = '{"parent": 3, "axis": "TOL", "hypothesis": "decrease TOL to 1e-9 now", "probability": 0.4}'
    elsewhere = '{"parent": 3, "axis": "solve", "hypothesis": "increase RELAX", "probability": 0.4}'
    for text, move, left_out in (
        (directed, ["3", "decrease TOL"], ["1e-9", "axis", "0.4"]),
        (free, ["12", "use a Newton step"], ["other", "0.25"]),
        (axis_first, ["3", "TOL", "decrease TOL"], ["1e-9", "0.4"]),  # the axis names the target first
        (elsewhere, ["3", "increase RELAX"], ["solve", "0.4"]),  # an axis that is not the target: not a choice
    ):
        ids = [0, *tok.encode(text, add_special_tokens=False)]  # a context token before the span
        kept = move_positions(tok, ids, (1, len(ids)))
        words = tok.decode([ids[i] for i in kept])
        assert all(m in words for m in move) and not any(w in words for w in left_out)
        assert words.count("TOL") == (2 if text == axis_first else 1 if text == directed else 0)


def test_training_on_the_move_counts_only_its_tokens(tmp_path, tiny_backend):
    trainers = {
        on: Trainer(tiny_backend, GRPOConfig(train_on=on, steps=1), tmp_path / on)
        for on in ("action", "move")
    }
    prop = sampled_proposal(tiny_backend)
    sampled, spans = prop.completion.token_ids, prop.spans
    moves = [move_positions(tiny_backend.tokenizer, sampled, s) for s in spans]
    assert all(moves) and sum(map(len, moves)) < sum(e - s for s, e in spans) / 2
    counted = {}
    for on, trainer in trainers.items():
        trainer.start()
        full = trainer.proposal_logprobs(prop.messages, prop.json_schema, sampled)
        g = ActionGroup(prop.messages, prop.json_schema, ["a"] * len(spans), [1.0] + [0.0] * (len(spans) - 1),
                        [full[s:e] for s, e in spans], sampled, spans)  # fmt: skip
        counted[on] = trainer.update([g]).stats.tokens
    assert counted == {"action": sum(e - s for s, e in spans), "move": sum(map(len, moves))}


def test_the_weight_loss_moves_the_stated_probability_the_way_the_advantage_says(tmp_path, tiny_backend):
    """Token GRPO reinforces whatever digits a candidate stated; with `weight_coef` the expected stated
    probability (what the draw weighs it by) rises for the rewarded candidate and falls for the others."""
    from arts.training.watch import stated_probabilities

    trainer = Trainer(tiny_backend, GRPOConfig(lr=1e-2, weight_coef=5.0, train_on="move"), tmp_path / "run")
    trainer.start()
    prop = sampled_proposal(tiny_backend)
    sampled, spans = prop.completion.token_ids, prop.spans
    assert all(stated_positions(tiny_backend.tokenizer, sampled, s) for s in spans)
    rewards = [1.0] + [0.0] * (len(spans) - 1)
    before = stated_probabilities(tiny_backend, prop.messages, prop.json_schema, sampled, ADAPTER)
    for _ in range(3):
        full = trainer.proposal_logprobs(prop.messages, prop.json_schema, sampled)
        g = ActionGroup(prop.messages, prop.json_schema, ["a"] * len(spans), rewards,
                        [full[s:e] for s, e in spans], sampled, spans)  # fmt: skip
        assert trainer.update([g]).stats.weight_loss != 0.0
    after = stated_probabilities(tiny_backend, prop.messages, prop.json_schema, sampled, ADAPTER)
    rise = [a[0] - b[0] for a, b in zip(after, before)]
    assert rise[0] > 0.1 and all(r < 0 for r in rise[1:])  # measured: +0.29, -0.25, -0.23


def test_the_weight_loss_on_shares_ignores_a_rise_every_candidate_shares():
    """A LoRA step that raises one candidate's digits raises its siblings' too; the draw follows shares.
    On shares of the list (`ActionTarget.stated_list`) a common rise changes nothing and only a rise of
    the drawn candidate over its sibling lowers the loss; on its own value any rise does."""
    from arts.training.logprobs import ActionTarget
    from arts.training.stated import weight_loss

    ids = (1, 0, list(range(2, 12)))  # "1", "0", then the digits 0-9

    def every(first: int, second: int) -> torch.Tensor:  # two candidates stating "0.<first>", "0.<second>"
        logits = torch.full((1, 4, 12), -30.0)
        logits[0, 0, 0] = logits[0, 2, 0] = 0.0  # "0" leads both values
        logits[0, 1, 2 + first] = logits[0, 3, 2 + second] = 0.0
        return torch.log_softmax(logits, -1)

    own = ActionTarget([0] * 4, torch.zeros(4, 1), (0, 2), stated_at=(0, 1))
    share = ActionTarget([0] * 4, torch.zeros(4, 1), (0, 2), stated_at=(0, 1), stated_list=[(0, 1), (2, 3)])
    loss = {
        (name, pair): float(weight_loss(every(*pair), [t], [1.0], ids))
        for name, t in (("own", own), ("share", share))
        for pair in ((2, 2), (4, 4), (4, 2))
    }
    assert loss["own", (4, 4)] < loss["own", (2, 2)] - 0.5
    assert loss["share", (4, 4)] == pytest.approx(loss["share", (2, 2)]) == pytest.approx(math.log(2))
    assert loss["share", (4, 2)] == pytest.approx(-math.log(0.45 / 0.7))
    # the same read from the scored positions alone, held in other columns (the rest not scored)
    spread = every(4, 2)[:, [3, 2, 1, 0]]
    column = torch.tensor([3, 2, 1, 0, -1, -1])
    assert float(weight_loss(spread, [share], [1.0], ids, column)) == pytest.approx(loss["share", (4, 2)])


def test_every_candidate_of_a_sampled_list_is_found_where_it_states_its_probability(tmp_path, tiny_backend):
    from arts.training.stated import list_stated_positions

    Trainer(tiny_backend, GRPOConfig(), tmp_path / "run").start()
    prop = sampled_proposal(tiny_backend)
    sampled, spans = prop.completion.token_ids, prop.spans
    found = list_stated_positions(tiny_backend.tokenizer, sampled)
    assert found == [stated_positions(tiny_backend.tokenizer, sampled, s) for s in spans]
