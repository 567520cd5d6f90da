"""The test-time learner moves: several steps per update with the ratio and clipping acting, the KL bound
that stops them, the figures an update records, the checkpoint usage records name, and the warning a run
gets when its budget cannot give one update.

The learner samples at the scientist's default temperature. The defaults are checked on the embedded model
they were chosen for; the rest runs on the tiny random model (the tests are about what an update does to
the numbers, not about what a real model proposes).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict

import pytest

from arts.policy.scientist import Scientist, ScientistConfig
from arts.training.grpo import GRPOConfig
from arts.training.ttt import ADAPTER, ActionGroup, Trainer

STATE = "## Task\nChoose X so that value() is close to 3.\n\n## Nodes you may start from\n- node 1: score -4"
TEMPERATURE = ScientistConfig().temperature


def proposal(backend):
    """A verbalized proposal of three candidates sampled from the adapter at the default temperature."""
    scientist = Scientist(backend, ScientistConfig(candidates=3, max_tokens=400), adapter=ADAPTER)
    prop = scientist.propose(STATE, [1, 2], tail=False, seed=7)
    assert prop.spans and len(prop.spans) >= 2
    return prop


def span_group(trainer: Trainer, prop, rewards: list[float]) -> ActionGroup:
    """The drawn candidates' spans as the search hands them over, old log-probs under the adapter in force."""
    full = trainer.proposal_logprobs(prop.messages, prop.json_schema, prop.completion.token_ids)
    old = [full[s:e] for s, e in prop.spans]
    return ActionGroup(prop.messages, prop.json_schema, ["a"] * len(old), rewards, old,
                       prop.completion.token_ids, prop.spans)  # fmt: skip


def span_sums(trainer: Trainer, prop) -> list[float]:
    full = trainer.proposal_logprobs(prop.messages, prop.json_schema, prop.completion.token_ids)
    return [math.fsum(full[s:e]) for s, e in prop.spans]


@pytest.fixture(scope="module")
def embedded():
    """The embedded model, in this module's own backend (its test leaves a trained adapter behind)."""
    from arts.policy.backends.transformers import TransformersBackend

    return TransformersBackend(seed=0)


def test_default_updates_raise_the_paying_span_with_the_ratio_clipped(tmp_path, embedded):
    """The defaults, on the embedded model they were chosen for (docs/ttt-sweep.md): the paying candidate's
    own tokens gain probability from the first update, the others lose it, and clipping acts."""
    trainer = Trainer(embedded, GRPOConfig(), tmp_path / "run", temperature=TEMPERATURE)
    trainer.start()
    prop = proposal(embedded)
    rewards = [1.0] + [0.0] * (len(prop.spans) - 1)
    before = span_sums(trainer, prop)
    stats = [trainer.update([span_group(trainer, prop, rewards)]).stats for _ in range(2)]
    after = span_sums(trainer, prop)
    assert after[0] > before[0] + 0.5  # nats: the paying candidate's own tokens
    assert all(a < b for a, b in zip(after[1:], before[1:]))
    assert all(1 <= s.steps <= GRPOConfig().steps for s in stats) and sum(s.steps for s in stats) > 2
    assert max(s.clip_fraction for s in stats) > 0  # after the first step the ratio leaves 1 and clips
    assert all(s.kl_old > 0 and s.kl > 0 for s in stats)
    assert all(s.entropy > 0.5 * s.entropy_before > 0 for s in stats)  # no collapse


def test_the_kl_bound_stops_the_steps(tmp_path, tiny_backend):
    config = GRPOConfig(lr=1e-2, steps=8, kl_max=1e-6)
    trainer = Trainer(tiny_backend, config, tmp_path / "run", temperature=TEMPERATURE)
    trainer.start()
    prop = proposal(tiny_backend)
    stats = trainer.update([span_group(trainer, prop, [1.0] + [0.0] * (len(prop.spans) - 1))]).stats
    assert stats.kl_stop and stats.steps == 1  # the second step's forward already saw the bound passed
    assert stats.kl_old > config.kl_max
    free = Trainer(tiny_backend, config.model_copy(update={"kl_max": None}), tmp_path / "free",
                   temperature=TEMPERATURE)  # fmt: skip
    assert free.update([span_group(free, prop, [1.0] + [0.0] * (len(prop.spans) - 1))]).stats.steps == 8


def test_groups_without_spread_are_skipped_and_the_rest_normalised(tmp_path, tiny_backend):
    """Advantages are std-normalised per group: a group's scale of rewards does not change its update."""
    from arts.rewards import group_advantages

    assert group_advantages([10.0, 0.0, 0.0]) == pytest.approx(group_advantages([1.0, 0.0, 0.0]), abs=1e-5)
    trainer = Trainer(tiny_backend, GRPOConfig(), tmp_path / "run", temperature=TEMPERATURE)
    trainer.start()
    prop = proposal(tiny_backend)
    n = len(prop.spans)
    flat = span_group(trainer, prop, [0.5] * n)
    result = trainer.update([flat, span_group(trainer, prop, [1.0] + [0.0] * (n - 1))])
    assert (result.stats.groups_used, result.stats.groups_skipped) == (1, 1)


def test_usage_records_name_the_checkpoint_that_sampled(tmp_path, tiny_backend):
    records = []
    tiny_backend.usage_sink = records.append
    trainer = Trainer(tiny_backend, GRPOConfig(), tmp_path / "run", temperature=TEMPERATURE)
    trainer.start()
    prop = proposal(tiny_backend)
    assert records[-1].adapter == records[-1].model == "adapters/0"
    assert trainer.update([span_group(trainer, prop, [1.0] + [0.0] * (len(prop.spans) - 1))]).applied
    proposal(tiny_backend)
    assert records[-1].adapter == "adapters/1" and records[-1].purpose == "propose"
    tiny_backend.generate("hi", adapter=None)
    assert records[-1].adapter is None


def test_a_ttt_run_warns_when_its_budget_cannot_give_one_update(
    tmp_path, tiny_model_dir, monkeypatch, capsys
):
    import arts.search.run
    from arts.policy.backends.transformers import TransformersBackend
    from arts.search.cli.main import main
    from arts.search.config import SearchConfig
    from arts.search.run import ttt_budget_note
    from tests.doubles import RuleBackend, make_task

    def make(mc, sink, seed):
        if mc.backend == "transformers":
            return TransformersBackend(str(tiny_model_dir), usage_sink=sink, seed=seed)
        return RuleBackend(seed)

    monkeypatch.setattr(arts.search.run, "make_backend", make)
    task = make_task(tmp_path / "task")
    argv = ["search", str(task), "--ttt", "--group", "2", "-k", "2", "--audits", "0", "--rounds", "1",
            "--evals", "1", "--run-dir", str(tmp_path / "run"), "--set", "executor_model.backend=rules",
            "--set", "scientist.inspect=0"]  # fmt: skip
    main(argv)
    out = capsys.readouterr()
    assert "--ttt will not train" in out.out + out.err
    assert "at least 2 evaluations, and the budget is 1" in out.out + out.err
    assert not (tmp_path / "run/adapters/1").exists()
    enough = SearchConfig(ttt={"enabled": True}, group=2, budget={"evals": 2})
    assert ttt_budget_note(enough, "optimize") is None
    few_rounds = SearchConfig(ttt={"enabled": True, "grpo": {"update_every": 3}}, budget={"rounds": 2})
    assert "raise --rounds to at least 3" in ttt_budget_note(few_rounds, "optimize")


def test_arts_search_trains_the_move_the_stated_probability_and_replays_when_asked(
    tmp_path, tiny_model_dir, monkeypatch
):
    """`--set ttt.grpo.train_on=move --set ttt.grpo.weight_coef=5 --set ttt.grpo.replay=1 --set
    scientist.axis_first=true` through `arts search`: every applied update counts the moves' tokens only,
    carries the stated-probability loss, and trains on the previous round's groups again beside its own;
    every sampled list names each candidate's axis before its hypothesis."""
    from transformers import AutoTokenizer

    import arts.search.run
    from arts.policy.backends.transformers import TransformersBackend
    from arts.search.cli.main import main
    from arts.search.store import Store
    from tests.doubles import RuleBackend, make_task

    def make(mc, sink, seed):
        if mc.backend == "transformers":
            return TransformersBackend(str(tiny_model_dir), usage_sink=sink, seed=seed)
        return RuleBackend(seed)

    monkeypatch.setattr(arts.search.run, "make_backend", make)
    task, run = make_task(tmp_path / "task"), tmp_path / "run"
    argv = ["search", str(task), "--ttt", "--group", "4", "-k", "2", "--audits", "0", "--rounds", "4",
            "--evals", "400", "--run-dir", str(run), "--set", "executor_model.backend=rules"]  # fmt: skip
    for s in ("scientist.inspect=0", "scientist.parents=3", "scientist.max_tokens=640", "ttt.grpo.lr=1e-2",
              "ttt.grpo.train_on=move", "ttt.grpo.weight_coef=5", "ttt.grpo.replay=1",
              "scientist.axis_first=true"):  # fmt: skip
        argv += ["--set", s]
    main(argv)
    with Store.open(run, create=False) as store:
        updates = [e.payload for e in store.events("update")]
        examined = updates + [e.payload for e in store.events("update_skipped")]
        rewarded = store.load_state().rollouts.values()
    assert updates and all(u["weight_loss"] != 0 and 0 < u["tokens"] < 12 * u["samples"] for u in updates)
    groups = defaultdict(set)
    for r in rewarded:
        if r.reward is not None and r.old_logprob is not None:
            groups[r.round].add(r.group)
    assert len(examined) == 4 and sum(len(g) for g in groups.values()) >= 3
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    lists = {tok.decode(r.tokens) for r in rewarded if r.tokens}
    assert lists and all(t.index('"axis"') < t.index('"hypothesis"') for t in lists if '"hypothesis"' in t)
    written = [m for t in lists for m in re.findall(r'"axis": "([^"]*)", "hypothesis": "\w+ ([^" ]+)', t)]
    assert written and all(axis == target for axis, target in written)  # the axis is the target it moves
    for e in examined:  # its own round's groups and the round before's
        assert e["groups_used"] + e["groups_skipped"] == len(groups[e["round"]] | groups[e["round"] - 1])
