"""The settings of a LoRA GRPO update and its schedule (`training.grpo`), chosen by a measured sweep
(docs/ttt-sweep.md). No torch here: loading a config (`search.config`, `arts tasks list`) should not pay
its import."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class GRPOConfig(BaseModel):
    """LoRA GRPO for test-time training (`arts search --ttt`) and its schedule."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    lora_rank: int = Field(8, ge=1, le=256)
    """LoRA rank r of every adapted layer (vLLM serves up to `max_lora_rank`, 16 by default). At the same
    alpha / r, rank 16 moved about twice as far per step as 8 in the sweep (docs/ttt-sweep.md): 8 is kept,
    with the learning rate chosen for it."""
    lora_alpha: float = Field(16.0, gt=0)
    """LoRA scale numerator: the update is scaled by alpha / r."""
    target_modules: str | list[str] = "all-linear"
    """Layers that get LoRA: peft's "all-linear" (every linear layer but the output head) or names.
    ["lm_head"], the output head alone (tied to the embeddings in SmolLM2; checkpoints and merged exports
    leave the embeddings as they were), moves a token's logit wherever the hidden state resembles the one
    it was rewarded at, with no backward pass through the body (docs/benchmark.md, "LoRA on the output
    head")."""
    lr: float = Field(1e-4, gt=0, le=1e-2)
    """AdamW learning rate, chosen with `steps`, `kl_max` and `lora_rank` by the sweep (docs/ttt-sweep.md): 1e-4
    x 4 steps raised a paying action 2.5 nats per update (2e-4 x 1: 1.9) at KL 0.012 per token (0.015)."""
    weight_decay: float = Field(0.0, ge=0)
    """AdamW weight decay (0: an adapter only moves where rewards say so)."""
    clip_eps: float = Field(0.2, gt=0, lt=1)
    """Lower clip of the ratio, and the upper one unless `clip_eps_high` is set."""
    clip_eps_high: float | None = Field(None, gt=0)
    """Upper clip of the ratio (DAPO's clip-higher); None means `clip_eps`."""
    kl_coef: float = Field(0.0, ge=0)
    """Weight of the per-token KL penalty to the base model (the adapter disabled); 0 turns it off."""
    train_on: Literal["move", "action"] = "action"
    """Which tokens of a drawn candidate the loss counts: "action", all of them (its stated probability,
    labels and free detail too); "move", those that choose the experiment (the parent and the
    hypothesis, of a directed one its verb and target: `training.logprobs.move_positions`)."""
    weight_coef: float = Field(0.0, ge=0)
    """Weight of a loss that moves each drawn candidate's expected stated probability, which the draw
    follows, the way its advantage says (`training.stated`); 0: off."""
    weight_share: bool = True
    """With `weight_coef`: the loss is on each drawn candidate's share of its list's stated probabilities
    (what the draw follows; the whole list enters the forward) rather than on its own value, which a
    LoRA step moves for every candidate alike (`training.stated`)."""
    learn_forced: bool = False
    """Score a move the harness forced (a slot's share of the targets, `policy.edits.moves.spread`; a
    direction the compass poll left alone, `scientist.poll`) under the list's grammar with every move open
    at every candidate, as the scientist's own choice, in the update, tilt and watch (under the grammar
    that sampled it its tokens carry no gradient). With one target per slot (`scientist.candidates` at
    least the number of targets) the target is then a choice the update moves and the tilt reads
    (docs/benchmark.md); for the poll's directions alone it had no effect on probe-kepler over 5 seeds."""
    update_every: int = Field(1, ge=1)
    """M: rounds between updates; each update trains on the groups collected since the previous one."""
    replay: int = Field(0, ge=0)
    """Rounds before those whose groups each update trains on again (0: each group trains one update)."""
    steps: int = Field(4, ge=1, le=64)
    """Optimizer steps per update, each on every group collected since the previous update. The ratio to
    the sampling policy leaves 1 after the first step, which is where clipping starts to act."""
    kl_max: float | None = Field(0.01, gt=0)
    """Stop an update's steps once the mean per-token KL (k3) of the adapter to the policy at the update's
    start exceeds this (PPO's target KL), read from each step's forward before it: the first step is
    always taken. None: always `steps` steps."""
    max_grad_norm: float | None = Field(1.0, gt=0)
    """Clip the adapter's gradient norm to this; None leaves it unclipped."""
    prompt_grad: bool = False
    """Back-propagate through the state prompt's positions too. False (the default): the prompt runs once
    per update, without gradients, under the adapter that sampled, and every step reads its keys and values
    as given (a step's log-probs leave out what the step's weights change in the prompt's; the update's
    closing figures run it anew, exactly); an update costs 0.49-0.84x and learns 91% as much per update in
    context, 92% held out (`docs/ttt-sweep.md`, the probes' 1,300-token prompts)."""

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
