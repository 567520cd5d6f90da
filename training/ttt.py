"""The test-time trainer: one trainable LoRA adapter on a transformers model, the old log-probs of the
actions sampled from it, GRPO updates on groups of those actions, and its checkpoints.

It receives groups of actions (the state prompt, the schema that constrained the answer, the action
texts, their rewards and old per-token log-probs) and returns what an update did. It never sees the
search: which actions form a group, what they are rewarded, when an update happens, what is recorded
and which adapter the agents sample from are decided by `search.learning`.

- `start`: continue from the newest checkpoint `adapters/<k>/` and its optimizer state, or write
  `adapters/0/`, the initial adapter (B = 0, so it equals the base model).
- `old_logprobs`: the masked per-token log-probs of a proposal's actions under the adapter in force, in
  one shared-prefix batch (N draws from K candidates cost one prompt forward, not N).
- `update`: one GRPO update (`training.grpo.grpo_update`) and, when a group carried signal, checkpoint
  k+1 written atomically with the optimizer state and the caller's note (returned by `start` on resume).

The adapter is updated in place, so a scientist sampling from it on the same backend sees the new
weights at once; a served scientist loads the checkpoint folder instead.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from peft import get_peft_model_state_dict

from arts.policy.backends.transformers import TransformersBackend
from arts.policy.base import BackendError
from arts.training.checkpoint import (
    adapter_shape,
    checkpoint_path,
    checkpoints,
    load_optimizer,
    load_weights,
    read_state,
    save_checkpoint,
)
from arts.training.grpo import Group, GRPOConfig, UpdateStats, grpo_update, lora_config, make_optimizer
from arts.training.logprobs import (
    ActionTarget,
    action_schema,
    adapter_scope,
    build_targets,
    grammar_text,
    move_positions,
    score_targets,
    span_targets,
)
from arts.training.stated import list_stated_positions, stated_positions

ADAPTER = "ttt"
"""Name of the trained adapter on the backend (a local scientist samples with it)."""


def weights_digest(tensors: dict[str, torch.Tensor]) -> str:
    """A short fingerprint of adapter weights (names and bytes), to check what a resume loaded."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        h.update(name.encode())
        h.update(tensors[name].detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


@dataclass
class ActionGroup:
    """The N actions drawn from one state prompt, as text, with their rewards and old log-probs."""

    prompt: list[dict[str, Any]]
    """The state prompt, as chat messages."""
    json_schema: dict[str, Any] | None
    """The schema that constrained the proposal; its parent ids fix the action grammar's mask."""
    actions: list[str]
    """The single-action texts (re-serialised as the grammar writes them before scoring)."""
    rewards: list[float]
    old_logprobs: list[list[float]]
    """Per-token log-probs of each action under the adapter that sampled it (from `old_logprobs`, or the
    span's slice of `proposal_logprobs`)."""
    tokens: list[int] | None = None
    """The sampled proposal all N actions were drawn from (its token ids): then each action is its
    candidate's span of these tokens, trained on policy, and `actions` only label them."""
    spans: list[tuple[int, int]] | None = None
    """With `tokens` or `action_tokens`: each action's [start, end) in its proposal's tokens."""
    action_tokens: list[list[int]] | None = None
    """Instead of `tokens`, where each action was drawn from its own sampled proposal (N verbalized lists
    of one prompt): action i is its candidate's span of `action_tokens[i]`, trained on policy."""
    companions: int = 0
    """How many of the actions (the last ones) are undrawn candidates of the lists whose experiment ran
    (`search.companions`), rewarded as the drawn action that ran it."""
    replayed: bool = False
    """Trained on by an earlier update too (`GRPOConfig.replay`): `old_logprobs` are not the policy in
    force, so they are not checked against it."""

    def __post_init__(self) -> None:
        n = len(self.actions)
        if len(self.rewards) != n or len(self.old_logprobs) != n:
            raise ValueError(
                f"a group needs one reward and one old log-prob list per action: {n} actions, "
                f"{len(self.rewards)} rewards, {len(self.old_logprobs)} old log-prob lists"
            )


@dataclass
class StartInfo:
    """What `start` found: the checkpoint in force and how much of it was restored."""

    k: int
    resumed: bool
    """True when an earlier checkpoint was loaded; False when checkpoint 0 was written."""
    optimizer_restored: bool
    weights: str
    """`weights_digest` of the adapter now in the model."""
    state: dict[str, Any]
    """The checkpoint's `trainer_state.json`: k, and for k >= 1 the update's stats, `scoring_s` and the
    caller's note."""
    layers: str = ""
    """The adapter's LoRA shape: rank, alpha and the layers it adapts (those of the checkpoint resumed or
    of the warm start, when there is one, whatever `GRPOConfig` says)."""


@dataclass
class UpdateResult:
    """What one update did; `k` is None when no group carried signal (nothing changed, nothing saved)."""

    stats: UpdateStats
    scoring_s: float
    """Seconds spent in `old_logprobs` since the previous applied update."""
    k: int | None

    @property
    def applied(self) -> bool:
        return self.k is not None


class Trainer:
    """LoRA GRPO on a transformers backend, checkpointed in `run_dir/adapters/` (see the module docstring)."""

    def __init__(
        self,
        backend: Any,
        config: GRPOConfig,
        run_dir: Path,
        init: Path | None = None,
        *,
        temperature: float = 1.0,
        seed: int = 0,
    ):
        if temperature <= 0:
            raise ValueError(
                f"test-time training needs a sampling policy with probabilities, not greedy decoding "
                f"(temperature {temperature}); set --scientist.temperature above 0 (default 0.8)"
            )
        if not isinstance(backend, TransformersBackend):
            raise BackendError(
                f"test-time training updates weights in this process, so its trainer needs the "
                f"transformers backend, not {getattr(backend, 'name', type(backend).__name__)!r}; a served "
                "scientist (vLLM, OpenAI-compatible) gets a local trainer copy through "
                "--set ttt.trainer_model=PATH."
            )
        done = checkpoints(Path(run_dir))
        shape = adapter_shape(checkpoint_path(Path(run_dir), done[-1]) if done else init)
        if shape is not None:  # the checkpoint resumed, or the warm start, decides the layers and rank
            config = config.model_copy(update=shape)
        self.backend, self.config, self.run_dir = backend, config, Path(run_dir)
        self.temperature = temperature
        """The scientist's sampling temperature: every log-prob here (old, new, reference) is taken under
        softmax(masked logits / temperature), the distribution the actions were drawn from."""
        self.init = init
        """A peft adapter folder a fresh run starts training from (a warm start); None: LoRA's own init."""
        if ADAPTER not in backend.adapters:
            with torch.random.fork_rng():
                torch.manual_seed(seed)  # the LoRA init: A random, B zero (a fresh adapter is the base model)
                backend.add_adapter(ADAPTER, lora_config(config))
        self.optimizer = make_optimizer(backend.model, ADAPTER, config)
        self.k = 0
        """Updates applied so far: the checkpoint `adapters/<k>/` in force."""
        self._scoring_s = 0.0

    @property
    def adapter(self) -> str:
        """The trained adapter's name on the backend."""
        return ADAPTER

    @property
    def label(self) -> str:
        """The checkpoint in force, as rollouts record it."""
        return f"adapters/{self.k}"

    @property
    def checkpoint(self) -> Path:
        """The folder of the checkpoint in force (what a serving backend loads)."""
        return checkpoint_path(self.run_dir, self.k)

    def start(self) -> StartInfo:
        """Load the newest checkpoint with its optimizer state, or write checkpoint 0."""
        model = self.backend.model
        done = checkpoints(self.run_dir)
        restored = False
        if done:
            self.k = done[-1]
            load_weights(model, ADAPTER, self.checkpoint)
            restored = load_optimizer(self.optimizer, self.checkpoint)
            state = read_state(self.checkpoint)
        else:
            state = {"k": 0}
            if self.init is not None:
                self._warm_start(model)
                state["warm_start"] = str(self.init)
            self._save(0, {"warm_start": str(self.init)} if self.init is not None else {})
        self.backend.labels[ADAPTER] = self.label
        digest = weights_digest(
            get_peft_model_state_dict(model, adapter_name=ADAPTER, save_embedding_layers=False)
        )
        c = self.config
        names = model.peft_config[ADAPTER].target_modules  # the modules peft adapted: their kinds say enough
        targets = (
            names if isinstance(names, str) else ", ".join(sorted({n.rsplit(".", 1)[-1] for n in names}))
        )
        layers = f"rank {c.lora_rank}, alpha {c.lora_alpha:g}, {targets}"
        return StartInfo(self.k, bool(done), restored, digest, state, layers)

    def _warm_start(self, model: Any) -> None:
        if not (self.init / "adapter_config.json").is_file():
            raise ValueError(
                f"--adapter {self.init}: no adapter_config.json there; give a folder written by `arts export`"
                " or a run's adapters/<k>/"
            )
        try:
            load_weights(model, ADAPTER, self.init)
        except (RuntimeError, ValueError) as e:
            base = json.loads((self.init / "adapter_config.json").read_text()).get("base_model_name_or_path")
            raise ValueError(
                f"--adapter {self.init} does not fit this model's layers (it was trained on {base}); give "
                f"an adapter of the scientist's base model: {str(e).splitlines()[0][:200]}"
            ) from None

    def old_logprobs(
        self, prompt: list[dict[str, Any]], json_schema: dict[str, Any] | None, actions: Sequence[str]
    ) -> list[list[float] | None]:
        """Per-token masked log-probs of each action after `prompt` under the adapter in force, in one
        batch (repeated actions scored once); None for an action the grammar rejects (see
        `training.logprobs`), which can be neither scored nor trained on. The first action fixes the
        grammar (with the schema's parent ids)."""
        if not actions:
            return []
        start = time.perf_counter()
        texts = [grammar_text(a) for a in actions]
        unique = list(dict.fromkeys(texts))
        targets = build_targets(self.backend, action_schema(json_schema, texts[0]), unique)
        ok = [t for t in targets if t is not None]
        values = iter(self._score(self.backend.encode_prompt(prompt), ok) if ok else [])
        by_text = {text: next(values) if t is not None else None for text, t in zip(unique, targets)}
        self._scoring_s += time.perf_counter() - start
        return [by_text[text] for text in texts]

    def proposal_logprobs(
        self, prompt: list[dict[str, Any]], json_schema: dict[str, Any], tokens: list[int]
    ) -> list[float] | None:
        """Per-token masked log-probs of a sampled proposal (all its tokens) after `prompt` under the adapter
        in force and the proposal's own grammar: a drawn candidate's old log-probs are its span of these.
        None when the grammar rejects the tokens (they cannot have been sampled under it)."""
        return self.lists_logprobs(prompt, json_schema, [tokens])[0]

    def lists_logprobs(
        self, prompt: list[dict[str, Any]], json_schema: dict[str, Any], lists: list[list[int]]
    ) -> list[list[float] | None]:
        """`proposal_logprobs` of several lists sampled from one prompt, in one scoring: the prompt runs
        once and its cache is shared by the lists (a round's N lists cost one prompt, not N)."""
        start = time.perf_counter()
        made = [span_targets(self.backend, json_schema, tokens, [(0, len(tokens))]) for tokens in lists]
        targets = [m[0] for m in made if m]
        scored = iter(self._score(self.backend.encode_prompt(prompt), targets) if targets else [])
        out = [next(scored) if m else None for m in made]
        self._scoring_s += time.perf_counter() - start
        return out

    def update(self, groups: list[ActionGroup], note: dict[str, Any] | None = None) -> UpdateResult:
        """One GRPO update on the groups; when any carried signal, checkpoint k+1 (atomic, with the
        optimizer state, the stats and `note`) becomes the one in force."""
        built = [self._group(g) for g in groups]
        with adapter_scope(self.backend.model, ADAPTER):
            stats = grpo_update(
                self.backend.model,
                self.backend.tokenizer,
                built,
                self.config,
                self.optimizer,
                self.temperature,
            )
        if stats.groups_used == 0:
            return UpdateResult(stats, round(self._scoring_s, 3), None)
        scoring_s = round(self._scoring_s, 3)
        self._save(self.k + 1, {"stats": stats.model_dump(), "scoring_s": scoring_s, **(note or {})})
        self.k, self._scoring_s = self.k + 1, 0.0
        self.backend.labels[ADAPTER] = self.label  # usage records name the checkpoint that sampled
        return UpdateResult(stats, scoring_s, self.k)

    def _group(self, g: ActionGroup) -> Group:
        if g.tokens is not None or g.action_tokens is not None:
            schema, spans, whole = g.json_schema or {}, g.spans or [], self._shares
            if g.action_tokens is not None:  # each action from its own list
                each = [
                    span_targets(self.backend, schema, t, [s], whole) for t, s in zip(g.action_tokens, spans)
                ]
                targets = None if any(t is None for t in each) else [t[0] for t in each]
            else:
                targets = span_targets(self.backend, schema, g.tokens, spans, whole)
            if targets is None:
                raise ValueError(
                    "the proposal's grammar rejects its own sampled tokens; was the schema changed?"
                )
            return self._built(g, targets)
        texts = [grammar_text(a) for a in g.actions]
        targets = build_targets(self.backend, action_schema(g.json_schema, texts[0]), texts)
        rejected = [a for a, t in zip(g.actions, targets) if t is None]
        if rejected:
            raise ValueError(
                f"the grammar rejects {rejected[0][:80]!r}; leave out actions whose old_logprobs are None"
            )
        return self._built(g, targets)

    @property
    def _shares(self) -> bool:
        """Whether the weight loss is on shares of whole lists (`GRPOConfig.weight_share`)."""
        return self.config.weight_coef > 0 and self.config.weight_share

    def _built(self, g: ActionGroup, targets: list[ActionTarget]) -> Group:
        """The group to train on; under `train_on = "move"` each target keeps its move's tokens only,
        or all of its action where none is found; with `weight_coef`, each notes where it states its
        probability."""
        tok, lists = self.backend.tokenizer, {}
        for t in targets:
            if self.config.train_on == "move":
                t.keep = move_positions(tok, t.tokens, t.trained) or None
            if self.config.weight_coef > 0:
                t.stated_at = stated_positions(tok, t.tokens, t.trained)
                if self._shares:  # one list's positions, read once for its draws and companions
                    key = tuple(t.tokens)
                    if key not in lists:
                        lists[key] = list_stated_positions(tok, t.tokens)
                    t.stated_list = lists[key]
        return Group(self.backend.encode_prompt(g.prompt), targets, g.rewards, g.old_logprobs, g.replayed)

    def _score(self, prompt_ids: list[int], targets: list) -> list[list[float]]:
        tok = self.backend.tokenizer
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        with adapter_scope(self.backend.model, ADAPTER):
            return score_targets(self.backend.model, prompt_ids, targets, pad, self.temperature)

    def _save(self, k: int, state: dict[str, Any]) -> Path:
        state = {"temperature": self.temperature, **state}  # what its log-probs were taken at
        return save_checkpoint(
            self.run_dir, k, self.backend.model, ADAPTER, Path(self.backend.path), self.optimizer, state
        )
