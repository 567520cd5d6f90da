"""Rewards: how an action's score becomes a reward, and a group's rewards become advantages."""

from arts.rewards import functions, parent  # noqa: F401  (register the built-in reward functions)
from arts.rewards.advantages import group_advantages, is_degenerate
from arts.rewards.base import (
    REWARDS,
    RewardConfig,
    RewardFn,
    compute_reward,
    get_reward,
    group_rewards,
    register,
    reward_names,
)

__all__ = [
    "REWARDS",
    "RewardConfig",
    "RewardFn",
    "compute_reward",
    "get_reward",
    "group_advantages",
    "group_rewards",
    "is_degenerate",
    "register",
    "reward_names",
]
