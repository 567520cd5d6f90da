"""The scientist: audit, inspect and verbalized proposals (failure attribution is `policy.analysis`).

Each call is a short prompt plus a per-call pydantic schema decoded under grammar constraint, so even the
135M default returns a parsable object: node ids are `Literal` enums of ids that exist, strings are
length-capped. The scientist sees rendered state (a string), never the store. A failed call (the model's
object did not validate) returns an empty result and the round goes on; the search never crashes on
model output.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from arts.policy.base import Backend, Completion, Message
from arts.policy.call import ask, ask_n, chat
from arts.policy.candidates import Candidate
from arts.policy.edits.moves import Moves, spread
from arts.policy.parsing import salvage_items
from arts.policy.proposal_schema import (
    candidate_item,
    directed_pattern,
    id_literal,
    labelled,
    proposal_schema,
)
from arts.policy.sampler import normalise
from arts.policy.spans import candidate_token_spans

REFINABLE_CHARS = 100
"""A hypothesis offered for refinement is shown cut to this (`search.methods.proposals` budgets for it)."""
SYSTEM = "You are a research scientist running experiments on a program. Answer with JSON only."


class ScientistConfig(BaseModel):
    """How the scientist is asked."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    audits: int = Field(2, ge=0)
    """The first R calls are baseline audits (no expansion)."""
    audit_statement_chars: int = Field(1200, ge=100)
    """An audit's prompt shows the task statement up to this many characters (the small model's context)."""
    audit_material_files: int = Field(2, ge=1)
    """An evaluator audit reads this many material files."""
    audit_material_chars: int = Field(1500, ge=100)
    """An audit's prompt shows each file it reads (material, evaluator or seed program) up to this many."""
    candidates: int = Field(4, ge=1, le=10)
    """K: candidates of every proposal (verbalized sampling). One K for every round: a proposal asked
    with another K would need another scientist, which must then carry the adapter in force. With fewer
    candidates than targets each candidate's share holds several and the scientist chooses which to move,
    a choice a TTT update can raise: on probe-quadrature with 2, the TTT scientist wrote the paying class
    in 69% of its lists after its first updates against 42% (docs/benchmark.md)."""
    inspect: int = Field(2, ge=0, le=5)
    """At most this many nodes inspected per round (0 turns inspection off)."""
    tail_depth: int = Field(3, ge=1)
    """Past this tree depth, candidates are asked for from the tail of the distribution."""
    tail_threshold: float = Field(0.25, gt=0, le=1)
    """Tail candidates each have a stated probability below this."""
    one_list: bool = False
    """Draw a round's N actions from one verbalized list, without replacement (the stated probabilities then
    only order the executions once N >= K). False: each action is drawn from its own list, the N lists
    sampled together from the one prompt, so a group is N independent draws of the policy (GRPO's group)."""
    temperature: float = Field(0.8, ge=0)
    choice_heat: float = Field(1.0, gt=0)
    """A directed proposal's target and verb tokens (where the phrases a field may still write part,
    `policy.backends.spelling.Rule.choice`) are drawn at this times `temperature`; the stated
    probabilities, the parent and free text stay at `temperature`. Training scores the same tokens at the
    same heat. Applied by the local backend only (a server constrains its own decoding). It cannot undo a
    strong prior: on probe-quadrature the embedded model's first slot chose NODE over STEPS by about 5 nats,
    and the chance of writing `increase STEPS` there rose from 0.001 at 1 to 0.037 at 4; one target per
    slot (`candidates` at least the number of targets, `spread`) puts every target in every list
    (docs/benchmark.md, "Exploring the target choice")."""
    max_tokens: int = Field(320, gt=0)
    """Cap on a proposal's tokens; audits and inspections use less."""
    refines: int = Field(0, ge=0, le=10)
    """A free proposal shows up to this many working or retained hypotheses (`h<id>`), and a candidate may
    name the one it refines: its lineage, told to the executor too. 0 (the small profile) shows none: at
    135M parameters every field costs tokens."""
    parents: int = Field(1, ge=0)
    """On an optimize task, the parents a proposal may name are the this-many best-scoring nodes (0: every
    node the state shows). Measured in a char-lm benchmark run with the 135M default, 5 of 8 experiments
    of rounds 2 and 4 started from the seed or a node worse than the best; and a directed hypothesis's
    moves are those left at the best node (`ScientistConfig.directed`), so from another parent they may
    all have run already. Raise it for a model that chooses parents well. Under TTT, unset, it is 3
    (`search.config.TTT_PARENTS`), so that a group teaches which node to expand too."""
    adapter: str | None = None
    """A peft adapter folder (an `arts export` output or a run's `adapters/<k>/`) the scientist samples
    from from the start: a warm start from earlier searches. With --ttt, training continues from it."""
    tilt: float = Field(0.0, ge=0)
    """Under a trained adapter (a warm start, or TTT after its first update), the draw weighs each candidate
    by its stated probability times exp(tilt x the log-ratio, adapter over base, of writing its move):
    the reward the adapter implies (`training.tilt`). 0 (the default): the stated probabilities alone; at 1,
    on probe-jacobi, neither a warm start nor the live learner drew the paying move more or scored better
    (docs/benchmark.md). A fresh adapter implies none, so before any update the draw is the stated one."""
    tilt_cap: float = Field(3.0, gt=0)
    """The tilt's exponent is clipped to [-tilt_cap, tilt_cap] (3: at most x20 either way), so that no
    candidate's stated probability is overruled without bound."""
    directed: bool = True
    """A hypothesis starts with a direction and a target of the best program, forced by the grammar:
    `increase X` or `decrease X` for a numeric constant X (only the directions with a value not yet
    evaluated), `rewrite f` for a function whose return the executor can set, `tune k` for a keyword
    argument k of a call that has a value not yet evaluated, `swap c` for a call c whose callee has a
    sibling not yet evaluated (`directed_pattern`); the
    executor then moves X only that way. Each of the K candidates is given its own share of the targets
    (`spread`), so a proposal spans them. Measured in a char-lm benchmark run with free hypotheses, the
    135M default copied the prompt's example hypothesis into all 5 first-round candidates and wrote
    "next experiment" for all 6 of the next two rounds; with one pattern for all candidates, it aimed all
    K at the same target in 5 of 5 rounds. Turn it off for a model that writes concrete hypotheses."""
    axis_first: bool = False
    """Write each candidate's axis (its target) before its hypothesis. A directed hypothesis writes its verb
    before its target, so the token a TTT update moves is chosen before the target is named; on
    probe-quadrature under `ttt.grpo.train_on=move` the credit fell below chance (docs/benchmark.md).
    A directed candidate's axis is then the target its hypothesis moves (`proposal_schema.bound_item`),
    so the target is chosen right after the parent. A served scientist's actions are still scored in the
    default order."""
    poll: bool = True
    """The other way first: a direction of a constant whose every step from the best node failed to beat it
    is not offered again from it until the opposite direction has run there, whatever the step's size (a
    compass search polls both directions; `search.compass.held`). On probe-kepler with two candidates per list the embedded model
    wrote `increase TOL`, which hurts, round after round and `decrease TOL`, which pays, in none of 62
    lists (docs/benchmark.md)."""


class AuditNotes(BaseModel):
    model_config = ConfigDict(extra="forbid")
    metric: str = Field(max_length=160)
    """Structure of the metric: ordinal, sparse, imbalanced, noisy, bounded..."""
    structure: str = Field(max_length=160)
    """Exploitable structure in the data or the problem."""
    weakness: str = Field(max_length=160)
    """The largest information-loss step or weakness in the seed program."""


class Proposal(BaseModel):
    """A parsed proposal: normalised candidates plus what is needed to store and train on it."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    candidates: list[Candidate]
    """Each with its stated probability normalised over the proposal."""
    messages: list[Message]
    completion: Completion | None = None
    json_schema: dict | None = None
    open_schema: dict | None = None
    """The same list's grammar with every move open at every candidate (`propose_lists`' `open_targets`:
    the moves before the compass poll's holds), where the harness narrowed a candidate's choice (a slot's
    share of the targets, a poll's single direction); None where nothing was narrowed or none was asked."""
    spans: list[tuple[int, int]] = []
    """Each candidate's [start, end) tokens in `completion.token_ids` (what training learns from); empty
    when the backend reports no tokens (a served model)."""


GENERIC_EXAMPLE = "replace the sort by a heap"
"""The example hypothesis of a free proposal when the program has no target to name."""


class Scientist:
    def __init__(self, backend: Backend, config: ScientistConfig, adapter: str | None = None):
        self.backend = backend
        self.config = config
        self.adapter = adapter

    @property
    def heat(self) -> float:
        """`config.choice_heat` where the backend draws phrase choices itself (the local one, keeping each
        phrase to one spelling); 1 elsewhere, where a server's decoding would not apply it."""
        grammars = getattr(self.backend, "grammars", None)
        return self.config.choice_heat if getattr(grammars, "spelling", False) else 1.0

    def _call(
        self, user: str, schema: type[BaseModel], purpose: str, max_tokens: int, seed: int | None
    ) -> tuple[list[Message], Completion]:
        messages = chat(SYSTEM, user)
        c = ask(
            self.backend,
            messages,
            schema,
            purpose=purpose,
            temperature=self.config.temperature,
            max_tokens=max_tokens,
            seed=seed,
            adapter=self.adapter,
        )
        return messages, c

    def audit(self, context: str, seed: int | None = None) -> tuple[AuditNotes | None, Completion]:
        user = (
            f"{context}\n\nAudit this task before any experiment. State briefly: the structure of the metric "
            "(ordinal, sparse, imbalanced, noisy), exploitable structure in the problem or data, and the "
            "largest weakness of the seed program."
        )
        _, c = self._call(user, AuditNotes, "audit", 200, seed)
        return c.parsed, c

    def choose_inspect(
        self, state: str, ids: list[int], memory_ids: list[int] | None = None, seed: int | None = None
    ) -> tuple[list[int], list[int], Completion | None]:
        """Nodes to inspect, and memory entries (shown as `[m<id>]`) to drop as wrong or stale."""
        if not ids or self.config.inspect == 0:
            return [], [], None
        fields: dict = {"nodes": (list[id_literal(ids)], Field(min_length=1, max_length=self.config.inspect))}
        if memory_ids:
            fields["forget"] = (list[id_literal(memory_ids)], Field(max_length=2))
        schema = create_model("Inspect", __config__=ConfigDict(extra="forbid"), **fields)
        ask = "Which nodes should be inspected (code diff, curves, output) before proposing?"
        if memory_ids:
            ask += " forget: ids of memory entries that are wrong or stale (may be empty)."
        _, c = self._call(f"{state}\n\n{ask}", schema, "inspect", 48, seed)
        if c.parsed is None:
            return [], [], c
        return list(dict.fromkeys(c.parsed.nodes)), list(dict.fromkeys(getattr(c.parsed, "forget", []))), c

    def propose(self, state: str, parent_ids: list[int], tail: bool, **kwargs: Any) -> Proposal:
        """One verbalized list of K candidates (`propose_lists` with n = 1)."""
        return self.propose_lists(state, parent_ids, tail, n=1, **kwargs)[0]

    def propose_lists(
        self,
        state: str,
        parent_ids: list[int],
        tail: bool,
        n: int = 1,
        seed: int | None = None,
        example: str | None = None,
        observation_ids: list[int] | None = None,
        targets: Moves | None = None,
        refinable: dict[int, str] | None = None,
        plan_axes: list[str] | None = None,
        open_targets: Moves | None = None,
    ) -> list[Proposal]:
        """n independent verbalized lists of one prompt (sampled together, one prefill), each of K
        candidates; `example` is a concrete hypothesis about this program (a small model copies the
        example's form, so it should name something that exists; None shows GENERIC_EXAMPLE, "" none). With `observation_ids`, each candidate
        may cite the observations (shown as `o<id>`) that motivated it. With `targets` (`Moves`) and
        `config.directed`, every hypothesis is one of the moves, each candidate drawing on its own share
        of them (`spread`, `directed_pattern`), and no example is shown. A free proposal shows the
        `refinable` hypotheses (id -> text) and each candidate may name the one it refines. An answer cut
        off at max_tokens keeps its complete candidates."""
        k = self.config.candidates
        example = GENERIC_EXAMPLE if example is None else example
        shares = spread(targets, k) if targets and self.config.directed else []
        patterns = [directed_pattern(m) for m in shares] or None
        refinable = {} if patterns else dict(refinable or {})
        plan_axes = [] if patterns else list(plan_axes or [])
        schema = proposal_schema(
            parent_ids,
            k,
            observation_ids,
            patterns,
            shares or None,
            list(refinable),
            plan_axes,
            axis_first=self.config.axis_first,
            heat=self.heat,
        )
        opened = None
        wide = [dict(open_targets)] * k if patterns and open_targets else shares
        if wide != shares:  # every move open at every slot: what the harness forced, scored as a choice
            opened = proposal_schema(
                parent_ids, k, observation_ids, [directed_pattern(m) for m in wide], wide, [], [],
                axis_first=self.config.axis_first, heat=self.heat,
            ).model_json_schema()  # fmt: skip
        ask = f"Propose {k} different next experiments, each with the probability that you would choose it."
        if tail:
            ask += f" Give unusual ideas from the tail of your distribution: each probability below {self.config.tail_threshold}."
        if patterns:
            verbs = {v for vs in targets.values() for v in vs}
            forms = (
                ['"increase X" or "decrease X" for a constant X'] if verbs & {"increase", "decrease"} else []
            )
            forms += ['"rewrite f" for a function f'] if "rewrite" in verbs else []
            forms += ['"tune k" for a keyword argument k of a call'] if "tune" in verbs else []
            forms += ['"swap c" for a call c, to call another of its kind'] if "swap" in verbs else []
            forms += ['"probe X" to measure how the score responds to X'] if "probe" in verbs else []
            forms += ['"suspect p.x" to test x as the answer of part p'] if "suspect" in verbs else []
            change = f"{' or '.join(forms)}, then what to and why"
        else:
            shown = f' (e.g. "{example}")' if example else ""
            change = f"one concrete change, naming what to change and to what{shown}"
        axis = "which axis of the plan it varies" if plan_axes else "the name of what it varies"
        ask += f" parent: the node to start from; hypothesis: {change}; axis: {axis}; region: the kind of change."
        if observation_ids:
            ask += " cites: ids of observations that motivated it (may be empty)."
        if refinable:
            shown = "\n".join(f"- h{i}: {text[:REFINABLE_CHARS]}" for i, text in refinable.items())
            state += f"\n\n## Hypotheses a candidate may refine\n{shown}"
            ask += " refines: the id of the hypothesis it refines, or null."
        messages = chat(SYSTEM, f"{state}\n\n{ask}")
        comps = ask_n(
            self.backend, messages, schema, n, purpose="propose", temperature=self.config.temperature,
            max_tokens=self.config.max_tokens, seed=seed, adapter=self.adapter,
        )  # fmt: skip
        item = candidate_item(  # any pattern, and every target and kind of a directed answer
            parent_ids,
            observation_ids,
            moves=targets if patterns else None,
            refinable=list(refinable),
            plan_axes=plan_axes,
        )
        props = [self._proposal(c, messages, schema, item, bool(patterns)) for c in comps]
        return [p.model_copy(update={"open_schema": opened}) for p in props] if opened else props

    def _proposal(
        self, c: Completion, messages: list[Message], schema: type[BaseModel], item: Any, directed: bool
    ) -> Proposal:
        """One completion's candidates (an answer cut off keeps its complete ones) and their token spans."""
        if c.parsed is not None:
            raw = [cand.model_dump() for cand in c.parsed.candidates]
        else:
            raw = [x.model_dump() for x in salvage_items(c.text, "candidates", item)]
        cands = [
            Candidate(**{**cand, "stated_probability": cand["probability"], "probability": p})
            for cand, p in zip(raw, normalise([r["probability"] for r in raw]))
        ]
        if directed:  # the labels say what the hypothesis moves, whichever of its share the model named
            cands = [labelled(cand) for cand in cands]
        tokenizer = getattr(self.backend, "tokenizer", None)
        spans = []
        if tokenizer is not None and c.token_ids:
            spans = candidate_token_spans(
                c.text, c.token_ids, lambda ids: tokenizer.decode(ids, skip_special_tokens=True)
            )
        return Proposal(
            candidates=cands,
            messages=messages,
            completion=c,
            json_schema=schema.model_json_schema(),
            spans=spans if len(spans) == len(cands) else [],
        )
