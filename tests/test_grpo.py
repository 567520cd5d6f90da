"""GRPO on LoRA: the config's rules, group advantages, the mask-consistent ratio, and learning.

Real-model tests get their own backend (`trained_backend`), not the session's `embedded_backend`:
they leave trained adapters behind, and other tests call the shared model directly.
"""

from __future__ import annotations

import json

import pytest
import torch

from arts.policy.proposal_schema import candidate_schema
from arts.rewards import group_advantages
from arts.training.grpo import Group, GRPOConfig, UpdateStats, grpo_update, lora_config, make_optimizer
from arts.training.logprobs import adapter_scope, build_targets, grammar_text, score_targets, target_logprobs

PROMPT = [
    {"role": "system", "content": "You are a research scientist running experiments. Answer with JSON only."},
    {"role": "user", "content": "Nodes: 1 (seed, score 0.96), 2 (score 1.20). Propose the next experiment."},
]
ACTIONS = [
    {"parent": 2, "hypothesis": "Increase the learning rate warm-up to 500 steps", "axis": "optimiser"},
    {"parent": 1, "hypothesis": "Replace the greedy initialisation with a hexagonal grid", "axis": "init"},
    {"parent": 2, "hypothesis": "Add a second refinement pass with smaller steps", "axis": "refinement"},
    {"parent": 1, "hypothesis": "Shrink all radii by one percent before packing", "axis": "radii"},
]
SCHEMA = candidate_schema([1, 2])


@pytest.fixture(scope="module")
def trained_backend():
    from arts.policy.backends.transformers import TransformersBackend

    return TransformersBackend(seed=0)


def attach(backend, name: str, config: GRPOConfig) -> torch.optim.Optimizer:
    torch.manual_seed(0)
    backend.add_adapter(name, lora_config(config))
    return make_optimizer(backend.model, name, config)


def make_group(backend, name: str, rewards: list[float], actions=ACTIONS) -> Group:
    """A group as TTT builds it: grammar-form targets, old log-probs under the adapter in force."""
    targets = build_targets(backend, SCHEMA, [grammar_text(a) for a in actions])
    assert all(t is not None for t in targets)
    prompt_ids = backend.encode_prompt(PROMPT)
    with adapter_scope(backend.model, name):
        old = score_targets(backend.model, prompt_ids, targets, backend.tokenizer.pad_token_id)
    return Group(prompt_ids, targets, rewards, old)


def lora_weights(model, name: str) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if f".{name}." in n}


def update(backend, name, groups, config, optimizer) -> UpdateStats:
    with adapter_scope(backend.model, name):
        return grpo_update(backend.model, backend.tokenizer, groups, config, optimizer)


def test_config_checks_its_cross_field_rules():
    with pytest.raises(ValueError, match="clip_eps_high"):
        GRPOConfig(clip_eps=0.3, clip_eps_high=0.2)
    with pytest.raises(ValueError, match="target_modules"):
        GRPOConfig(target_modules=[])
    with pytest.raises(ValueError, match="extra"):
        GRPOConfig(learning_rate=1e-3)
    assert GRPOConfig(clip_eps_high=0.28).clip_eps_high == 0.28


def test_advantages_sum_to_zero_in_a_group():
    for rewards in ([1.0, 0.0, 0.0, 0.0], [0.3, 0.9, 0.1], [5.0, -2.0, 0.5, 0.5, 1.0]):
        adv = group_advantages(rewards)
        assert abs(sum(adv)) < 1e-9 and max(adv) > 0 > min(adv)
    assert group_advantages([1.0, 1.0, 1.0]) == [0.0, 0.0, 0.0]


def test_grammar_text_is_what_the_grammar_accepts(tiny_backend):
    from arts.policy.proposal_schema import canonical_action

    compact = json.dumps(ACTIONS[0], separators=(",", ":"))
    assert build_targets(tiny_backend, SCHEMA, [compact]) == [None]  # compact JSON is off-grammar
    (target,) = build_targets(tiny_backend, SCHEMA, [canonical_action(ACTIONS[0])])
    assert target.tokens[-1] == tiny_backend.tokenizer.eos_token_id
    assert grammar_text(compact) == canonical_action(ACTIONS[0]) == grammar_text(grammar_text(compact))
    quoted = dict(ACTIONS[0], hypothesis='use a "quoted" word here')
    assert build_targets(tiny_backend, SCHEMA, [grammar_text(quoted)]) == [None]  # no escapes allowed


def test_one_update_changes_the_adapter_and_leaves_the_base_untouched(tiny_backend):
    config = GRPOConfig(lr=1e-3)
    opt = attach(tiny_backend, "learner", config)
    base = {n: p.detach().clone() for n, p in tiny_backend.model.named_parameters() if "lora_" not in n}
    before = lora_weights(tiny_backend.model, "learner")
    stats = update(tiny_backend, "learner", [make_group(tiny_backend, "learner", [1, 0, 0, 1])], config, opt)
    after = lora_weights(tiny_backend.model, "learner")
    assert stats.groups_used == 1 and stats.samples == 4 and stats.tokens > 0 and stats.grad_norm > 0
    changed = [n for n in before if not torch.equal(before[n], after[n])]
    assert any("lora_B" in n for n in changed)
    for n, p in tiny_backend.model.named_parameters():
        if "lora_" not in n:
            assert torch.equal(p, base[n]), n


def test_without_the_prompt_gradient_the_values_are_the_same_and_the_action_still_learns(tiny_backend):
    """`prompt_grad = False`: the same log-probs (so the same ratio), no gradient through the prompt's
    positions, and the rewarded action still gains."""
    from arts.training.logprobs import target_scores

    config = GRPOConfig(lr=1e-2, steps=2, prompt_grad=False)
    opt = attach(tiny_backend, "noprompt", config)
    group = make_group(tiny_backend, "noprompt", [1, 0, 0, 0])
    pad = tiny_backend.tokenizer.pad_token_id
    with adapter_scope(tiny_backend.model, "noprompt"):
        full, _, _ = target_scores(tiny_backend.model, group.prompt_ids, group.targets, pad)
        cut, _, _ = target_scores(tiny_backend.model, group.prompt_ids, group.targets, pad, prompt_grad=False)
    assert torch.equal(full, cut) and cut.requires_grad
    start = sum(group.old_logprobs[0])
    stats = update(tiny_backend, "noprompt", [group], config, opt)
    assert stats.steps == 2 and stats.grad_norm > 0
    assert sum(make_group(tiny_backend, "noprompt", [1, 0, 0, 0]).old_logprobs[0]) > start


def test_an_update_of_the_output_head_alone_runs_the_body_once_with_the_same_result(tiny_backend, monkeypatch):
    """LoRA on `lm_head` only: the body's hidden states are computed once per update and the head alone
    runs per step; the update's figures and the log-probs it leaves equal the full forward's (Adam's first
    steps move a weight whose gradient is float noise by the learning rate, so the weights are not compared)."""
    import arts.policy.backends.scoring as scoring
    import arts.training.grpo as grpo

    config = GRPOConfig(lr=1e-2, steps=3, target_modules=["lm_head"], kl_coef=0.1, kl_max=None)
    got = {}
    for name, alone in (("whole", False), ("head", True)):
        opt = attach(tiny_backend, name, config)
        group = make_group(tiny_backend, name, [1, 0, 0.5, 0])
        monkeypatch.setattr(grpo, "head_alone", lambda model, alone=alone: alone)
        bodies = []
        monkeypatch.setattr(scoring, "_body", lambda *a, bodies=bodies, f=scoring._body: bodies.append(1) or f(*a))
        stats = update(tiny_backend, name, [group], config, opt)
        after = [sum(v) for v in make_group(tiny_backend, name, [1, 0, 0.5, 0]).old_logprobs]
        got[name] = (stats, len(bodies), after)
    (whole, whole_bodies, whole_w), (head, head_bodies, head_w) = got["whole"], got["head"]
    assert whole_bodies == 0 and head_bodies == 2  # the prompt and the completions, once
    for k in ("loss", "kl", "kl_old", "entropy", "clip_fraction"):
        assert getattr(head, k) == pytest.approx(getattr(whole, k), rel=1e-2, abs=1e-6), k  # float order
    assert head.steps == whole.steps == 3
    assert head_w == pytest.approx(whole_w, abs=1e-2)  # the actions' log-probs the two adapters give
    assert head_w[0] > sum(group.old_logprobs[0]) + 0.1


def test_only_an_adapter_on_a_plain_output_head_counts_as_the_head_alone(tiny_backend):
    from arts.training.grpo import head_alone

    for name, modules, alone in (("h", ["lm_head"], True), ("b", "all-linear", False)):
        attach(tiny_backend, name, GRPOConfig(target_modules=modules))
        with adapter_scope(tiny_backend.model, name):
            assert head_alone(tiny_backend.model) is alone
    with adapter_scope(tiny_backend.model, "h"):
        tiny_backend.model.get_base_model().config.final_logit_softcapping = 30.0
        try:
            assert not head_alone(tiny_backend.model)
        finally:
            tiny_backend.model.get_base_model().config.final_logit_softcapping = None


def test_kl_penalty_uses_the_base_model_without_a_copy(tiny_backend):
    config = GRPOConfig(lr=1e-2, kl_coef=0.1, steps=2)
    opt = attach(tiny_backend, "learner", config)
    group = make_group(tiny_backend, "learner", [1, 0, 0, 0])
    stats = update(tiny_backend, "learner", [group], config, opt)
    assert stats.kl > 0  # the second step runs after the first: the adapter has left the base
    assert 0 <= stats.clip_fraction <= 1


def test_kl_is_measured_without_the_penalty(tiny_backend):
    """The drift to the base is a diagnostic every update reports, not only a loss term."""
    config = GRPOConfig(lr=1e-2, steps=2)
    opt = attach(tiny_backend, "drift", config)
    stats = update(tiny_backend, "drift", [make_group(tiny_backend, "drift", [1, 0, 0, 0])], config, opt)
    assert config.kl_coef == 0 and stats.kl > 0


def test_masked_ratio_is_one_before_the_first_update(trained_backend):
    """Old log-probs recorded under the grammar mask, new ones from the training forward under the same
    mask: the ratio is exactly 1 when both batch the same rows (as in one update), and 1 to float
    rounding (< 1e-4, as the backend's sampled-vs-rescored check) against the backend's own
    one-row `logprobs`, which is what sampling recorded."""
    config = GRPOConfig()
    attach(trained_backend, "ratio", config)
    group = make_group(trained_backend, "ratio", [1, 0, 0, 0])
    with adapter_scope(trained_backend.model, "ratio"):
        new, mask = target_logprobs(trained_backend.model, group.prompt_ids, group.targets, 0)
    assert new.requires_grad
    for row, target in enumerate(group.targets):
        values = new[row, : len(target.tokens)].detach()
        assert torch.equal(torch.exp(values - torch.tensor(group.old_logprobs[row])), torch.ones(len(values)))
        sampled = trained_backend.logprobs(PROMPT, target.tokens, schema=SCHEMA, adapter="ratio")
        assert (torch.exp(values - torch.tensor(sampled)) - 1).abs().max() < 1e-4
        unmasked = trained_backend.logprobs(PROMPT, target.tokens, adapter="ratio")
        assert sum(unmasked) < sum(sampled) - 1.0  # without the mask the ratio would be far from 1


def test_the_first_step_takes_old_from_its_own_forward_and_reports_the_given_ones_drift(tiny_backend):
    """Old log-probs scored in other batch shapes (in bf16 they were up to 0.31 nats off) do not enter the
    ratio: it starts at exactly 1, no token is clipped at the first step, and the drift is reported."""
    config = GRPOConfig(steps=1, kl_max=None)
    optimizer = attach(tiny_backend, "drift", config)
    group = make_group(tiny_backend, "drift", [1, 0, 0, 0])
    group.old_logprobs = [[v + 0.3 for v in row] for row in group.old_logprobs]  # outside the clip range
    stats = update(tiny_backend, "drift", [group], config, optimizer)
    assert stats.steps == 1 and stats.clip_fraction == 0.0
    assert stats.old_drift == pytest.approx(0.3, abs=1e-4)
    group.replayed = True  # trained on again (`replay`): its given log-probs are an earlier policy's
    stats = update(tiny_backend, "drift", [group], config, optimizer)
    assert stats.steps == 1 and stats.clip_fraction == 0.0 and stats.old_drift == 0.0


def test_equal_rewards_leave_the_adapter_unchanged(trained_backend):
    config = GRPOConfig(lr=1e-3)
    opt = attach(trained_backend, "flat", config)
    before = lora_weights(trained_backend.model, "flat")
    stats = update(trained_backend, "flat", [make_group(trained_backend, "flat", [1, 1, 1, 1])], config, opt)
    assert (stats.groups_used, stats.groups_skipped, stats.loss) == (0, 1, 0.0)
    after = lora_weights(trained_backend.model, "flat")
    assert all(torch.equal(before[n], after[n]) for n in before)


def test_the_rewarded_action_gains_probability_on_the_real_model(trained_backend):
    """One action of four is always rewarded; three updates at the default rate raise its masked
    log-prob and lower the others'."""
    config = GRPOConfig()
    opt = attach(trained_backend, "learn", config)
    start = [sum(v) for v in make_group(trained_backend, "learn", [1, 0, 0, 0]).old_logprobs]
    for _ in range(3):
        stats = update(
            trained_backend, "learn", [make_group(trained_backend, "learn", [1, 0, 0, 0])], config, opt
        )
        assert stats.groups_used == 1
    end = [sum(v) for v in make_group(trained_backend, "learn", [1, 0, 0, 0]).old_logprobs]
    assert end[0] > start[0] + 0.5
    assert all(e < s for e, s in zip(end[1:], start[1:]))
