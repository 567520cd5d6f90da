"""The reward of each executed action, computed one way for test-time training and for exports.

A group (the actions drawn from one proposal) is rewarded once every one of its nodes has finished:
each valid node's score against the valid scores observed before the group's first node, with the
parents' scores (`arts.rewards.group_rewards`, under the run's `RewardConfig`); an invalid node's
action gets the failure reward. A node cut off by a kill (`Node.interrupted`) says nothing about its
action: its rollout gets no reward and is never trained on or exported with one.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from arts.rewards import RewardConfig, group_rewards
from arts.search.state import Rollout, SearchState


@dataclass
class GroupReward:
    group: int
    rollouts: list[Rollout]
    rewards: list[float]
    history: int
    """How many earlier valid scores the group was judged against."""


def due_rewards(state: SearchState, reward: RewardConfig) -> list[GroupReward]:
    """The rewards of the rollouts without one whose node finished (valid or invalid), by group."""
    groups: dict[int, list[Rollout]] = defaultdict(list)
    for r in state.rollouts.values():
        node = state.nodes.get(r.node) if r.node is not None else None
        if (
            r.reward is None
            and node is not None
            and node.status in ("valid", "invalid")
            and not node.interrupted
        ):
            groups[r.group].append(r)
    out = []
    for group, rollouts in sorted(groups.items()):
        nodes = [state.nodes[r.node] for r in rollouts if r.node is not None]
        first = min(n.id for n in nodes)
        history = [
            n.score for n in state.nodes.values()
            if n.id < first and n.status in ("seed", "valid") and n.score is not None
        ]  # fmt: skip
        parents = [state.nodes[n.parent].score if n.parent in state.nodes else None for n in nodes]
        scores = [n.score if n.status == "valid" else None for n in nodes]
        values = group_rewards(scores, history, parent_scores=parents, config=reward)
        out.append(GroupReward(group, rollouts, values, len(history)))
    return out
