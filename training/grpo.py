"""GRPO on a LoRA adapter: the config, the group loss and one update over groups of actions.

A group is the N actions drawn from one state prompt. Each action's reward is normalised within its
group (`rewards.group_advantages`), so what the state alone explains cancels; a group whose rewards are
all equal carries no signal and is skipped. The loss is the clipped-ratio objective, per action token:
`-min(r A, clip(r, 1-eps, 1+eps_high) A)` with `r = exp(new - old)`, both log-probs taken under the
same grammar mask, averaged over the group's action tokens; an optional KL penalty to the base model
is computed by disabling the adapter (no second model copy).

Why not TRL's `GRPOTrainer`: it samples the completions itself and calls the reward inside its step,
while here the reward is an experiment the search runs between sampling and training, and the
completions are grammar-constrained actions drawn by an external sampler. The issue measured, for
N=4, 585 prompt tokens, 60-token completions, LoRA r=8 on all linear layers: 31-42 s and 9.4 GB per
update with GRPOTrainer, 16-21 s and 8.4 GB for a plain padded batch, 5.6-7.7 s and 4.1 GB when the
prompt runs once with gradients and its KV cache is shared by the N completions
(`policy.backends.decoding.completion_logprobs`), which is what `grpo_update` does; `scripts/bench_grpo.py`
measures the last two here. The loss follows TRL's `_compute_loss` (token-level clipped ratio, k3 KL
estimator), written out because TRL keeps it inside the trainer, not as a function.

torch and peft are imported inside the functions: `search.config` imports `GRPOConfig`, and loading
a config (or `arts tasks list`) should not pay torch's import.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from arts.rewards import group_advantages, is_degenerate

if TYPE_CHECKING:
    import torch

    from arts.training.logprobs import ActionTarget


class GRPOConfig(BaseModel):
    """LoRA GRPO for test-time training (`arts search --ttt`) and its schedule."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    lora_rank: int = Field(8, ge=1, le=256)
    """LoRA rank r of every adapted layer (vLLM serves up to `max_lora_rank`, 16 by default)."""
    lora_alpha: float = Field(16.0, gt=0)
    """LoRA scale numerator: the update is scaled by alpha / r."""
    target_modules: str | list[str] = "all-linear"
    """Layers that get LoRA: peft's "all-linear" (every linear layer but the output head) or names."""
    lr: float = Field(2e-4, gt=0, le=1e-2)
    """AdamW learning rate. Test-time training makes one step per update on a handful of actions, so it
    sits at the high end of usual LoRA rates; 2e-4 moved the rewarded action's log-prob on the
    embedded model within 3 updates (tests/test_grpo.py)."""
    weight_decay: float = Field(0.0, ge=0)
    """AdamW weight decay (0: an adapter only moves where rewards say so)."""
    clip_eps: float = Field(0.2, gt=0, lt=1)
    """Lower clip of the ratio, and the upper one unless `clip_eps_high` is set."""
    clip_eps_high: float | None = Field(None, gt=0)
    """Upper clip of the ratio (DAPO's clip-higher); None means `clip_eps`."""
    kl_coef: float = Field(0.0, ge=0)
    """Weight of the per-token KL penalty to the base model (the adapter disabled); 0 turns it off."""
    update_every: int = Field(1, ge=1)
    """M: rounds between updates; each update trains on the groups collected since the previous one."""
    epochs: int = Field(1, ge=1, le=16)
    """Passes over the collected groups per update (one optimizer step each; ratios leave 1 after the
    first, which is where clipping starts to act)."""
    max_grad_norm: float | None = Field(1.0, gt=0)
    """Clip the adapter's gradient norm to this; None leaves it unclipped."""

    @model_validator(mode="after")
    def _clip_range(self) -> GRPOConfig:
        if self.clip_eps_high is not None and self.clip_eps_high < self.clip_eps:
            raise ValueError(
                f"grpo.clip_eps_high ({self.clip_eps_high}) is below grpo.clip_eps ({self.clip_eps}); "
                "set clip_eps_high >= clip_eps, or leave it unset for a symmetric clip"
            )
        return self

    @model_validator(mode="after")
    def _targets_given(self) -> GRPOConfig:
        if isinstance(self.target_modules, list) and not self.target_modules:
            raise ValueError(
                'grpo.target_modules is empty; name layers (e.g. ["q_proj"]) or use "all-linear"'
            )
        return self


class UpdateStats(BaseModel):
    """What one update did (logged as the `update` event and kept in `trainer_state.json`)."""

    model_config = ConfigDict(extra="forbid")
    loss: float = 0.0
    """Mean loss over the used groups and epochs (0 when nothing was trained)."""
    reward_mean: float = 0.0
    """Mean reward over every action of every group given (used or skipped)."""
    groups_used: int = 0
    groups_skipped: int = 0
    """Degenerate groups (all rewards equal, or fewer than two actions): no signal, no gradient."""
    samples: int = 0
    """Actions in the used groups."""
    tokens: int = 0
    """Action tokens trained on, per epoch."""
    clip_fraction: float = 0.0
    """Share of action tokens whose ratio was clipped (0 in the first epoch: the ratio is 1 there)."""
    kl: float = 0.0
    """Mean per-token KL (k3 estimate) of the adapter to the base model on the groups' action tokens: always
    measured, as the drift diagnostic; part of the loss only when kl_coef > 0."""
    grad_norm: float = 0.0
    """Gradient norm before clipping, at the last step."""
    seconds: float = 0.0


@dataclass
class Group:
    """The N actions drawn from one state prompt, with their rewards and per-token old log-probs."""

    prompt_ids: list[int]
    targets: list[ActionTarget]
    rewards: list[float]
    old_logprobs: list[list[float]]

    def __post_init__(self) -> None:
        n = len(self.targets)
        if len(self.rewards) != n or len(self.old_logprobs) != n:
            raise ValueError(
                f"a group needs one reward and one old log-prob list per action: {n} targets, "
                f"{len(self.rewards)} rewards, {len(self.old_logprobs)} old log-prob lists"
            )
        for t, old in zip(self.targets, self.old_logprobs):
            start, end = t.trained
            if end - start != len(old):
                raise ValueError(
                    f"old log-probs cover {len(old)} tokens, the target's action has {end - start}"
                )


def lora_config(config: GRPOConfig) -> Any:
    """The peft LoraConfig: no dropout, so that a forward with gradients equals the scoring forward."""
    from peft import LoraConfig

    return LoraConfig(
        r=config.lora_rank,
        lora_alpha=config.lora_alpha,
        target_modules=config.target_modules,
        lora_dropout=0.0,
        bias="none",
        task_type="CAUSAL_LM",
    )


def adapter_parameters(model: Any, adapter: str) -> list[torch.nn.Parameter]:
    """The adapter's LoRA parameters, in named order (a stable order for saved optimizer state)."""
    params = [p for n, p in model.named_parameters() if f".{adapter}." in n and "lora_" in n]
    if not params:
        raise ValueError(f"the model has no LoRA parameters for adapter {adapter!r}; add the adapter first")
    return params


def make_optimizer(model: Any, adapter: str, config: GRPOConfig) -> torch.optim.Optimizer:
    import torch

    return torch.optim.AdamW(
        adapter_parameters(model, adapter), lr=config.lr, weight_decay=config.weight_decay
    )


def group_loss(
    model: Any, group: Group, advantages: list[float], config: GRPOConfig, pad_id: int
) -> tuple[torch.Tensor, dict[str, float]]:
    """The clipped-ratio loss of one group, averaged over its action tokens, and its diagnostics."""
    import torch

    from arts.training.logprobs import loss_mask, target_logprobs

    new, valid = target_logprobs(model, group.prompt_ids, group.targets, pad_id)
    mask = valid & loss_mask(group.targets, tuple(valid.shape)).to(valid.device)  # the actions' own tokens
    old = torch.zeros_like(new)
    for row, (t, values) in enumerate(zip(group.targets, group.old_logprobs)):
        start, end = t.trained
        old[row, start:end] = torch.tensor(values, dtype=new.dtype)
    adv = torch.tensor(advantages, dtype=new.dtype, device=new.device)[:, None]
    ratio = torch.exp(new - old)
    high = config.clip_eps_high if config.clip_eps_high is not None else config.clip_eps
    clipped = ratio.clamp(1 - config.clip_eps, 1 + high)
    per_token = -torch.min(ratio * adv, clipped * adv)
    info = {"clipped": float(((ratio != clipped) & mask).sum()), "tokens": float(mask.sum()), "kl": 0.0}
    with torch.no_grad(), model.disable_adapter():
        ref, _ = target_logprobs(model, group.prompt_ids, group.targets, pad_id)
    delta = (ref - new).masked_fill(~mask, 0.0)  # padding's log-probs are not finite
    kl = torch.exp(delta) - delta - 1  # k3 estimator, as TRL's GRPO
    info["kl"] = float((kl.detach() * mask).sum())
    if config.kl_coef > 0:
        per_token = per_token + config.kl_coef * kl
    loss = (per_token * mask).sum() / mask.sum()
    if not torch.isfinite(loss):
        raise FloatingPointError(
            "GRPO loss is not finite: an action token lies outside its grammar mask; "
            "leave such targets out (training.logprobs.build_targets returns None for them)"
        )
    return loss, info


def grpo_update(
    model: Any, tokenizer: Any, groups: list[Group], config: GRPOConfig, optimizer: torch.optim.Optimizer
) -> UpdateStats:
    """One GRPO update: `config.epochs` optimizer steps, each accumulating every usable group's loss.

    `model` is the peft model with the trained adapter active; `tokenizer` gives the padding id.
    Degenerate groups are skipped; when all are, no step is taken and the adapter stays as it was.
    """
    import torch

    start = time.perf_counter()
    rewards = [r for g in groups for r in g.rewards]
    stats = UpdateStats(reward_mean=sum(rewards) / len(rewards) if rewards else 0.0)
    usable = [(g, group_advantages(g.rewards)) for g in groups if not is_degenerate(g.rewards)]
    stats.groups_used, stats.groups_skipped = len(usable), len(groups) - len(usable)
    if not usable:
        stats.seconds = time.perf_counter() - start
        return stats
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    params = [p for pg in optimizer.param_groups for p in pg["params"]]
    losses, clipped, tokens, kl = [], 0.0, 0.0, 0.0
    for _ in range(config.epochs):
        optimizer.zero_grad(set_to_none=True)
        for group, advantages in usable:
            loss, info = group_loss(model, group, advantages, config, pad_id)
            (loss / len(usable)).backward()
            losses.append(float(loss.detach()))
            clipped, tokens, kl = clipped + info["clipped"], tokens + info["tokens"], kl + info["kl"]
        norm = torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm or math.inf)
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    stats.loss = sum(losses) / len(losses)
    stats.samples = sum(len(g.targets) for g, _ in usable)
    stats.tokens = int(tokens / config.epochs)
    stats.clip_fraction, stats.kl = clipped / tokens, kl / tokens
    stats.grad_norm = float(norm)
    stats.seconds = time.perf_counter() - start
    return stats
