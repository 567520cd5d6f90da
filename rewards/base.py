"""The reward contract: the config, the reward-function signature, and the name registry.

A reward function turns one action's score into a float, judged against the scores observed before the
action's group. The N actions of one GRPO group share that history, so they are held to the same bar.
Scores arrive direction-normalised (higher is better; the caller flips minimised metrics) and `None`
marks an invalid node. This package imports nothing from the other arts packages but the layer-neutral
registry (`arts.tasks.registry`), which names the functions (with a `module:attr` fallback).
Group normalisation into advantages is `rewards.advantages`; the built-in functions are `rewards.functions`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from arts.tasks.registry import Registry


class RewardConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, use_attribute_docstrings=True)

    name: str = "beats_parent"
    """Reward function: a registered name (see `reward_names()`) or `module:attr` of a user's function.
    `beats_parent` (1 when the node beats its parent) rewards the move; `percentile` (1 when the score
    reaches the q-th quantile of the scores before the group) also rewards where it was made, which fits a
    scientist that chooses its parents (`scientist.parents` > 1)."""
    q: float = Field(0.70, gt=0.0, lt=1.0)
    """`percentile` only: the quantile of the history a score must reach to be rewarded."""
    invalid: float = 0.0
    """Reward of an invalid node (score `None` or non-finite), whatever the function."""
    empty_history: float = 1.0
    """Reward of a valid score when no valid score was observed before its group (nothing to compare
    against), for `percentile`, `best_only`, `raw` and `rank`: by default the first valid result counts
    as a success."""
    clip: float | None = Field(None, gt=0.0)
    """`improvement` only: clip `score - parent_score` to [-clip, clip]; None leaves it unclipped."""

    @model_validator(mode="after")
    def _known_name(self) -> RewardConfig:
        try:
            get_reward(self.name)
        except KeyError as e:
            raise ValueError(f"reward config field `name`: {e.args[0]}") from None
        return self


class RewardFn(Protocol):
    def __call__(
        self,
        score: float | None,
        history: Sequence[float],
        *,
        parent_score: float | None = None,
        config: RewardConfig,
    ) -> float: ...


REWARDS: Registry[RewardFn] = Registry("reward")
register = REWARDS.register
"""Decorator adding a reward function to the registry under `name`."""
reward_names = REWARDS.names


def get_reward(name: str) -> RewardFn:
    """The registered function, or `module:attr` imported on demand; KeyError lists the known names."""
    fn = REWARDS.get(name)
    if not callable(fn):
        raise KeyError(f"reward {name!r} is not callable; give a function with the RewardFn signature")
    return fn


def valid_score(score: float | None) -> bool:
    """A score a reward can judge: not None, finite."""
    return score is not None and math.isfinite(score)


def compute_reward(
    score: float | None,
    history: Sequence[float],
    *,
    parent_score: float | None = None,
    config: RewardConfig,
) -> float:
    """The reward of one action under `config.name`."""
    return float(get_reward(config.name)(score, history, parent_score=parent_score, config=config))


def group_rewards(
    scores: Sequence[float | None],
    history: Sequence[float],
    *,
    parent_scores: Sequence[float | None] | None = None,
    config: RewardConfig,
) -> list[float]:
    """Rewards of one group's actions, all judged against the same history (the scores before the group)."""
    parents = [None] * len(scores) if parent_scores is None else list(parent_scores)
    if len(parents) != len(scores):
        raise ValueError(f"{len(scores)} scores but {len(parents)} parent scores; give one per action")
    fn = get_reward(config.name)
    return [
        float(fn(s, history, parent_score=p, config=config)) for s, p in zip(scores, parents, strict=True)
    ]
