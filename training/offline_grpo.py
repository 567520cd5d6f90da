"""GRPO offline: the test-time update replayed over earlier runs' groups (`arts train --method grpo`).

SFT and DPO (`training.offline`) imitate or prefer stored actions as text; this trains exactly what a
search's learner trains (`training.ttt.Trainer`, the same LoRA, loss, steps and KL bound), one update
per stored group, on each group's sampled tokens: the drawn candidates' spans of the proposal that was
sampled, with the rewards the runs stored (or computed from their node scores by their reward config).
The groups of several runs are taken round by round across the runs (every run's first round, then
every run's second, ...), so that the last updates are not all one task's. A group whose actions were
all rewarded alike carries no signal and changes nothing. The result is a peft adapter folder, which
`--adapter` (`scientist.adapter`) loads as a warm start, with or without test-time training after it.

Groups arrive as plain dicts (`search.exports.rollout_groups`): the store is search's.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from arts.training.checkpoint import OPTIMIZER_FILE, checkpoint_path
from arts.training.grpo import GRPOConfig


def interleaved(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The groups ordered by round across runs (each run's groups keep their order; runs in first-seen
    order within a round)."""
    runs = list(dict.fromkeys(g["run"] for g in groups))
    return sorted(groups, key=lambda g: (g["round"], runs.index(g["run"])))


def train_grpo(
    groups: list[dict[str, Any]],
    out: Path,
    model: str | None,
    config: GRPOConfig,
    *,
    temperature: float,
    max_updates: int,
    seed: int = 0,
    log=print,
) -> Path:
    """Replay `groups` through the test-time trainer (at most `max_updates` applied updates) and write the
    adapter in force at the end to `out` (peft files, `training.json`, `README.md`)."""
    from arts.policy.backends.transformers import TransformersBackend
    from arts.training.ttt import ActionGroup, Trainer

    if not any(len(set(g["rewards"])) > 1 for g in groups):
        raise ValueError(
            f"none of the {len(groups)} groups has actions rewarded differently, so GRPO has nothing to learn "
            "from; give runs whose experiments differed in outcome (or use --method sft)"
        )
    backend = TransformersBackend(model, seed=seed, dtype="float32")  # bf16 training is slower on CPU
    applied, seen = [], 0
    with tempfile.TemporaryDirectory(prefix="arts-grpo-") as tmp:
        trainer = Trainer(backend, config, Path(tmp), temperature=temperature, seed=seed)
        trainer.start()
        for g in interleaved(groups):
            if len(applied) >= max_updates:
                break
            seen += 1
            if len(set(g["rewards"])) < 2:
                continue  # no signal: the update would skip it, after scoring it for nothing
            full = {}
            for tokens in map(tuple, g["tokens"]):
                if tokens not in full:
                    full[tokens] = trainer.proposal_logprobs(g["prompt"], g["json_schema"], list(tokens))
            if any(v is None for v in full.values()):
                log(f"  skipped a group of {g['run']} round {g['round']}: its tokens no longer parse")
                continue
            old = [full[tuple(t)][a:b] for t, (a, b) in zip(g["tokens"], g["spans"])]
            group = ActionGroup(
                g["prompt"],
                g["json_schema"],
                g["actions"],
                g["rewards"],
                old,
                spans=list(map(tuple, g["spans"])),
            )
            if len(full) == 1:
                group.tokens = g["tokens"][0]
            else:
                group.action_tokens = g["tokens"]
            result = trainer.update([group])
            if result.applied:
                s = result.stats
                applied.append({"run": g["run"], "round": g["round"], "kl": s.kl, "seconds": s.seconds})
                log(f"  update {trainer.k}: {g['run']} round {g['round']}, KL {s.kl:.4f}, {s.seconds:.1f}s")
        if not applied:
            raise ValueError(f"no update applied over {seen} groups; nothing was trained")
        final = checkpoint_path(Path(tmp), trainer.k)
        out.mkdir(parents=True, exist_ok=True)
        for f in final.iterdir():
            if f.name != OPTIMIZER_FILE:
                shutil.copy2(f, out / f.name)
    runs = sorted({g["run"] for g in groups})
    card = {"method": "grpo", "updates": len(applied), "groups": seen, "runs": runs, "base_model": str(model),
            "temperature": temperature, "config": config.model_dump(), "per_update": applied}  # fmt: skip
    (out / "training.json").write_text(json.dumps(card, indent=2))
    (out / "README.md").write_text(
        f"---\nlibrary_name: peft\ntags: [arts, lora, grpo]\n---\n# arts scientist adapter (GRPO, offline)\n\n"
        f"The test-time update replayed over {seen} groups of {len(runs)} runs: {len(applied)} updates "
        f"applied, KL to the base at the last {applied[-1]['kl']:.4f} per token.\n"
    )
    return out
