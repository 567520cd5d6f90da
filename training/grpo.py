"""GRPO on a LoRA adapter: the group loss and one update over groups of actions (the config:
`training.grpo_config`).

A group is the N actions drawn from one state prompt. Each action's reward is normalised within its
group (`rewards.group_advantages`), so what the state alone explains cancels; a group whose rewards are
all equal carries no signal and is skipped. The loss is the clipped-ratio objective, per action token:
`-min(r A, clip(r, 1-eps, 1+eps_high) A)` with `r = exp(new - old)`, both log-probs taken under the
same grammar mask and sampling temperature, averaged over the group's action tokens. `old` is the first
step's own forward, detached: the adapter in force when an update starts sampled every new group (no
update happens between), so that forward is the sampling policy's log-probs, in the same batch shapes as
every later step (the ratio starts at exactly 1 in any dtype; in bf16 the log-probs scored at sampling
time were up to 0.31 nats off); a replayed group (`replay`) is trained from the policy in force the same
way. The log-probs given with a new group are checked against it (`UpdateStats.old_drift`). An update takes
several optimizer steps on the same groups (so the ratio leaves 1 and clipping acts), and stops early
once the adapter's KL to the sampling policy passes a bound; the KL to the base model (the adapter
disabled, no second model copy, computed once per update) is always measured and optionally penalised.
Every pass scores only the positions the loss reads (the output head and the softmax over the vocabulary
run there alone), the state prompt runs once per update when no gradient goes through it, and where the
output head is all that is trained the body runs once per update (`head_alone`; docs/ttt-sweep.md).

Why not TRL's `GRPOTrainer`: it samples the completions itself and calls the reward inside its step,
while here the reward is an experiment the search runs between sampling and training, and the
completions are grammar-constrained actions drawn by an external sampler. Measured for N=4, 585 prompt
tokens, 60-token completions, LoRA r=8 on all linear layers: 31-42 s and 9.4 GB per update with
GRPOTrainer, 5.6-7.7 s and 4.1 GB when the prompt runs once and its KV cache is shared by the N
completions (`policy.backends.scoring.completion_logprobs`), as `grpo_update` does (`scripts/bench_grpo.py`).
The loss follows TRL's `_compute_loss` (token-level clipped ratio, k3 KL estimator), written out
because TRL keeps it inside the trainer, not as a function.

torch and peft are imported inside the functions: `search.config` imports `GRPOConfig`, and loading
a config (or `arts tasks list`) should not pay torch's import.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from arts.rewards import group_advantages, is_degenerate
from arts.training.grpo_config import GRPOConfig

if TYPE_CHECKING:
    import torch

    from arts.training.logprobs import ActionTarget


class UpdateStats(BaseModel):
    """What one update did (logged as the `update` event and kept in `trainer_state.json`)."""

    model_config = ConfigDict(extra="forbid")
    loss: float = 0.0
    """Mean loss over the used groups and steps (0 when nothing was trained)."""
    reward_mean: float = 0.0
    """Mean reward over every action of every group given (used or skipped)."""
    groups_used: int = 0
    groups_skipped: int = 0
    """Degenerate groups (all rewards equal, or fewer than two actions): no signal, no gradient."""
    samples: int = 0
    """Actions in the used groups."""
    tokens: int = 0
    """Action tokens trained on, per step."""
    steps: int = 0
    """Optimizer steps taken (`steps` of the config, fewer when the KL bound stopped them)."""
    kl_stop: bool = False
    """The KL bound (`kl_max`) ended the steps early."""
    old_drift: float = 0.0
    """Largest |given - recomputed| old log-prob over the action tokens: how far the log-probs scored at
    sampling time were from the update's own first forward (float32: ~1e-5; bf16: up to ~0.3)."""
    clip_fraction: float = 0.0
    """Share of action tokens, over the steps taken, whose ratio was clipped (none in the first step: the
    ratio is 1 there)."""
    kl: float = 0.0
    """Mean per-token KL (k3 estimate) of the adapter after the update to the base model, on the groups'
    action tokens: the drift, always measured; part of the loss only when kl_coef > 0."""
    kl_old: float = 0.0
    """The same to the policy that sampled the groups (the adapter before the update): how far one
    update moved."""
    entropy_before: float = 0.0
    """Mean per-token entropy (nats) of the sampling distribution (grammar mask, temperature) at the
    action tokens before the update."""
    entropy: float = 0.0
    """The same after the update: a collapse towards 0 means the scientist stopped exploring."""
    weight_loss: float = 0.0
    """Mean of the stated-probability loss over the used groups and steps (`weight_coef`; 0 when off)."""
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
    replayed: bool = False
    """Sampled before the previous update (`GRPOConfig.replay`): its given log-probs are not checked."""

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


def head_alone(model: Any) -> bool:
    """Whether the output head is all that is trained, and the logits are its plain output (no scale or
    soft cap after it): the body's hidden states are then the same for every pass of an update."""
    from arts.policy.backends.decoding import hf_model

    hf = hf_model(model)
    head = hf.get_output_embeddings()
    trained = [p for p in model.parameters() if p.requires_grad]
    if head is None or not trained:
        return False
    owned = {id(p) for p in head.parameters()}
    scaled = any(
        getattr(hf.config, k, None) for k in ("final_logit_softcapping", "logit_scale", "logits_scaling")
    )
    return not scaled and all(id(p) in owned for p in trained)


def group_loss(
    model: Any, group: Group, advantages: list[float], config: GRPOConfig, pad_id: int,
    ref: torch.Tensor, temperature: float = 1.0, old: torch.Tensor | None = None,
    stated_ids: tuple[int, int, list[int]] | None = None, prompt: Any = None, hidden: Any = None,
) -> tuple[torch.Tensor, dict[str, float], torch.Tensor]:  # fmt: skip
    """The clipped-ratio loss of one group, averaged over its action tokens, its diagnostics (`measure`'s
    sums) and the old log-probs it used. `ref`: the group's log-probs under the base model (`reference`);
    `old`: the first step's (None: this is the first step, whose own forward, detached, becomes old);
    `prompt`: the group's prompt as run at the update's start (`policy.backends.scoring.prompt_state`);
    `hidden`: the body's hidden states, where only the output head is trained (`logprobs.target_hidden`)."""
    import torch

    from arts.training.stated import weight_loss

    weighing = config.weight_coef > 0 and stated_ids is not None and any(t.stated_at for t in group.targets)
    seen: dict[str, torch.Tensor] = {}
    keep = seen.__setitem__ if weighing else None
    new, mask, given, entropy = _scored(
        model,
        group,
        pad_id,
        temperature,
        config.prompt_grad,
        (lambda every, column: keep("every", (every, column))) if keep else None,
        prompt,
        hidden,
    )
    fresh = old is None and not group.replayed
    drift = float((new.detach() - given).abs().masked_fill(~mask, 0).max()) if fresh else 0.0
    old = new.detach() if old is None else old
    adv = torch.tensor(advantages, dtype=new.dtype, device=new.device)[:, None]
    ratio = torch.exp(new - old)
    high = config.clip_eps_high if config.clip_eps_high is not None else config.clip_eps
    clipped = ratio.clamp(1 - config.clip_eps, 1 + high)
    per_token = -torch.min(ratio * adv, clipped * adv)
    info = _sums(new.detach(), old, ref, mask, entropy)
    info["clipped"] = float(((ratio != clipped) & mask).sum())
    info["drift"] = drift
    if config.kl_coef > 0:
        per_token = per_token + config.kl_coef * _k3(ref - new, mask)
    loss = (per_token * mask).sum() / mask.sum()
    info["weight_loss"] = 0.0
    if weighing:
        term = config.weight_coef * weight_loss(
            seen["every"][0], group.targets, advantages, stated_ids, seen["every"][1]
        )
        info["weight_loss"] = float(term.detach())
        loss = loss + term
    if not torch.isfinite(loss):
        raise FloatingPointError(
            "GRPO loss is not finite: an action token lies outside its grammar mask; "
            "leave such targets out (training.logprobs.build_targets returns None for them)"
        )
    return loss, info, old


def reference(
    model: Any, group: Group, pad_id: int, temperature: float = 1.0, hidden: Any = None
) -> torch.Tensor:
    """The group's per-token log-probs under the base model (every adapter off): the KL's reference,
    computed once per update, since the base does not move."""
    import torch

    from arts.training.logprobs import target_logprobs

    with torch.no_grad(), model.disable_adapter():
        return target_logprobs(model, group.prompt_ids, group.targets, pad_id, temperature, True, hidden)[0]


def measure(
    model: Any, group: Group, pad_id: int, ref: torch.Tensor, temperature: float = 1.0,
    old: torch.Tensor | None = None, hidden: Any = None,
) -> dict[str, float]:  # fmt: skip
    """Sums over the group's action tokens under the weights now: KL to the base and to the old policy
    (k3; `old`, else the group's given log-probs), entropy, and the token count."""
    import torch

    with torch.no_grad():
        new, mask, given, entropy = _scored(model, group, pad_id, temperature, hidden=hidden)
    return _sums(new, given if old is None else old, ref, mask, entropy)


def _scored(
    model: Any,
    group: Group,
    pad_id: int,
    temperature: float,
    prompt_grad: bool = True,
    distribution: Any = None,
    prompt: Any = None,
    hidden: Any = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """New log-probs (with gradients when grad mode is on), the action-token mask, the old log-probs laid
    out like them, and the entropy; only the positions the loss reads are scored (`scored_positions`)."""
    import torch

    from arts.training.logprobs import loss_mask, target_scores

    new, valid, entropy = target_scores(
        model, group.prompt_ids, group.targets, pad_id, temperature, prompt_grad, distribution,
        only=True, prompt=prompt, hidden=hidden,
    )  # fmt: skip
    mask = valid & loss_mask(group.targets, tuple(valid.shape)).to(valid.device)  # the actions' own tokens
    old = torch.zeros_like(new, requires_grad=False)
    for row, (t, values) in enumerate(zip(group.targets, group.old_logprobs)):
        start, end = t.trained
        old[row, start:end] = torch.tensor(values, dtype=new.dtype)
    return new, mask, old.detach(), entropy


def _k3(delta: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate exp(d) - d - 1 of a KL from log-ratios d (TRL's GRPO); 0 off the mask, where
    padding's log-probs are not finite."""
    delta = delta.masked_fill(~mask, 0.0)
    return delta.exp() - delta - 1


def _sums(
    new: torch.Tensor, old: torch.Tensor, ref: torch.Tensor, mask: torch.Tensor, entropy: torch.Tensor
) -> dict[str, float]:
    return {
        "tokens": float(mask.sum()),
        "kl": float((_k3(ref - new, mask) * mask).sum()),
        "kl_old": float((_k3(new - old, mask) * mask).sum()),  # KL(old || new): the samples are old's
        "entropy": float((entropy * mask).sum()),
        "clipped": 0.0,
    }


def grpo_update(
    model: Any,
    tokenizer: Any,
    groups: list[Group],
    config: GRPOConfig,
    optimizer: torch.optim.Optimizer,
    temperature: float = 1.0,
) -> UpdateStats:
    """One GRPO update: up to `config.steps` optimizer steps, each accumulating every usable group's loss,
    stopped early once the adapter's KL to the sampling policy exceeds `config.kl_max`.

    `model` is the peft model with the trained adapter active; `tokenizer` gives the padding id;
    `temperature` is the sampling temperature the old log-probs were taken at (all log-probs here use it).
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
    from arts.training.stated import stated_token_ids

    stated_ids = stated_token_ids(tokenizer) if config.weight_coef > 0 else None
    weight_losses: list[float] = []
    from arts.policy.backends.scoring import prompt_state
    from arts.training.logprobs import target_hidden

    head = head_alone(model)  # then the body's states never move: run once for every pass of the update
    hiddens = [target_hidden(model, g.prompt_ids, g.targets, pad_id) if head else None for g, _ in usable]
    refs = [reference(model, g, pad_id, temperature, h) for (g, _), h in zip(usable, hiddens)]
    # Without the prompt's gradient, every step reads the prompt as the adapter that sampled read it: run once.
    prompts = [
        None if config.prompt_grad or head else prompt_state(model, torch.tensor(g.prompt_ids))
        for g, _ in usable
    ]
    params = [p for pg in optimizer.param_groups for p in pg["params"]]
    losses, clipped, seen = [], 0.0, 0.0
    olds: list[torch.Tensor | None] = [None] * len(usable)  # the first step's forward, detached
    last: dict[str, float] = {}
    for step in range(config.steps):
        optimizer.zero_grad(set_to_none=True)
        now = dict.fromkeys(("tokens", "kl", "kl_old", "entropy", "clipped"), 0.0)
        for i, ((group, advantages), ref) in enumerate(zip(usable, refs)):
            loss, info, olds[i] = group_loss(
                model, group, advantages, config, pad_id, ref, temperature, olds[i], stated_ids, prompts[i],
                hiddens[i],
            )  # fmt: skip
            (loss / len(usable)).backward()
            losses.append(float(loss.detach()))
            weight_losses.append(info.pop("weight_loss"))
            stats.old_drift = max(stats.old_drift, info["drift"])
            now = {k: now[k] + info[k] for k in now}
        if step == 0:
            stats.tokens, stats.entropy_before = int(now["tokens"]), now["entropy"] / now["tokens"]
        last = now
        if step > 0 and config.kl_max is not None and now["kl_old"] / now["tokens"] > config.kl_max:
            stats.kl_stop = True  # these weights already left the trust region: no further step
            break
        clipped, seen = clipped + now["clipped"], seen + now["tokens"]
        norm = torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm or math.inf)
        stats.grad_norm = float(norm)
        optimizer.step()
        stats.steps += 1
    optimizer.zero_grad(set_to_none=True)
    if not stats.kl_stop:  # the figures of the weights the last step left
        last = dict.fromkeys(last, 0.0)
        for (group, _), ref, old, h in zip(usable, refs, olds, hiddens):  # the prompt run anew: exact
            last = {
                k: last[k] + v for k, v in measure(model, group, pad_id, ref, temperature, old, h).items()
            }
    stats.loss = sum(losses) / len(losses)
    stats.weight_loss = sum(weight_losses) / len(weight_losses)
    stats.samples = sum(len(g.targets) for g, _ in usable)
    stats.clip_fraction = clipped / seen if seen else 0.0
    stats.kl, stats.kl_old = last["kl"] / last["tokens"], last["kl_old"] / last["tokens"]
    stats.entropy = last["entropy"] / last["tokens"]
    stats.seconds = time.perf_counter() - start
    return stats
