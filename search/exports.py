"""What `arts export` and `arts rollouts export` need from a run's store, handed to `training` as plain data.

`training` does not import `search` (the store is search's), so the facts travel as `RunInfo` and as
record dicts. A run without test-time training stored its actions but never rewarded them; their
rewards are computed here from the node scores by the run's configured reward, by the function TTT
rewards with (`search.rollout_rewards`), and marked `computed` in the export.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from arts.search.state import SearchState

if TYPE_CHECKING:
    from arts.rewards import RewardConfig
    from arts.search.config import SearchConfig
    from arts.training.export import RunInfo


def computed_rewards(state: SearchState, reward: RewardConfig) -> dict[int, float]:
    """rollout id → reward, for the rollouts without one whose node finished (valid or invalid)."""
    from arts.search.rollout_rewards import due_rewards

    return {r.id: v for g in due_rewards(state, reward) for r, v in zip(g.rollouts, g.rewards)}


def rollout_rows(state: SearchState, run_dir: str, cfg: SearchConfig | None) -> list[dict[str, Any]]:
    """Export records of a run: stored rewards, else rewards computed by the run's reward config."""
    from arts.rewards import RewardConfig
    from arts.training.offline import rollout_records

    reward = cfg.ttt.reward if cfg else RewardConfig()
    from arts.training.export import PUBLISHED_EMBEDDED

    # unset: the embedded model, by the id it is published under
    model = (cfg.scientist_model.model or PUBLISHED_EMBEDDED) if cfg else None
    rollouts = [r.model_dump() for r in sorted(state.rollouts.values(), key=lambda r: r.id)]
    return rollout_records(rollouts, run_dir, model, computed_rewards(state, reward))


def run_info(state: SearchState, cfg: SearchConfig | None, run_dir: Path) -> RunInfo:
    """The facts an exported adapter's card states: task, model, reward, updates, best node, benchmark."""
    import json

    from arts.training.export import RunInfo

    best = state.best()
    rollout = state.rollouts.get(best.rollout) if best and best.rollout else None
    summary = run_dir / "summary.json"
    figures = json.loads(summary.read_text()) if summary.is_file() else {}
    return RunInfo(
        task=Path(cfg.task).name if cfg else "unknown", model=cfg.scientist_model.model if cfg else None,
        reward=cfg.ttt.reward.model_dump_json(exclude_none=True) if cfg else "",
        updates=[e.payload for e in sorted(state.events.values(), key=lambda e: e.id) if e.kind == "update"],
        best_node=best.id if best else None, best_score=best.raw_score if best else None,
        best_adapter=rollout.adapter if rollout else None,
        baseline=figures.get("baseline"), test_score=(figures.get("best") or {}).get("test_score"),
        evals=figures.get("evals"), method=cfg.method if cfg else None,
    )  # fmt: skip


def rollout_groups(state: SearchState, run_dir: str, cfg: SearchConfig | None) -> list[dict[str, Any]]:
    """A run's GRPO groups as plain dicts, in round order, for an offline replay of the test-time update
    (`arts train --method grpo`): per group the state prompt, its schema, and per drawn action the text,
    the reward (stored, else computed by the run's reward config), the sampled proposal's tokens and the
    action's span of them. Actions without sampled tokens (a served scientist's) are left out."""
    from arts.rewards import RewardConfig

    computed = computed_rewards(state, cfg.ttt.reward if cfg else RewardConfig())
    by_group: dict[int, list] = {}
    for r in sorted(state.rollouts.values(), key=lambda r: r.id):
        reward = r.reward if r.reward is not None else computed.get(r.id)
        if reward is not None and r.tokens and len(r.span) == 2:
            by_group.setdefault(r.group, []).append((r, reward))
    return [
        {
            "run": str(run_dir),
            "round": members[0][0].round,
            "prompt": members[0][0].prompt,
            "json_schema": members[0][0].json_schema,
            "actions": [r.action for r, _ in members],
            "rewards": [v for _, v in members],
            "tokens": [list(r.tokens) for r, _ in members],
            "spans": [tuple(r.span) for r, _ in members],
        }  # fmt: skip
        for _, members in sorted(by_group.items())
    ]


def train_grpo_from(runs: list[tuple], out: Path, model: str | None, max_updates: int) -> Path:
    """`arts train --method grpo` over `(run_dir, state, config, model)` of each run: their groups replayed
    through the test-time update with the first run's GRPO settings, sampling temperature and seed."""
    from arts.training.offline_grpo import train_grpo

    first, cfg, spec = runs[0][0], runs[0][2], runs[0][3]
    if cfg is None:
        raise ValueError(f"{first} has no config.toml: GRPO takes the run's settings from it")
    groups = [g for run_dir, state, c, _ in runs for g in rollout_groups(state, run_dir, c)]
    print(f"{len(groups)} groups with sampled tokens from {len(runs)} runs")
    return train_grpo(groups, out, model or spec, cfg.ttt.grpo, temperature=cfg.scientist.temperature,
                      max_updates=max_updates, seed=cfg.seed)  # fmt: skip
