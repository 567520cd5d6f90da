"""The credit check of test-time training: pairs of differently rewarded actions of one proposal, and whether
the adapter in force (trained on earlier rounds) shifted the better one up more than the worse one."""

from __future__ import annotations

import json
import math
import subprocess

import pytest

from arts.search.learning import credit_check
from arts.search.state import Rollout, SearchState
from arts.training.credit import CreditAction, base_span_logprobs, credit
from arts.training.grpo import GRPOConfig
from arts.training.ttt import ActionGroup, Trainer
from tests.doubles import make_task, runner, sampled_proposal


def test_concordance_counts_pairs_within_groups_by_hand():
    a = [
        CreditAction(1, 1.0, -1.0, -3.0),  # shift +2
        CreditAction(1, 0.0, -2.0, -2.5),  # +0.5
        CreditAction(1, 0.0, -2.0, -1.0),  # -1
        CreditAction(2, 0.5, -1.0, -1.0),  # 0: a tie with the worse action
        CreditAction(2, -1.0, -1.0, -1.0),  # 0
        CreditAction(3, 1.0, -1.0, -1.5),  # a group without signal holds no pair
        CreditAction(3, 1.0, -1.0, -0.5),
        CreditAction(4, 1.0, -1.0, -1.0),  # alone: no pair
    ]
    c = credit(a)
    # group 1: (2 > 0.5) win, (2 > -1) win; the two 0.0 rewards are no pair. group 2: one tie = 0.5
    assert (c.pairs, c.groups, c.actions) == (3, 2, 8)
    assert c.concordance == pytest.approx(2.5 / 3)
    # above their group's mean: group 1's first and group 2's first; groups without a pair count for neither
    assert c.shift_better == pytest.approx((2 + 0) / 2)
    assert c.shift_worse == pytest.approx((0.5 - 1 + 0) / 3)
    empty = credit([CreditAction(1, 1.0, -1.0, -1.0)])
    assert empty.concordance is None and "no pair" in empty.line()


def _rollouts(prop, rewards, adapter, old_sums, group):
    return [
        Rollout(
            id=group * 10 + i, round=group, group=group, prompt=prop.messages, json_schema=prop.json_schema,
            tokens=prop.completion.token_ids, span=list(span), action=f"a{i}", reward=r, adapter=adapter,
            old_logprob=o,
        )
        for i, (span, r, o) in enumerate(zip(prop.spans, rewards, old_sums))
    ]  # fmt: skip


def test_the_check_scores_the_base_and_finds_what_the_adapter_learned(tmp_path, tiny_backend):
    trainer = Trainer(tiny_backend, GRPOConfig(lr=1e-2), tmp_path / "run")
    trainer.start()
    prop = sampled_proposal(tiny_backend)
    sampled, spans = prop.completion.token_ids, prop.spans
    assert len(spans) >= 2
    before = trainer.proposal_logprobs(prop.messages, prop.json_schema, sampled)
    # under checkpoint 0 (B = 0) the adapter is the base: the base scoring equals the stored log-probs
    base = base_span_logprobs(tiny_backend, prop.messages, prop.json_schema, sampled, spans)
    assert base == pytest.approx([math.fsum(before[s:e]) for s, e in spans], abs=1e-4)
    rewards = [1.0] + [0.0] * (len(spans) - 1)
    for _ in range(3):  # earlier rounds rewarded the first candidate
        full = trainer.proposal_logprobs(prop.messages, prop.json_schema, sampled)
        g = ActionGroup(prop.messages, prop.json_schema, ["a"] * len(spans), rewards,
                        [full[s:e] for s, e in spans], sampled, spans)  # fmt: skip
        assert trainer.update([g]).applied
    after = trainer.proposal_logprobs(prop.messages, prop.json_schema, sampled)
    sums = [math.fsum(after[s:e]) for s, e in spans]
    untrained = _rollouts(prop, rewards, "adapters/0", [math.fsum(before[s:e]) for s, e in spans], group=1)
    later = _rollouts(prop, rewards, "adapters/3", sums, group=2)  # a later round rewards it again
    state = SearchState(rollouts={r.id: r for r in untrained + later})
    check = credit_check(state, tiny_backend)
    assert check.actions == len(spans)  # checkpoint 0 is the base: left out
    assert check.concordance == 1.0 and check.pairs == len(spans) - 1
    assert check.shift_better > 0.1 > check.shift_worse
    warm = credit_check(state, tiny_backend, warm=True)  # after a warm start checkpoint 0 counts
    assert warm.actions == 2 * len(spans)
    # rewarded the other way: every pair reversed (a reversed list left the pair of the two candidates the
    # updates did not reward to how the sampled proposal fell, a coin toss)
    flipped = _rollouts(prop, [-r for r in rewards], "adapters/3", sums, group=3)
    assert credit_check(SearchState(rollouts={r.id: r for r in flipped}), tiny_backend).concordance == 0.0


def test_arts_credit_on_a_run_without_ttt_says_what_to_do(tmp_path, capsys):
    from arts.search.cli.main import main
    from arts.search.store import Store

    with Store.open(tmp_path / "run", create=True) as store:
        store.add(Rollout(round=1, group=1, action="a", reward=1.0))
    assert main(["credit", str(tmp_path / "run")]) == 2
    assert "--ttt" in capsys.readouterr().err


def test_arts_credit_reads_a_ttt_run_and_writes_credit_json(tmp_path, tiny_model_dir, capsys):
    """Through the command: a finished TTT run's summary carries the check, and `arts credit` recomputes it
    from the store with the base weights alone (a fresh model, no adapter loaded): the same figures."""
    from arts.search.cli.main import main

    make_task(tmp_path / "task")
    out = subprocess.run(runner(tmp_path, tiny_model_dir, 4, resume=False), capture_output=True, text=True,
                         timeout=900)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert "credit check:" in out.stdout
    run = tmp_path / "run"
    summary = json.loads((run / "summary.json").read_text())["credit"]
    assert main(["credit", str(run), "--model", str(tiny_model_dir)]) == 0
    assert "credit check:" in capsys.readouterr().out
    again = json.loads((run / "credit.json").read_text())
    assert again["actions"] == summary["actions"] > 0 and again["pairs"] == summary["pairs"]
    if summary["concordance"] is not None:
        assert again["concordance"] == pytest.approx(summary["concordance"])


def test_a_groups_lists_are_scored_under_the_base_together_as_each_alone(tmp_path, tiny_backend):
    """The check scores a group's lists in one call (the prompt run once): each list's spans read what
    they read scored alone, and a list the grammar rejects reads None."""
    from arts.training.credit import base_lists_logprobs

    Trainer(tiny_backend, GRPOConfig(), tmp_path / "run").start()
    prop = sampled_proposal(tiny_backend)
    sampled, spans = prop.completion.token_ids, prop.spans
    other = sampled[: spans[0][1]]  # the same list cut after its first candidate: another row
    bad = tiny_backend.tokenizer.encode("not json", add_special_tokens=False)
    lists = [(sampled, spans), (other, spans[:1]), (bad, [(0, 1)])]
    together = base_lists_logprobs(tiny_backend, prop.messages, prop.json_schema, lists)
    assert together[2] is None
    for (tokens, at), got in zip(lists[:2], together):
        alone = base_span_logprobs(tiny_backend, prop.messages, prop.json_schema, tokens, at)
        assert got == pytest.approx(alone, abs=1e-4)
