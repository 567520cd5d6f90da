"""Test-time training in the search: which rollouts form a group, what each is rewarded, when the
scientist's adapter is updated, and which adapter the agents sample from. Every decision is recorded
through the ledger; the weights, their log-probs and checkpoints are the trainer's
(`training.ttt.Trainer`), which sees groups of actions and never the search.

- start: the trainer resumes from its newest checkpoint (or writes checkpoint 0), a `ttt_start` event
  records what was restored, and the agents sample from the adapter in force (`use_adapter`; a served
  scientist first loads the checkpoint folder under the name `arts-ttt-<k>`: nothing restarts, no
  stale cache). A checkpoint whose `update` event was lost (killed between the two) gets it logged again,
  marked `recovered`.
- sampled (after the round's experiments): each drawn action's masked log-prob under the adapter in force (the old policy of the GRPO
  ratio) and that adapter's checkpoint (`adapters/<k>`) are stored on the rollout. The action is the
  drawn candidate's own sampled tokens inside the verbalized proposal, under the prompt, the candidates
  before it and the proposal's grammar (on policy); the N draws of a proposal share one scoring of its
  tokens. A served scientist reports no tokens: its action text is re-tokenized and scored alone.
- reward: rewards for the finished groups (each judged against the valid scores observed before the
  group; `search.rollout_rewards`, shared with exports);
- update: every M rounds, an update on the groups collected since the previous one.
The arts round (`search.methods.arts.arts_round`) calls the three, in this order, at its end.

Rollouts sampled since the last update were all drawn under the adapter in force now (it changes only
in an update), so the old log-probs cached at sampling time, or recomputed after a restart, are the
sampling policy's. Rollouts of an interrupted experiment (killed mid-run) get no reward and are never
trained on: their outcome says nothing about the action.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from arts.policy.base import BackendError
from arts.rewards import RewardConfig
from arts.search.companions import companions as written_for
from arts.search.ledger import EVENT_TEXT_CHARS, Ledger
from arts.search.rollout_rewards import due_rewards
from arts.search.state import Rollout, SearchState
from arts.tasks.probe import in_class
from arts.training.credit import CreditAction, CreditCheck, base_lists_logprobs, base_text_logprobs, credit
from arts.training.logprobs import grammar_text
from arts.training.ttt import ADAPTER, ActionGroup, Trainer
from arts.training.watch import measure

DRIFT = 1e-3
"""Largest difference between a recomputed old log-prob and the stored one that is float rounding."""


class Learning:
    """The search's side of test-time training (see the module docstring)."""

    def __init__(
        self,
        trainer: Trainer,
        ledger: Ledger,
        reward: RewardConfig,
        update_every: int,
        *,
        use_adapter: Callable[[str | None], None],
        log: Callable[[str], None] = print,
        serving: Any = None,
        watch: str | None = None,
        decoys: tuple[str, ...] = (),
        tilt: tuple[float, float] = (0.0, 3.0),
        companions: bool = False,
    ):
        if serving is not None and not hasattr(serving, "load_adapter"):
            raise BackendError(f"the scientist's backend {serving.name!r} cannot load adapters; drop --ttt")
        self.trainer, self.ledger, self.reward_config, self.update_every = (
            trainer,
            ledger,
            reward,
            update_every,
        )
        self.use_adapter, self.log = use_adapter, log
        self.serving = serving
        """A served scientist (vLLM, OpenAI-compatible): each checkpoint is loaded there under a new name."""
        self.watch = watch
        """A class of moves whose held-out probability each update measures (`training.watch`): once per
        checkpoint, on the first round sampled under it that offers the class (a skipped update leaves the
        adapter as it was, and a second reading of it would cost as much as the update)."""
        self.decoys = decoys
        """Targets on which a watched verb alone is not of the class (a probe's decoys)."""
        self.tilt = tilt
        """The draw's tilt (exponent, cap; `ScientistConfig.tilt`), which the watch's draw probability takes."""
        self.companions = companions
        """Train each group's lists' undrawn candidates for the experiments that ran too (`search.companions`)."""
        self.last_round = 0
        """Rounds up to this one have been examined for training."""
        self._old: dict[int, list[float]] = {}
        """Per-token old log-probs by rollout id, until the update that trains on them."""
        self._watched = {
            int(e.payload["k"]) for e in ledger.events("watch") if e.payload.get("scored")
        }  # fmt: skip
        """The checkpoints the watch has read (`watch`)."""
        self._scored: dict[tuple[int, Any], list[float] | None] = {}
        """This round's lists, scored: by (group, sampled tokens), or (group, action text) without tokens."""

    def start(self) -> None:
        """Resume the trainer (or write checkpoint 0), record it, and make the agents sample from it."""
        info = self.trainer.start()
        self.last_round = max(
            int(info.state.get("last_round", 0)), int(self.ledger.meta("ttt_last_round", 0))
        )
        if info.k and not any(e.payload.get("k") == info.k for e in self.ledger.events("update")):
            state = info.state
            event = _update_event(
                info.k, state.get("last_round", 0), state.get("stats", {}), state.get("scoring_s", 0.0)
            )
            self.ledger.event("update", **event, recovered=True)
        self.ledger.event(
            "ttt_start",
            k=info.k,
            resumed=info.resumed,
            optimizer_restored=info.optimizer_restored,
            weights=info.weights,
            layers=info.layers,
        )
        self._publish()

    def _publish(self) -> None:
        """Make the next round sample from the adapter in force."""
        if self.serving is None:
            self.use_adapter(self.trainer.adapter)
            return
        name = f"arts-ttt-{self.trainer.k}"
        self.serving.load_adapter(name, self.trainer.checkpoint)
        self.use_adapter(name)
        self.ledger.event("adapter_served", k=self.trainer.k, name=name)

    def sampled(self, rollouts: list[Rollout]) -> None:
        """Record each drawn action's old log-prob and the adapter in force (`score`); the distinct lists
        of a group are scored together, their prompt run once."""
        together: dict[tuple[int, str], dict[tuple[int, ...], Rollout]] = defaultdict(dict)
        for r in rollouts:  # lists of one group, prompt and grammar
            if r.tokens and (r.group, tuple(r.tokens)) not in self._scored:
                shared = json.dumps([r.prompt, r.json_schema], sort_keys=True)
                together[(r.group, shared)].setdefault(tuple(r.tokens), r)
        for (group, _), lists in together.items():
            first = next(iter(lists.values()))
            values = self.trainer.lists_logprobs(first.prompt, first.json_schema, [list(t) for t in lists])
            self._scored.update({(group, t): v for t, v in zip(lists, values)})
        for r in rollouts:
            self.score(r)

    def score(self, rollout: Rollout) -> Rollout:
        """Record the old log-prob (masked, summed over the action's tokens) and the adapter in force.
        A rollout with its proposal's sampled tokens is scored on them (its candidate's span, on policy);
        one without (a served scientist) on its action text, re-tokenized."""
        values = self._span_values(rollout) if rollout.tokens else self._text_values(rollout)
        rollout.adapter = self.trainer.label
        rollout.old_logprob = math.fsum(values) if values is not None else None
        if values is None:
            self.ledger.event("ttt_unscorable", rollout=rollout.id, action=rollout.action[:EVENT_TEXT_CHARS])
        else:
            self._old[rollout.id] = values
        return self.ledger.update(rollout)

    def _span_values(self, rollout: Rollout) -> list[float] | None:
        key = (rollout.group, tuple(rollout.tokens))
        if key not in self._scored:  # the draws from one list share one scoring of its tokens
            self._scored[key] = self.trainer.proposal_logprobs(
                rollout.prompt, rollout.json_schema, rollout.tokens
            )
        values = self._scored[key]
        return values[rollout.span[0] : rollout.span[1]] if values is not None else None

    def _text_values(self, rollout: Rollout) -> list[float] | None:
        key = (rollout.group, grammar_text(rollout.action))
        if key not in self._scored:
            texts = [grammar_text(a) for a in [rollout.action, *rollout.candidates]]
            values = self.trainer.old_logprobs(rollout.prompt, rollout.json_schema, texts)
            self._scored.update({(rollout.group, t): v for t, v in zip(texts, values)})
        return self._scored[key]

    def credit(self) -> CreditCheck:
        """The credit check of this run so far (`training.credit`), recorded as a `credit_check` event."""
        check = credit_check(
            self.ledger.state,
            self.trainer.backend,
            warm=self.trainer.init is not None,
            temperature=self.trainer.temperature,
        )
        self.ledger.event("credit_check", **check.model_dump())
        return check

    def reward(self, round: int) -> None:
        """Rewards for the groups whose nodes have all finished (`search.rollout_rewards`, the one reward
        computation exports use too)."""
        for g in due_rewards(self.ledger.state, self.reward_config):
            for r, value in zip(g.rollouts, g.rewards):
                r.reward = value
                self.ledger.update(r)
            self.ledger.event("rewards", group=g.group, round=round, rewards=g.rewards, history=g.history)

    def update(self, round: int) -> None:
        """Every M rounds (`update_every`), an update on the groups collected since the last one; the next
        round samples from the new checkpoint."""
        if round - self.last_round >= self.update_every:
            self._update(round)
        self._scored.clear()

    def _update(self, round: int) -> None:
        rollouts = [
            r for r in self.ledger.state.rollouts.values()
            if self.last_round < r.round <= round and r.reward is not None and r.old_logprob is not None
        ]  # fmt: skip
        groups = self._groups(rollouts)
        again = self._replayed(round)
        if self.watch and rollouts and self.trainer.k not in self._watched:
            self._watch(rollouts, round)
        joined = sum(g.companions for g in groups)
        note = {
            "last_round": round, "rollouts": [r.id for r in rollouts], "replayed": len(again), "companions": joined
        }  # fmt: skip
        result = self.trainer.update(groups + again, note=note)
        examined, self.last_round = self.last_round, round
        window = self.trainer.config.replay
        for r in self.ledger.state.rollouts.values():
            if r.round <= round - window:  # no later update trains on it again
                self._old.pop(r.id, None)
        self.ledger.set_meta("ttt_last_round", round)
        stats = result.stats
        if not result.applied:
            self.ledger.event("update_skipped", round=round, since_round=examined, **stats.model_dump())
            why = (
                f"{stats.groups_skipped} group(s) without signal (all rewards equal)"
                if groups
                else "no group"
            )
            self.log(f"update skipped: {why} since round {examined}")
            return
        event = _update_event(self.trainer.k, round, stats.model_dump(), result.scoring_s)
        self.ledger.event("update", **event, companions=joined)
        self._publish()
        self.log(
            f"update {self.trainer.k}: loss {stats.loss:.4f}"
            f"{f' (stated probability {stats.weight_loss:.4f})' if stats.weight_loss else ''}"
            f"  reward mean {stats.reward_mean:.2f}  groups "
            f"{stats.groups_used} used / {stats.groups_skipped} skipped"
            f"{f' ({len(again)} replayed)' if again else ''}"
            f"{f' with {joined} companion(s)' if joined else ''}  steps {stats.steps}"
            f"{' (KL bound)' if stats.kl_stop else ''}  clip {stats.clip_fraction:.3f}  KL {stats.kl_old:.4f}"
            f"/{stats.kl:.4f}  entropy {stats.entropy:.3f}  {stats.seconds:.1f}s"
        )

    def _watch(self, rollouts: list[Rollout], round: int) -> None:
        """The watched class under the adapter in force and the base, on the newest round's prompt (which
        the update about to run trains on, so no adapter so far has seen it): `training.watch.measure`."""
        trainer, last = self.trainer, max(r.round for r in rollouts)
        newest = sorted((r for r in rollouts if r.round == last), key=lambda r: r.id)
        got = measure(
            trainer.backend,
            newest,
            self.watch,
            ADAPTER,
            trainer.temperature,
            self.tilt,
            lambda h: in_class(h, self.watch or "", self.decoys),
        )
        self.ledger.event("watch", round=round, k=trainer.k, move=self.watch, **(got or {"scored": False}))
        if got:
            self._watched.add(trainer.k)
            self.log(
                f"watch {self.watch!r}: x{got['ratio']:.2f} the base model's {got['measure']} under {trainer.label}"
            )

    def _replayed(self, round: int) -> list[ActionGroup]:
        """The groups of the `replay` rounds before the previous update's, trained on again (their log-probs
        at sampling time are kept, or recomputed after a restart; the update takes its ratio from its own
        first forward either way)."""
        window = self.trainer.config.replay
        if not window:
            return []
        rollouts = [
            r for r in self.ledger.state.rollouts.values()
            if self.last_round - window < r.round <= self.last_round
            and r.reward is not None and r.old_logprob is not None
        ]  # fmt: skip
        groups = self._groups(rollouts, check=False)
        for g in groups:
            g.replayed = True
        return groups

    def _groups(self, rollouts: list[Rollout], check: bool = True) -> list[ActionGroup]:
        """Training groups from stored rollouts; old per-token log-probs from the sampling-time cache, or
        recomputed (after a restart) and, with `check`, checked against the stored sums."""
        by_group: dict[int, list[Rollout]] = defaultdict(list)
        for r in rollouts:
            by_group[r.group].append(r)
        out = []
        for members in by_group.values():
            old = [self._old.get(r.id) for r in members]
            if any(o is None for o in old):
                old = self._rescore(members, check)
            first = members[0]
            actions, rewards = [r.action for r in members], [r.reward for r in members]
            group = ActionGroup(first.prompt, first.json_schema, actions, rewards, old)
            if all(r.tokens and len(r.span) == 2 for r in members):  # on policy: the sampled spans
                group.spans = [(r.span[0], r.span[1]) for r in members]
                if all(r.tokens == first.tokens for r in members):  # all from one list
                    group.tokens = first.tokens
                else:  # each from its own list
                    group.action_tokens = [r.tokens for r in members]
                    if self.companions:
                        self._accompany(group, members)
            out.append(group)
        return out

    def _accompany(self, group: ActionGroup, members: list[Rollout]) -> None:
        """Add to a group of N lists' draws the candidates those lists wrote for the experiments that ran
        (`search.companions`), each on its list's tokens, its old log-probs that list's scoring's slice."""
        tok = self.trainer.backend.tokenizer
        decode = lambda ids: tok.decode(ids, skip_special_tokens=True)  # noqa: E731
        first = members[0]
        for c in written_for(members, decode):
            key = (first.group, tuple(c.tokens))
            if key not in self._scored:  # scored at sampling; after a restart, again
                self._scored[key] = self.trainer.proposal_logprobs(first.prompt, first.json_schema, c.tokens)
            values = self._scored[key]
            if values is None:
                continue
            group.actions.append(c.action)
            group.rewards.append(c.reward)
            group.old_logprobs.append(values[c.span[0] : c.span[1]])
            group.action_tokens.append(c.tokens)
            group.spans.append(c.span)
            group.companions += 1

    def _rescore(self, members: list[Rollout], check: bool = True) -> list[list[float]]:
        first = members[0]
        if first.tokens:
            full = {}  # each list's tokens scored once
            for r in members:
                if tuple(r.tokens) not in full:
                    full[tuple(r.tokens)] = self.trainer.proposal_logprobs(
                        first.prompt, first.json_schema, r.tokens
                    )
            values = [full[tuple(r.tokens)] for r in members]
            old = [v[r.span[0] : r.span[1]] if v is not None else None for v, r in zip(values, members)]
        else:
            old = self.trainer.old_logprobs(first.prompt, first.json_schema, [r.action for r in members])
        if any(o is None for o in old):  # each was scored when sampled, under the same grammar
            raise RuntimeError(
                f"group {first.group}: a stored action no longer fits its grammar; was the scientist's "
                "tokenizer or the action schema changed since the run started? Resume with the same version."
            )
        drift = max(abs(math.fsum(o) - r.old_logprob) for o, r in zip(old, members))
        if check and drift > DRIFT:
            self.ledger.event("ttt_old_logprob_drift", group=first.group, max_abs=drift)
        return old


def credit_check(
    state: SearchState, backend: Any, *, warm: bool = False, temperature: float = 1.0
) -> CreditCheck:
    """The credit check (`training.credit`) of a run's rewarded rollouts: each one's stored log-prob under
    the adapter that sampled it against the base model's, on `backend` (the scientist's base weights, with or
    without adapters loaded). Checkpoint 0's rollouts count only after a warm start."""
    by_group: dict[int, list[Rollout]] = defaultdict(list)
    for r in state.rollouts.values():
        trained = r.adapter is not None and (warm or r.adapter != "adapters/0")
        if trained and r.reward is not None and r.old_logprob is not None:
            by_group[r.group].append(r)
    actions = []
    for group, members in sorted(by_group.items()):
        first = members[0]
        if all(r.tokens and len(r.span) == 2 for r in members):  # each list's spans, scored together
            base = [None] * len(members)
            lists = list(dict.fromkeys(tuple(r.tokens) for r in members))
            rows = [[i for i, r in enumerate(members) if tuple(r.tokens) == t] for t in lists]
            spans = [[(members[i].span[0], members[i].span[1]) for i in at] for at in rows]
            got = base_lists_logprobs(
                backend, first.prompt, first.json_schema or {}, [(list(t), s) for t, s in zip(lists, spans)],
                temperature,
            )  # fmt: skip
            for at, values in zip(rows, got):
                for i, b in zip(at, values or [None] * len(at)):
                    base[i] = b
        else:
            base = base_text_logprobs(
                backend, first.prompt, first.json_schema, [r.action for r in members], temperature
            )
        actions += [
            CreditAction(group, r.reward, r.old_logprob, b)
            for r, b in zip(members, base)
            if b is not None and r.reward is not None and r.old_logprob is not None
        ]
    return credit(actions)


def _update_event(k: int, round: int, stats: dict[str, Any], scoring_s: float) -> dict[str, Any]:
    """The `update` event's payload (also rebuilt from a checkpoint whose event was lost)."""
    return {"k": k, "round": round, "adapter": f"adapters/{k}", **stats, "scoring_s": scoring_s}
