"""Test-time training: the search's hook that turns each round's actions into LoRA GRPO updates.

The search calls `on_rollout(s, rollout)` for each drawn action before it runs, and `after_round(s)`
after each round (the `Search` object arrives duck-typed: `training` never imports `search`). The
scientist samples from one trainable adapter that is updated in place, so the next round's proposals
come from the updated weights without any reload. The schedule:

- on_rollout: the action's masked log-prob under the adapter in force (the old policy of the GRPO
  ratio) and that adapter's checkpoint (`adapters/<k>`) are stored on the rollout. The first action
  of a proposal scores every candidate of it in one shared-prefix batch, so N draws cost one prompt
  forward, not N.
- after_round: rewards for the finished groups (each judged against the valid scores observed before
  the group), then every M rounds `grpo_update` on the groups collected since the previous update,
  an atomic checkpoint `adapters/<k>/`, and an `update` event.
- resume: continues from the newest checkpoint and its optimizer state; a fresh run writes
  `adapters/0/`, the initial adapter (B = 0, so it equals the base model).

Rollouts sampled since the last update were all drawn under the adapter in force now (it changes only
in an update), so the old log-probs cached at sampling time, or recomputed after a restart, are the
sampling policy's. Rollouts of an interrupted experiment (killed mid-run) get no reward and are never
trained on: their outcome says nothing about the action.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

from arts.policy.base import BackendError
from arts.rewards import RewardConfig, group_rewards
from arts.training.checkpoint import checkpoints, load_optimizer, load_weights, read_state, save_checkpoint
from arts.training.grpo import Group, GRPOConfig, grpo_update, lora_config, make_optimizer
from arts.training.logprobs import action_schema, adapter_scope, build_targets, grammar_text, score_targets

ADAPTER = "ttt"
"""Name of the trained adapter on the backend (the scientist samples with it)."""


def weights_digest(tensors: dict[str, torch.Tensor]) -> str:
    """A short fingerprint of adapter weights (names and bytes), to check what a resume loaded."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        h.update(name.encode())
        h.update(tensors[name].detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


class TestTimeTraining:
    """The TTT hook of a search (see the module docstring)."""

    __test__ = False  # a class named Test* is not a pytest test class

    def __init__(
        self, backend: Any, config: GRPOConfig, reward: RewardConfig, run_dir: Path, serving: Any = None
    ):
        from arts.policy.backends.transformers import TransformersBackend

        if not isinstance(backend, TransformersBackend):
            raise BackendError(
                f"test-time training updates weights in this process, so its trainer needs the "
                f"transformers backend, not {getattr(backend, 'name', type(backend).__name__)!r}; a served "
                "scientist (vLLM, OpenAI-compatible) gets a local trainer copy through --set trainer_model=PATH."
            )
        if serving is not None and not hasattr(serving, "load_adapter"):
            raise BackendError(f"the scientist's backend {serving.name!r} cannot load adapters; drop --ttt")
        self.backend, self.config, self.reward, self.run_dir = backend, config, reward, Path(run_dir)
        self.serving = serving
        """A served scientist (vLLM, OpenAI-compatible): each checkpoint is loaded there under a new name."""
        self.k = 0
        """Updates applied so far: the checkpoint `adapters/<k>/` in force."""
        self.last_round = 0
        """Rounds up to this one have been examined for training."""
        self.optimizer: torch.optim.Optimizer | None = None
        self._old: dict[int, list[float]] = {}
        self._scored: dict[tuple[int, str], list[float] | None] = {}
        self._score_s = 0.0

    @property
    def label(self) -> str:
        return f"adapters/{self.k}"

    # ---- start and resume ------------------------------------------------------------------------

    def resume(self, s: Any) -> None:
        """Attach the trainable adapter and continue from the newest checkpoint (with its optimizer
        state), or start fresh by writing checkpoint 0; the scientist then samples from the adapter."""
        if getattr(s, "scientist", None) is None:
            raise ValueError("--ttt trains the scientist, and this search method has none; use --method arts")
        model = self._attach()
        done = checkpoints(self.run_dir)
        restored = False
        if done:
            self.k = done[-1]
            path = self.run_dir / "adapters" / str(self.k)
            load_weights(model, ADAPTER, path)
            restored = load_optimizer(self.optimizer, path)
            state = read_state(path)
            self.last_round = max(int(state.get("last_round", 0)), int(s.store.get_meta("ttt_last_round", 0)))
            if self.k and not any(e.payload.get("k") == self.k for e in s.store.events("update")):
                s.store.log_event("update", **state.get("event", {}), recovered=True)
        else:
            self._save({"last_round": 0})
        from peft import get_peft_model_state_dict

        digest = weights_digest(get_peft_model_state_dict(model, adapter_name=ADAPTER))
        s.store.log_event(
            "ttt_start", k=self.k, resumed=bool(done), optimizer_restored=restored, weights=digest
        )
        self._publish(s)

    def _publish(self, s: Any) -> None:
        """Make the next round sample from the adapter in force: in place on the local backend; on a
        served scientist, the checkpoint folder loaded under a new name (nothing restarts, no stale cache)."""
        if self.serving is None:
            s.scientist.adapter = ADAPTER
            return
        name = f"arts-ttt-{self.k}"
        self.serving.load_adapter(name, self.run_dir / "adapters" / str(self.k))
        s.scientist.adapter = name
        s.store.log_event("adapter_served", k=self.k, name=name)

    def _attach(self) -> Any:
        if ADAPTER not in getattr(self.backend, "adapters", []):
            with torch.random.fork_rng():
                torch.manual_seed(self.config.seed)
                self.backend.add_adapter(ADAPTER, lora_config(self.config))
        model = self.backend.model
        self.optimizer = make_optimizer(model, ADAPTER, self.config)
        return model

    def _save(self, state: dict[str, Any]) -> Path:
        return save_checkpoint(
            self.run_dir, self.k, self.backend.model, ADAPTER, Path(self.backend.path), self.optimizer, state
        )

    # ---- the hook --------------------------------------------------------------------------------

    def on_rollout(self, s: Any, rollout: Any) -> Any:
        """Record the old log-prob (masked, summed over the action's tokens) and the adapter in force."""
        key = (rollout.group, grammar_text(rollout.action))
        if key not in self._scored:
            self._score_proposal(rollout)
        values = self._scored[key]
        rollout.adapter = self.label
        rollout.old_logprob = math.fsum(values) if values is not None else None
        if values is None:
            s.store.log_event("ttt_unscorable", rollout=rollout.id, action=rollout.action[:200])
        else:
            self._old[rollout.id] = values
        s.store.update(rollout)
        s.state.rollouts[rollout.id] = rollout
        return rollout

    def _score_proposal(self, rollout: Any) -> None:
        """Score every candidate of the rollout's proposal in one batch (they share the prompt)."""
        start = time.perf_counter()
        texts = list(dict.fromkeys([grammar_text(rollout.action), *map(grammar_text, rollout.candidates)]))
        targets = build_targets(self.backend, action_schema(rollout.json_schema, rollout.action), texts)
        ok = [t for t in targets if t is not None]
        values = iter(self._score(rollout.prompt, ok) if ok else [])
        for text, target in zip(texts, targets):
            self._scored[(rollout.group, text)] = next(values) if target is not None else None
        self._score_s += time.perf_counter() - start

    def _score(self, prompt: list[dict], targets: list) -> list[list[float]]:
        model = self.backend.model
        with adapter_scope(model, ADAPTER):
            return score_targets(model, self.backend.encode_prompt(prompt), targets, self._pad_id)

    @property
    def _pad_id(self) -> int:
        tok = self.backend.tokenizer
        return tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id

    def after_round(self, s: Any) -> None:
        """Rewards for the finished groups; every M rounds, an update on what was collected."""
        self._assign_rewards(s)
        self._scored.clear()
        if s.round - self.last_round >= self.config.update_every:
            self._update(s)

    # ---- rewards ---------------------------------------------------------------------------------

    def _assign_rewards(self, s: Any) -> None:
        groups: dict[int, list[Any]] = defaultdict(list)
        for r in s.state.rollouts.values():
            node = s.state.nodes.get(r.node) if r.node is not None else None
            if r.reward is None and node is not None and node.status in ("valid", "invalid"):
                if not node.reason.startswith("interrupted"):
                    groups[r.group].append(r)
        for group, rollouts in sorted(groups.items()):
            nodes = [s.state.nodes[r.node] for r in rollouts]
            first = min(n.id for n in nodes)
            history = [
                n.score for n in s.state.nodes.values()
                if n.id < first and n.status in ("seed", "valid") and n.score is not None
            ]  # fmt: skip
            parents = [s.state.nodes[n.parent].score if n.parent in s.state.nodes else None for n in nodes]
            scores = [n.score if n.status == "valid" else None for n in nodes]
            values = group_rewards(scores, history, parent_scores=parents, config=self.reward)
            for r, value in zip(rollouts, values):
                r.reward = value
                s.store.update(r)
                s.state.rollouts[r.id] = r
            s.store.log_event("rewards", group=group, round=s.round, rewards=values, history=len(history))

    # ---- updates ---------------------------------------------------------------------------------

    def _update(self, s: Any) -> None:
        rollouts = [
            r for r in s.state.rollouts.values()
            if self.last_round < r.round <= s.round and r.reward is not None and r.old_logprob is not None
        ]  # fmt: skip
        groups = self._groups(s, rollouts)
        model = self.backend.model
        with adapter_scope(model, ADAPTER):
            stats = grpo_update(model, self.backend.tokenizer, groups, self.config, self.optimizer)
        examined, self.last_round = self.last_round, s.round
        for r in rollouts:
            self._old.pop(r.id, None)
        if stats.groups_used == 0:
            s.store.set_meta("ttt_last_round", s.round)
            s.store.log_event("update_skipped", round=s.round, since_round=examined, **stats.model_dump())
            why = (
                f"{stats.groups_skipped} group(s) without signal (all rewards equal)"
                if groups
                else "no group"
            )
            s.log(f"update skipped: {why} since round {examined}")
            return
        self.k += 1
        event = {"k": self.k, "round": s.round, "adapter": self.label, **stats.model_dump()}
        event["scoring_s"], self._score_s = round(self._score_s, 3), 0.0
        self._save({"last_round": s.round, "rollouts": [r.id for r in rollouts], "event": event})
        s.store.set_meta("ttt_last_round", s.round)
        s.store.log_event("update", **event)
        self._publish(s)
        s.log(
            f"update {self.k}: loss {stats.loss:.4f}  reward mean {stats.reward_mean:.2f}  groups "
            f"{stats.groups_used} used / {stats.groups_skipped} skipped  {stats.seconds:.1f}s"
        )

    def _groups(self, s: Any, rollouts: list[Any]) -> list[Group]:
        """GRPO groups from stored rollouts; old per-token log-probs from the sampling-time cache, or
        recomputed (after a restart) and checked against the stored sums."""
        by_group: dict[int, list[Any]] = defaultdict(list)
        for r in rollouts:
            by_group[r.group].append(r)
        out = []
        for members in by_group.values():
            schema = action_schema(members[0].json_schema, members[0].action)
            targets = build_targets(self.backend, schema, [grammar_text(r.action) for r in members])
            prompt_ids = self.backend.encode_prompt(members[0].prompt)
            old = [self._old.get(r.id) for r in members]
            if any(o is None for o in old):
                old = self._rescore(s, members, targets, prompt_ids)
            out.append(Group(prompt_ids, targets, [r.reward for r in members], old))
        return out

    def _rescore(self, s: Any, members: list[Any], targets: list, prompt_ids: list[int]) -> list[list[float]]:
        model = self.backend.model
        with adapter_scope(model, ADAPTER):
            old = score_targets(model, prompt_ids, targets, self._pad_id)
        drift = max(abs(math.fsum(o) - r.old_logprob) for o, r in zip(old, members))
        if drift > 1e-3:
            s.store.log_event("ttt_old_logprob_drift", group=members[0].group, max_abs=drift)
        return old
