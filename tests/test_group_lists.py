"""A GRPO group that is a sample: N verbalized lists sampled from one prompt, one action drawn from each,
each action trained on its own list's sampled tokens (its span, under the candidates before it)."""

from __future__ import annotations

import math

import torch

from arts.policy.scientist import Scientist, ScientistConfig
from arts.training.grpo import GRPOConfig
from arts.training.logprobs import target_logprobs
from arts.training.ttt import ADAPTER, ActionGroup, Trainer
from tests.doubles import STATE


def _lists(backend, n: int = 3):
    scientist = Scientist(backend, ScientistConfig(candidates=3, temperature=1.0, max_tokens=400))
    scientist.adapter = ADAPTER
    return scientist.propose_lists(STATE, [1, 2], tail=False, n=n, seed=7)


def test_lists_of_one_prompt_are_independent_samples_each_with_its_spans(tmp_path, tiny_backend):
    Trainer(tiny_backend, GRPOConfig(), tmp_path / "run").start()
    props = _lists(tiny_backend)
    assert len(props) == 3 and all(p.messages == props[0].messages for p in props)
    assert len({tuple(p.completion.token_ids) for p in props}) > 1  # sampled, not copied
    complete = [p for p in props if p.candidates]  # a random model's list may be cut off at max_tokens
    assert len(complete) >= 2 and all(len(p.spans) == len(p.candidates) for p in complete)


def test_each_action_trains_on_its_own_lists_tokens(tmp_path, tiny_backend):
    trainer = Trainer(tiny_backend, GRPOConfig(lr=1e-2), tmp_path / "run")
    trainer.start()
    props = [p for p in _lists(tiny_backend) if p.spans]
    assert len(props) >= 2
    tokens = [p.completion.token_ids for p in props]
    spans = [p.spans[-1] for p in props]  # the last candidate of each list: after the ones before it

    def group(rewards):
        old = []
        for p, t, (s, e) in zip(props, tokens, spans):
            full = trainer.proposal_logprobs(p.messages, p.json_schema, t)
            old.append(full[s:e])
        return ActionGroup(props[0].messages, props[0].json_schema, ["a"] * len(props), rewards, old,
                           spans=spans, action_tokens=tokens)  # fmt: skip

    g = group([1.0] + [0.0] * (len(props) - 1))
    built = trainer._group(g)
    for target, t, (s, e) in zip(built.targets, tokens, spans):
        assert target.tokens == t[:e] and target.span == (s, e)
    with torch.no_grad():
        new, _ = target_logprobs(tiny_backend.model, built.prompt_ids, built.targets, 0)
    for row, (s, e) in enumerate(spans):  # the ratio starts at one: the sampling policy's log-probs
        assert (
            max(abs(math.exp(a - b) - 1) for a, b in zip(new[row, s:e].tolist(), g.old_logprobs[row])) < 1e-4
        )
    before = sum(g.old_logprobs[0])
    for _ in range(3):
        assert trainer.update([group([1.0] + [0.0] * (len(props) - 1))]).applied
    s, e = spans[0]
    after = trainer.proposal_logprobs(props[0].messages, props[0].json_schema, tokens[0])
    assert sum(after[s:e]) > before + 0.1


def test_the_candidates_of_one_list_are_scored_in_one_row(tmp_path, tiny_backend):
    """Every candidate of N lists (draws and companions alike) costs N rows, and each reads the log-probs it
    would get in a row of its own."""
    from arts.training.logprobs import score_targets, shared_rows, span_targets

    Trainer(tiny_backend, GRPOConfig(), tmp_path / "run").start()
    props = [p for p in _lists(tiny_backend) if len(p.spans) >= 2]
    assert len(props) >= 2
    targets = [
        t for p in props for t in span_targets(tiny_backend, p.json_schema, p.completion.token_ids, p.spans)
    ]
    rows, index = shared_rows(targets)
    assert len(rows) == len(props) and len(targets) > len(rows)
    prompt = tiny_backend.encode_prompt(props[0].messages)
    together = score_targets(tiny_backend.model, prompt, targets, 0)
    for t, values in zip(targets, together):
        alone = score_targets(tiny_backend.model, prompt, [t], 0)[0]
        assert max(abs(a - b) for a, b in zip(values, alone)) < 1e-4


def test_the_lists_of_a_round_are_scored_together_as_each_alone(tmp_path, tiny_backend):
    """The drawn lists' old log-probs come from one scoring with the prompt run once; each list reads what
    it reads scored alone, and a list the grammar rejects reads None without spoiling the others."""
    trainer = Trainer(tiny_backend, GRPOConfig(), tmp_path / "run")
    trainer.start()
    props = _lists(tiny_backend)
    tokens = [p.completion.token_ids for p in props]
    bad = tiny_backend.tokenizer.encode("not json", add_special_tokens=False)
    together = trainer.lists_logprobs(props[0].messages, props[0].json_schema, [*tokens, bad])
    assert together[-1] is None
    for t, got in zip(tokens, together):
        alone = trainer.proposal_logprobs(props[0].messages, props[0].json_schema, t)
        assert len(got) == len(t) and max(abs(a - b) for a, b in zip(got, alone)) < 1e-4


def test_a_rounds_drawn_lists_take_one_scoring(tmp_path, tiny_backend, monkeypatch):
    """`Learning.sampled` scores a group's distinct lists in one call, and each draw's old log-prob is its
    span of its own list's."""
    from arts.rewards import RewardConfig
    from arts.search.learning import Learning
    from arts.search.ledger import Ledger
    from arts.search.state import Rollout
    from arts.search.store import Store

    ledger = Ledger(Store.open(tmp_path / "run"))
    trainer = Trainer(tiny_backend, GRPOConfig(), tmp_path / "run")
    ttt = Learning(trainer, ledger, RewardConfig(), 1, use_adapter=lambda name: None, log=lambda line: None)
    ttt.start()
    props = [p for p in _lists(tiny_backend) if p.spans]
    calls = []
    scored = trainer.lists_logprobs
    monkeypatch.setattr(trainer, "lists_logprobs", lambda *a: calls.append(len(a[2])) or scored(*a))
    rollouts = [
        ledger.add(Rollout(round=1, group=1, prompt=p.messages, json_schema=p.json_schema, drawn=0,
                           candidates=[], action="{}", tokens=p.completion.token_ids, span=list(p.spans[0])))
        for p in [*props, props[0]]  # the first list drawn twice
    ]  # fmt: skip
    ttt.sampled(rollouts)
    assert calls == [len(props)]
    for r in rollouts:
        alone = trainer.proposal_logprobs(r.prompt, r.json_schema, r.tokens)
        assert abs(r.old_logprob - math.fsum(alone[r.span[0] : r.span[1]])) < 1e-3
