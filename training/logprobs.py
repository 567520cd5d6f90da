"""Action targets for training: the tokens of an action, the grammar masks that sampled them, their log-probs.

On the search's path an action is a span of a sampled proposal (`span_targets`): the drawn candidate's
own tokens, with the proposal's tokens before it as context, under the proposal's grammar replayed
token by token, so that training scores exactly what was sampled. Without sampled tokens (a served
scientist) an action is its single-action text, re-serialised and re-tokenized (`build_targets`).

GRPO scores an action after its state prompt under the grammar mask and the temperature that sampling
used (softmax(masked logits / T): the policy that drew the tokens, top-p aside), once without gradients
(the old policy, when the action is drawn) and once with them (the update). Both go through
`policy.backends.scoring.completion_logprobs` with masks replayed by the backend's grammar cache, so the
ratio before the first update is 1 up to float rounding (the two calls batch different rows).

Action texts from stored rollouts are re-serialised through `policy.scientist.canonical_action`
(`grammar_text`): xgrammar with `any_whitespace=False` emits `", "` and `": "` separators, and any other
spacing is rejected by the mask, so its masked log-prob would be -inf.
The length-capped string fields of the action schema allow no escapes at all (`[^"\\\r\n]`), so an
action holding a quote, a backslash or a newline cannot be scored; `build_targets` returns None for it
and the caller leaves it out of training.

Deliberately not here: anything that decides what to train on (that is `search.learning`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from pydantic import BaseModel

from arts.policy.backends.scoring import completion_logprobs, head_inputs
from arts.policy.edits.moves import DIRECTED
from arts.policy.proposal_schema import candidate_schema, canonical_action
from arts.policy.spans import token_spans

MOVE_FIELDS = re.compile(
    r'"parent": (?P<parent>\d+)|"axis": "(?P<axis>[^"]*)"|"hypothesis": "(?P<hypothesis>[^"]*)"'
)
"""The fields of a candidate's text that name its experiment (`move_positions`)."""

ACTION_KEYS = ("parent", "hypothesis", "axis")
"""The single action's fields, in the order the action schema (and so the grammar) writes them."""


def grammar_text(action: str | dict[str, Any]) -> str:
    """The action exactly as constrained decoding writes it: schema key order, `", "` and `": "`
    separators, non-ASCII characters as they are. Idempotent."""
    return canonical_action(json.loads(action) if isinstance(action, str) else action)


def parent_ids(json_schema: dict[str, Any] | None, action: str) -> list[int]:
    """The parent ids the proposal allowed (its schema's `parent` enum), else the action's own parent."""
    props: dict[str, Any] = {}
    if json_schema:
        defs = json_schema.get("$defs", {})
        props = defs.get("Candidate", {}).get("properties") or json_schema.get("properties", {})
    parent = props.get("parent", {})
    if "enum" in parent:
        return [int(i) for i in parent["enum"]]
    if "const" in parent:
        return [int(parent["const"])]
    return [int(json.loads(action)["parent"])]


def action_schema(json_schema: dict[str, Any] | None, action: str) -> type[BaseModel]:
    """The single-action schema whose grammar masks the training target of this rollout."""
    return candidate_schema(parent_ids(json_schema, action))


@dataclass
class ActionTarget:
    """One action's completion tokens (ending with the stop token the grammar requires) and the packed
    grammar mask before each token: (len(tokens), ceil(V/32)) int32. With `span`, only tokens[start:end]
    are the action (a drawn candidate inside a verbalized proposal): the tokens before it are context,
    scored for the forward pass but outside the loss."""

    tokens: list[int]
    allowed: torch.Tensor
    span: tuple[int, int] | None = None
    keep: list[int] | None = None
    """Positions (in `tokens`, inside the span) that the loss counts; None: every one of the span's.
    `move_positions` gives those of the move alone."""
    stated_at: tuple[int, int | None] | None = None
    """Where the candidate's stated probability is written (`stated_positions`), for a loss on what the
    draw weighs it by; None: no such loss."""
    stated_list: list[tuple[int, int | None]] | None = None
    """Where every candidate of its list states its probability (`stated.list_stated_positions`; the
    tokens then hold the whole list), for that loss on its share of the list; None: on its own value."""
    scales: list[float] | None = None
    """The factor on the temperature each token was drawn at (a phrase choice's heat,
    `policy.backends.spelling.HEAT`); None: 1 everywhere."""

    @property
    def trained(self) -> tuple[int, int]:
        return self.span if self.span is not None else (0, len(self.tokens))


def stop_token(backend: Any) -> int:
    """The stop token that ends a constrained completion (the tokenizer's eos where it is one)."""
    eos = backend.tokenizer.eos_token_id
    return eos if eos in backend.stop_ids else min(backend.stop_ids)


def build_targets(backend: Any, schema: type[BaseModel], texts: list[str]) -> list[ActionTarget | None]:
    """Tokens and replayed masks of each text; None where the grammar rejects the text (see the module
    docstring), since such a target has probability zero under the mask."""
    stop = stop_token(backend)
    out: list[ActionTarget | None] = []
    for text in texts:
        tokens = backend.tokenizer.encode(text, add_special_tokens=False) + [stop]
        got = backend.grammars.replay_bitmasks(schema, tokens)
        out.append(
            None if got.rejected is not None else ActionTarget(tokens, got.masks.clone(), scales=got.scales)
        )
    return out


def span_targets(
    backend: Any, json_schema: dict[str, Any], tokens: list[int], spans: list[tuple[int, int]],
    whole: bool = False,
) -> list[ActionTarget] | None:  # fmt: skip
    """Targets for candidates drawn from one sampled proposal: its tokens up to each candidate's end (all
    of them with `whole`), the proposal grammar's replayed masks, the candidate's span; None when the
    grammar rejects the tokens."""
    got = backend.grammars.replay_bitmasks(json_schema, tokens)
    if got.rejected is not None:
        return None
    out = []
    for start, end in spans:
        cut = len(tokens) if whole else end
        out.append(ActionTarget(tokens[:cut], got.masks[:cut].clone(), (start, end), scales=got.scales[:cut]))
    return out


def loss_mask(targets: list[ActionTarget], shape: tuple[int, int]) -> torch.Tensor:
    """(N, L) bool: the tokens of each target that are its action (its span, else all of it)."""
    out = torch.zeros(shape, dtype=torch.bool)
    for row, t in enumerate(targets):
        start, end = t.trained
        if t.keep is None:
            out[row, start:end] = True
        else:
            out[row, [i for i in t.keep if start <= i < end]] = True
    return out


def move_positions(tokenizer: Any, tokens: list[int], span: tuple[int, int]) -> list[int]:
    """The positions of `tokens[span]` (one candidate, as the grammar writes it) that choose the experiment:
    the parent id and the hypothesis, of a directed hypothesis only its verb and target ("decrease TOL",
    not the free detail after it, which no edit reads). The stated probability, the axis and region
    labels and the cites choose nothing that is run: a reward credited to their tokens is noise, and on
    a 135M model they outnumber the move's tokens about ten to one. An axis written before the
    hypothesis (`ScientistConfig.axis_first`) counts where it names the directed hypothesis's target; the
    grammar does not bind the two, and an axis naming something else ("solve" before "increase RELAX", as
    the embedded model writes) chooses nothing that is run. Empty when no field is found."""
    start, end = span
    ids = tokens[start:end]
    text = tokenizer.decode(ids)
    chosen: list[tuple[int, int]] = []
    hypothesis, axis = False, None
    for m in MOVE_FIELDS.finditer(text):
        if m.group("parent") is not None:
            chosen.append(m.span("parent"))
            continue
        if m.group("axis") is not None:
            axis = None if hypothesis else m
            continue
        hypothesis = True
        head, at = DIRECTED.match(m.group("hypothesis")), m.start("hypothesis")
        chosen.append((at + head.start(), at + head.end()) if head else m.span("hypothesis"))
        if axis is not None and head is not None and axis.group("axis") == head.group(2):
            chosen.append(axis.span("axis"))
    return sorted({start + i for a, b in token_spans(ids, tokenizer.decode, chosen) for i in range(a, b)})


def shared_rows(targets: list[ActionTarget]) -> tuple[list[ActionTarget], list[int]]:
    """The targets to run, and each target's row among them: a target whose tokens begin another's (an
    earlier candidate of the same sampled list, or the same action twice) is read off the longer one's
    row, as the forward is causal. The draws and companions of N lists then cost N rows, not one each."""
    rows: list[ActionTarget] = []
    index = [0] * len(targets)
    for i in sorted(range(len(targets)), key=lambda i: -len(targets[i].tokens)):
        tokens = targets[i].tokens
        index[i] = next((j for j, r in enumerate(rows) if r.tokens[: len(tokens)] == tokens), len(rows))
        if index[i] == len(rows):
            rows.append(targets[i])
    return rows, index


def pack(
    targets: list[ActionTarget], pad_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Right-padded (ids (N, L), mask (N, L) bool, allowed (N, L, W), scales (N, L) or None when every
    factor is 1); padding is all-allowed, at factor 1."""
    length = max(len(t.tokens) for t in targets)
    width = targets[0].allowed.shape[-1]
    ids = torch.full((len(targets), length), pad_id, dtype=torch.long)
    mask = torch.zeros((len(targets), length), dtype=torch.bool)
    allowed = torch.full((len(targets), length, width), -1, dtype=torch.int32)
    scales = torch.ones((len(targets), length))
    for row, t in enumerate(targets):
        ids[row, : len(t.tokens)] = torch.tensor(t.tokens)
        mask[row, : len(t.tokens)] = True
        allowed[row, : len(t.tokens)] = t.allowed
        if t.scales is not None:
            scales[row, : len(t.tokens)] = torch.tensor(t.scales)
    return ids, mask, allowed, (scales if bool((scales != 1).any()) else None)


def scored_positions(targets: list[ActionTarget], shape: tuple[int, int]) -> torch.Tensor:
    """(N, L) bool: what an update reads of each target, its action tokens (`loss_mask`) and the
    positions where its list states probabilities (`ActionTarget.stated_at`, `stated_list`)."""
    out = loss_mask(targets, shape)
    for row, t in enumerate(targets):
        for first, digit in [*([t.stated_at] if t.stated_at else []), *(t.stated_list or [])]:
            out[row, [i for i in (first, digit) if i is not None and i < shape[1]]] = True
    return out


def _rows(
    targets: list[ActionTarget], pad_id: int, only: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor | None]:
    """`pack` of the rows to run, each target's row, and with `only` the positions each row must score."""
    rows, index = shared_rows(targets)
    ids, mask, allowed, scales = pack(rows, pad_id)
    keep = None
    if only:
        keep = torch.zeros(ids.shape, dtype=torch.bool)
        for row, wanted in zip(index, scored_positions(targets, (len(targets), ids.shape[1]))):
            keep[row] |= wanted
    return ids, mask, allowed, scales, torch.tensor(index), keep


def target_hidden(
    model: Any, prompt_ids: list[int], targets: list[ActionTarget], pad_id: int
) -> torch.Tensor:
    """The body's last hidden states at the positions an update reads (`scored_positions`), for the
    `hidden` of `target_logprobs` and `target_scores` where only the output head is trained."""
    ids, _, _, _, _, keep = _rows(targets, pad_id, True)
    return head_inputs(model, torch.tensor(prompt_ids), ids, keep)


def target_logprobs(
    model: Any, prompt_ids: list[int], targets: list[ActionTarget], pad_id: int, temperature: float = 1.0,
    only: bool = False, hidden: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """Masked per-token log-probs (N, L) of the targets after one shared prompt forward, under
    softmax(logits / temperature), with gradients when grad mode is on; and the (N, L) token mask.
    With `only`, just the positions `scored_positions` names are scored (0 elsewhere); `hidden`
    (`target_hidden`, with `only`) stands for the body."""
    ids, mask, allowed, scales, at, keep = _rows(targets, pad_id, only)
    values = completion_logprobs(
        model, torch.tensor(prompt_ids), ids, mask, allowed=allowed, temperature=temperature, scales=scales,
        keep=keep, hidden=hidden,
    )  # fmt: skip
    at = at.to(values.device)
    return values[at], mask.to(values.device)[at]


def target_scores(
    model: Any, prompt_ids: list[int], targets: list[ActionTarget], pad_id: int, temperature: float = 1.0,
    prompt_grad: bool = True, distribution: Any = None, only: bool = False, prompt: Any = None,
    hidden: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """`target_logprobs` and the entropy (N, L) of each position's masked, tempered distribution (the
    entropy without gradients): the update's diagnostics come from the forward it trains on.
    `prompt_grad`, `distribution`, `prompt`: as `completion_logprobs`'s (`distribution` gets the targets'
    rows); `only`, `hidden`: as `target_logprobs`'s."""
    ids, mask, allowed, scales, at, keep = _rows(targets, pad_id, only)
    per_target = (
        (lambda every, column: distribution(every[at.to(every.device)], column)) if distribution else None
    )
    values, entropy = completion_logprobs(
        model, torch.tensor(prompt_ids), ids, mask, allowed=allowed, temperature=temperature, entropy=True,
        prompt_grad=prompt_grad, distribution=per_target, scales=scales, keep=keep, prompt=prompt, hidden=hidden,
    )  # fmt: skip
    at = at.to(values.device)
    return values[at], mask.to(values.device)[at], entropy[at]


@torch.no_grad()
def score_targets(
    model: Any, prompt_ids: list[int], targets: list[ActionTarget], pad_id: int, temperature: float = 1.0,
    only: bool = False,
) -> list[list[float]]:  # fmt: skip
    """Per-token masked log-probs of each target under the active adapter at `temperature` (no gradients);
    `only`: as `target_logprobs`'s (0 outside `scored_positions`)."""
    values, _ = target_logprobs(model, prompt_ids, targets, pad_id, temperature, only)
    return [values[row, : len(t.tokens)].tolist() for row, t in enumerate(targets)]


@contextmanager
def adapter_scope(model: Any, name: str) -> Iterator[None]:
    """Run with peft adapter `name` active; restores the previous active adapter and every parameter's
    requires_grad (peft's `set_adapter` changes them). Considered: trl's `use_adapter` makes the same
    switch but restores no flags, and importing trl costs 2.4 s here; the backend's switch is private."""
    flags = [(p, p.requires_grad) for p in model.parameters()]
    previous = model.active_adapter
    try:
        model.set_adapter(name)
        yield
    finally:
        if isinstance(previous, str) and previous in model.peft_config:
            model.set_adapter(previous)
        for param, flag in flags:
            param.requires_grad_(flag)
