"""On-policy test-time training: the drawn candidate's own sampled tokens inside the verbalized proposal,
under the prompt, the candidates before it, the proposal's grammar and the adapter that sampled them."""

from __future__ import annotations

import math

import torch
from transformers import AutoTokenizer

from arts.policy.spans import item_spans, token_spans
from arts.training.grpo import GRPOConfig
from arts.training.logprobs import target_logprobs
from arts.training.ttt import ActionGroup, Trainer
from tests.doubles import sampled_proposal


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
