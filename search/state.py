"""The search state as plain data: the records a run is made of, and the whole state rebuilt from them.

Every record (node, hypothesis, observation, evidence, insight, rollout, event) is a flat pydantic model
that refers to others by integer id, never by reference, so that the store can write each one as a row and
`Store.load_state()` can rebuild the whole state from the database alone (a resumed run, a report, an
offline training set all start from there). Ids are assigned by the store: a record that has not been
added yet has `id == 0`, and stored ids start at 1 and grow in insertion order.

This module holds types and read-only helpers only; it does no I/O (see `search.store`).
"""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

NodeStatus = Literal["seed", "valid", "invalid", "pending"]
HypothesisStatus = Literal["pending", "working", "retained", "set_aside", "revived"]
ObservationSource = Literal["audit", "inspect", "execution", "comparison", "probe"]
Relation = Literal["support", "oppose", "neutral", "unassessed"]
InsightKind = Literal["memory", "audit"]


class Record(BaseModel):
    """Base of every stored record: strict fields, finite floats, and an id the store assigns."""

    # allow_inf_nan=False: a NaN score must never reach the tree (JSON would turn it into null silently);
    # validate_assignment keeps that true for records mutated in place before `Store.update`.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, validate_assignment=True)
    id: int = Field(0, ge=0)
    """Assigned by the store on `add` (1, 2, ... per kind, in insertion order); 0 until then."""


INTERRUPTED = "interrupted"
"""How the reason of an outcome cut off from outside begins (a killed run, a lost worker): it says nothing
about the program, so it is not charged, not rewarded and not read as a result."""


class Node(Record):
    """One experiment: a program (the editable files) derived from a parent node, and its evaluation."""

    parent: int | None = None
    """The node this one was derived from; None for the root (the seed program)."""
    depth: int = Field(0, ge=0)
    """Distance from the root (root = 0)."""
    round: int = Field(0, ge=0)
    """The search round that created the node."""
    hypothesis: str = ""
    """The hypothesis the executor implemented (empty for the seed)."""
    axis: str = ""
    """The hypothesis axis the action belongs to."""
    files: dict[str, str] = {}
    """Full text of every editable file, keyed by its path relative to the task directory."""
    status: NodeStatus = "pending"
    """'seed' for the root, 'valid'/'invalid' once evaluated, 'pending' while the experiment is in flight."""
    score: float | None = None
    """Direction-normalised score: higher is always better. None when invalid or not scored."""
    raw_score: float | None = None
    """The evaluator's score as reported, for display."""
    metrics: dict[str, Any] = {}
    """Extra metrics from `result.json`."""
    reason: str = ""
    """Why the node is invalid (timeout, non-zero exit, malformed result, ...); empty otherwise."""
    eval_s: float = Field(0.0, ge=0.0)
    """Seconds spent evaluating."""
    exec_s: float = Field(0.0, ge=0.0)
    """Seconds the executor model spent producing the files."""
    tokens_prompt: int = Field(0, ge=0)
    """Executor prompt tokens."""
    tokens_completion: int = Field(0, ge=0)
    """Executor completion tokens."""
    transcript: list[dict[str, Any]] = []
    """The executor's actions (read_file / write_file / validate calls and their results), in order."""
    rollout: int | None = None
    """The rollout (scientist action) that created this node; None for the seed and baseline methods."""
    adapter: str | None = None
    """The adapter checkpoint that proposed the action; None for the base model."""
    follows: int | None = None
    """The node this experiment follows up after its failure attribution: the failed one it repairs or
    the one whose refined hypothesis it tests (`search.investigation.followups`); None otherwise."""
    instructions: str = ""
    """What the executor was told besides the hypothesis (a follow-up's fix)."""
    created: float = Field(default_factory=time.time)
    """Unix timestamp of creation."""

    @property
    def interrupted(self) -> bool:
        """Cut off from outside (`INTERRUPTED`): the outcome says nothing about the action."""
        return self.reason.startswith(INTERRUPTED)


class Hypothesis(Record):
    """A hypothesis in the hypothesis space, placed on an axis and in a region."""

    text: str
    """The hypothesis, as a statement that an experiment can test."""
    axis: str = ""
    """The design axis it varies (e.g. 'initialisation', 'optimiser')."""
    region: str = ""
    """The region of the hypothesis space it belongs to."""
    parent: int | None = None
    """The hypothesis this one refines or repairs; None for an original one."""
    status: HypothesisStatus = "pending"
    """Life cycle: pending → working → retained, or set_aside (with a cooldown) → revived."""
    cooldown_until: int | None = None
    """A set-aside hypothesis may not be revived before this round; None when no cooldown applies."""
    cites: list[int] = []
    """Observation ids that motivated it."""
    nodes: list[int] = []
    """Node ids of the experiments that tested it."""
    created_round: int = Field(0, ge=0)
    """Round in which it was proposed."""
    updated_round: int = Field(0, ge=0)
    """Round of its last status change."""
    archived: bool = False
    """True once the direction was abandoned on a fatal flaw (a pivot): never revived, never worked on again."""


class Observation(Record):
    """A fact seen during the search, in the observation space, independent of any hypothesis."""

    text: str
    """The observation, stated as measured (numbers quoted as they were reported)."""
    source: ObservationSource
    """Where it came from: the baseline audit, an inspection, an execution, a comparison, or a probe
    (`search.investigation.probes`: a measurement sought, not a by-product)."""
    region: str = ""
    """The region of the observation space it belongs to."""
    node: int | None = None
    """The node it was observed on, if any."""
    provisional: bool = True
    """True until confirmed by a second sighting or a comparison."""
    times_seen: int = Field(1, ge=1)
    """How many times the same observation was made."""
    round: int = Field(0, ge=0)
    """Round in which it was first made."""


class Evidence(Record):
    """The relation between one observation and one hypothesis."""

    observation: int
    """Observation id."""
    hypothesis: int
    """Hypothesis id."""
    relation: Relation = "unassessed"
    """Whether the observation supports, opposes, is neutral to, or has not yet been assessed against it."""
    round: int = Field(0, ge=0)
    """Round in which the relation was last assessed."""
    note: str = ""
    """The reason given for the relation."""


class Insight(Record):
    """A one-line entry in the scientist's editable memory, or an audit note."""

    text: str
    """The insight, one line."""
    kind: InsightKind = "memory"
    """'memory' for the scientist's editable memory, 'audit' for a note from the baseline audit."""
    node: int | None = None
    """The node it was learned from, if any."""
    active: bool = True
    """False once the scientist deleted or replaced it (kept for the record, hidden from prompts)."""
    round: int = Field(0, ge=0)
    """Round in which it was written."""


class Rollout(Record):
    """One scientist action as a training sample: the state prompt, the verbalized draw, and its reward."""

    round: int = Field(0, ge=0)
    """Round of the action."""
    group: int = Field(0, ge=0)
    """GRPO group: the N actions sampled from the same state share it."""
    prompt: list[dict[str, Any]] = []
    """The rendered state prompt, as chat messages."""
    candidates: list[dict[str, Any]] = []
    """The full verbalized candidate list (parent, hypothesis, axis, region, probability, cites)."""
    drawn: int = Field(0, ge=0)
    """Index of the candidate the sampler drew."""
    probability: float = Field(0.0, ge=0.0, le=1.0)
    """The probability with which it was drawn."""
    action: str = ""
    """The canonical single-action text that training scores."""
    node: int | None = None
    """The node the action produced; None until the executor made one (or if it failed to)."""
    reward: float | None = None
    """The reward once the node was scored; None until then."""
    old_logprob: float | None = None
    """Log-probability of `action` under the policy that sampled it (for the GRPO ratio)."""
    adapter: str | None = None
    """The adapter checkpoint that sampled it; None for the base model."""
    json_schema: dict[str, Any] | None = None
    """The JSON schema that constrained the answer (named json_schema: `schema` shadows a BaseModel method)."""
    tokens: list[int] = []
    """The proposal's completion as sampled (token ids, the stop token included); empty when the backend
    reported none (a served scientist: training then re-tokenizes `action`)."""
    span: list[int] = []
    """[start, end) of the drawn candidate's tokens in `tokens`: the action training learns from, under
    the prompt and the candidates before it."""


class Event(Record):
    """An append-only log entry: budget use, round boundaries, errors, adapter updates."""

    ts: float = Field(default_factory=time.time)
    """Unix timestamp."""
    kind: str
    """What happened, e.g. 'round_start', 'usage', 'adapter_saved'."""
    payload: dict[str, Any] = {}
    """Details, JSON-serialisable."""


class SearchState(BaseModel):
    """The whole state of a run, each kind keyed by id (built by `Store.load_state()`)."""

    model_config = ConfigDict(extra="forbid")
    nodes: dict[int, Node] = {}
    hypotheses: dict[int, Hypothesis] = {}
    observations: dict[int, Observation] = {}
    evidence: dict[int, Evidence] = {}
    insights: dict[int, Insight] = {}
    rollouts: dict[int, Rollout] = {}
    events: dict[int, Event] = {}
    meta: dict[str, Any] = {}
    """Run-level key/values from the store's meta table (schema_version among them)."""

    def children(self, node_id: int) -> list[Node]:
        """Direct children of a node, oldest first."""
        return sorted((n for n in self.nodes.values() if n.parent == node_id), key=lambda n: n.id)

    def valid_nodes(self) -> list[Node]:
        """Nodes whose evaluation succeeded (the seed and every valid node), oldest first."""
        return sorted((n for n in self.nodes.values() if n.status in ("seed", "valid")), key=lambda n: n.id)

    def best(self) -> Node | None:
        """The highest-scoring valid or seed node (the oldest wins a tie); None when nothing has a score."""
        scored = [n for n in self.valid_nodes() if n.score is not None]
        return max(scored, key=lambda n: (n.score, -n.id), default=None)
