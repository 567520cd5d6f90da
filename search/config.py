"""The configuration of a search run: one pydantic tree, loaded from TOML, overridden by flags, shaped by a
profile.

The flag path equals the field path (`--set scientist.tail_depth=2`), plus short flags for the common
fields. A profile (`search.profiles`) supplies defaults for the model's size; anything set explicitly
wins. The resolved config (its profile resolved too) is written to the run directory, so a resumed run
uses exactly the same one. `arts config show` prints every field with its default, value and docstring.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from arts.policy.analysis import AnalysisConfig
from arts.policy.base import Pricing
from arts.policy.executor import ExecutorConfig
from arts.policy.investigator import InvestigatorConfig
from arts.policy.scientist import ScientistConfig
from arts.rewards import RewardConfig
from arts.search.investigation.attribution import AttributionConfig
from arts.search.investigation.space import SpaceConfig
from arts.search.meter import BudgetConfig
from arts.search.profiles import apply_profile
from arts.search.render import RenderConfig
from arts.training.grpo import GRPOConfig

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DRAWS_PER_CANDIDATE = 4
"""A round draws at most this many actions per candidate of a proposal (`group <= 4 * scientist.candidates`):
past that, nearly every drawn action repeats one already drawn."""

MOVED_KEYS: dict[str, tuple[str, str]] = {
    "ttt.grpo.seed": ("seed", "the run's one seed also seeds the LoRA initialisation"),
    "ttt.parents": ("scientist.parents", "one knob with or without --ttt, the same default in both"),
    "render.memory": ("render.memory_entries", "how many memory entries the prompt shows; components.memory "
                      "turns the memory off"),
    "analysis.statement_chars": ("analysis.plan_statement_chars", "the plan's cut of the statement; "
                                 "render.statement_chars is the round prompt's"),
}  # fmt: skip
"""Keys of earlier configs: old path -> (the path that holds its meaning now, why). Given anew (a file, a
flag, `--set`), an old key is an error naming the new one; a run folder that stored one still resumes
(`upgrade_stored`)."""


class ModelConfig(BaseModel):
    """Which model answers, through which backend."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    backend: str = "transformers"
    """transformers (local, default), vllm (GPU, extra), openai (any OpenAI-compatible server), or module:attr."""
    model: str | None = None
    """Model directory or id; None is the embedded SmolLM2-135M-Instruct."""
    base_url: str | None = None
    """Server address for the openai backend (e.g. http://127.0.0.1:8000/v1)."""
    pricing: Pricing | None = None
    """Dollars per million input, cached and output tokens; turns usage into money for `budget.dollars`."""
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """Weights' dtype of a local backend (transformers, vllm). auto: bfloat16 on a GPU; on a CPU with native
    bf16 (avx512_bf16, AMX), bfloat16 unless TTT trains this model, where float32 keeps the sampler's and
    the update's log-probs within 1e-5 (bf16: ~0.3 nats; TTT runs there too, docs/ttt-sweep.md); float32
    on other CPUs. With
    avx512_bf16, bfloat16 measured 2.7x faster prefill and 1.3-1.8x faster decoding, its log-probs within
    0.28 nats of float32's (docs/benchmark.md)."""


class ComponentsConfig(BaseModel):
    """Parts of the arts round that can be turned off one at a time (ablations)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    observations: bool = True
    """The observation space: observations with evidence relations, shown to the scientist and citable."""
    comparison: bool = True
    """The joint comparison of the round's working hypotheses."""
    attribution: bool = True
    """Failure attribution (competing causes, critic, judge, routing) for failed, regressed or stalled work."""
    audit: bool = True
    """The baseline audits before the first round."""
    verbalized: bool = True
    """Verbalized sampling; off: every action of a round is the candidate with the highest probability."""
    memory: bool = True
    """The scientist's memory of one-line insights (written after every node, shown in the prompt)."""


class BaselinesConfig(BaseModel):
    """The baseline methods' own settings."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    drafts: int = Field(2, ge=1)
    """greedy: initial drafts from the root before improving the best node."""
    debug_depth: int = Field(2, ge=0)
    """greedy: how many times in a row a failed node is debugged before the best node is improved."""
    mutate_from_best: float = Field(0.7, ge=0, le=1)
    """mutate: share of mutations that start from the best node (the rest from a random valid node)."""
    mutate_attempts: int = Field(5, ge=1)
    """mutate: random edits tried per node until one applies."""


class TTTConfig(BaseModel):
    """Test-time training: LoRA GRPO updates of the scientist during the search."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    enabled: bool = False
    """Train the scientist during the search (`--ttt`); needs a method that draws groups (arts)."""
    trainer_model: str | None = None
    """With a served scientist (vllm/openai): the local weights trained in this process; default:
    scientist_model.model. Each checkpoint is loaded into the server under a new adapter name."""
    grpo: GRPOConfig = GRPOConfig()
    """The GRPO update and its schedule."""
    reward: RewardConfig = RewardConfig()
    """How an action's score becomes its reward."""
    companions: bool = False
    """Train each round's group on the undrawn candidates of its lists that name an experiment the round
    ran (the same parent and move as a drawn action) too, rewarded as that action (`search.companions`):
    more samples of the policy per update for no evaluation. Off: on probe-jacobi (5 seeds) they were 80
    beside 56 drawn and changed neither the credit check nor a score (docs/benchmark.md, "Companions")."""
    watch: str | None = None
    """A class of moves to watch, as a hypothesis starts ("increase STEPS"): before each update, its draw
    probability in a list of the newest round (the probability of writing it where the list offers it,
    times its expected stated probability over the list's), under the adapter in force and under the base
    model, on a prompt that adapter has not trained on (`training.watch`; a `watch` event, shown by the
    console).
    Unset: a probe task's own paying class, if the task declares one."""


class SearchConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    task: str = "circle-packing-26"
    """Built-in task name or task directory."""
    method: str = "arts"
    """arts: the scientist's verbalized proposals; greedy: AIDE-like drafts then improve the best;
    random: a uniformly random node with the scientist's first candidate; mutate: random edits, no model;
    or module:attr of your own `search.methods.Method`."""
    profile: Literal["auto", "small", "capable"] = "auto"
    """Defaults for the model's size (`search.profiles`): small (directed hypotheses, value menus, the best
    node as parent, short prompts) or capable (free hypotheses, parent choice, whole-function and file
    edits, larger prompts); auto: small for the embedded model and local models under 1B parameters."""
    group: int = Field(4, ge=1)
    """N: actions drawn from one proposal per round (the GRPO group)."""
    seed: int = 0
    """The run's one seed: the sampler's, and every model call's (derived in `search.seeds`)."""
    evaluate_on: Literal["local", "ray"] = "local"
    """Where evaluations run: this machine's sandbox, or Ray tasks on a cluster (`search.remote`).
    With ray, the task and run folders must be on a filesystem every node shares."""
    ray_address: str | None = None
    """The Ray cluster to join (`auto`, `ray://HOST:10001`); None starts a local one on this machine."""
    workers: int | None = Field(None, ge=1)
    """Evaluations at once while a round's experiments run together (`search.overlap`); 1: one by one.
    Their model calls are decoded as one batch. Default: the cores available (a bench's share of them),
    where the executor's backend can decode several prompts together, and for `mutate` (no model); else 1."""
    scientist_model: ModelConfig = ModelConfig()
    executor_model: ModelConfig = ModelConfig()
    budget: BudgetConfig = BudgetConfig()
    scientist: ScientistConfig = ScientistConfig()
    executor: ExecutorConfig = ExecutorConfig()
    render: RenderConfig = RenderConfig()
    investigator: InvestigatorConfig = InvestigatorConfig()
    """The executor of an answer-kind (diagnosis) task: read-only tools, findings, the answer."""
    components: ComponentsConfig = ComponentsConfig()
    """Parts of the arts round that can be turned off one at a time (ablations)."""
    space: SpaceConfig = SpaceConfig()
    """The hypothesis and observation spaces."""
    analysis: AnalysisConfig = AnalysisConfig()
    """The plan, comparison and attribution calls."""
    attribution: AttributionConfig = AttributionConfig()
    """Failure attribution: causes, critic, routing table, verdict clamp, pivot distinctness."""
    baselines: BaselinesConfig = BaselinesConfig()
    """The baseline methods' own settings (greedy, mutate)."""
    ttt: TTTConfig = TTTConfig()
    """Test-time training."""

    @model_validator(mode="before")
    @classmethod
    def _profile(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if (message := moved_key_message(data)) is not None:
            raise ValueError(message)
        return apply_profile(data)

    @model_validator(mode="after")
    def _ttt_needs_groups(self) -> SearchConfig:
        if self.ttt.enabled and self.group < 2:
            raise ValueError(
                f"ttt needs at least 2 actions per group to compare (group={self.group}); raise --group"
            )
        return self

    @model_validator(mode="after")
    def _group_fits(self) -> SearchConfig:
        if self.group > self.scientist.candidates * DRAWS_PER_CANDIDATE:
            raise ValueError(
                f"group={self.group} draws far more actions than scientist.candidates={self.scientist.candidates}; "
                "raise scientist.candidates or lower group"
            )
        return self


_MISSING = object()


def _get_path(d: Any, path: str) -> Any:
    for k in path.split("."):
        if not isinstance(d, dict) or k not in d:
            return _MISSING
        d = d[k]
    return d


def _set_path(d: dict[str, Any], path: str, value: Any) -> None:
    keys = path.split(".")
    for k in keys[:-1]:
        d = d.setdefault(k, {})
    d[keys[-1]] = value


def _pop_path(d: dict[str, Any], path: str) -> Any:
    *parents, last = path.split(".")
    inner = _get_path(d, ".".join(parents)) if parents else d
    return inner.pop(last, _MISSING) if isinstance(inner, dict) else _MISSING


def moved_key_message(data: dict[str, Any]) -> str | None:
    """What to do about the first key of an earlier config in `data` (a user's file or flags), or None."""
    for old, (new, why) in MOVED_KEYS.items():
        if _get_path(data, old) is not _MISSING:
            return f"{old} is now {new} ({why}); set {new} instead, e.g. --set {new}=VALUE"
    return None


def upgrade_stored(data: dict[str, Any]) -> dict[str, Any]:
    """A run folder's stored config in today's keys, meaning what it meant when the run started: an old key
    moves to its new path where that is unset, else it is dropped (the new path was stored beside it)."""
    data = copy.deepcopy(data)
    ttt = data.get("ttt", {})
    if isinstance(ttt, dict) and ttt.get("enabled") and "parents" in ttt:  # it overrode scientist.parents
        _set_path(data, "scientist.parents", ttt["parents"])
    for old, (new, _) in MOVED_KEYS.items():
        value = _pop_path(data, old)
        if value is not _MISSING and _get_path(data, new) is _MISSING:
            _set_path(data, new, value)
    return data


def parse_value(text: str) -> Any:
    """A --set value: TOML syntax where it parses (numbers, booleans, lists), else the plain string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _read_toml(path: Path) -> dict[str, Any]:
    """A config file's table; errors name the file and the fix."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"--config {path}: no such file; check the path") from None
    except IsADirectoryError:
        raise ValueError(f"--config {path}: a folder, not a file; name the TOML file itself") from None
    except OSError as e:
        raise ValueError(f"--config {path}: cannot read it ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"--config {path}: not UTF-8 text (byte {e.start}); save it as UTF-8") from None
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"--config {path}: not valid TOML ({e}); fix the syntax at that line") from None


def load_config(path: Path | None, overrides: dict[str, Any]) -> SearchConfig:
    """The TOML file (if any) with dotted-path overrides applied on top (the profile resolves on validation)."""
    data: dict[str, Any] = _read_toml(path) if path else {}
    if path and (message := moved_key_message(data)):
        raise ValueError(f"--config {path}: {message.replace(', e.g. --set', ' in the file, or --set')}")
    for key, value in overrides.items():
        _set_path(data, key, value)
    if message := moved_key_message(data):
        raise ValueError(message)
    return SearchConfig.model_validate(data)


def read_stored_config(path: Path) -> SearchConfig:
    """The resolved config a run wrote (`config.toml`), also one written under earlier keys (`MOVED_KEYS`);
    errors name the file and what to do."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ValueError(f"{path}: not a readable config ({e}); restore it or start a new run") from None
    try:
        return SearchConfig.model_validate(upgrade_stored(data))
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"{path}: {where}: {first['msg']}; fix that field or start a new run") from None


def to_toml(cfg: SearchConfig) -> str:
    """The resolved config as TOML (None values left out, as TOML has no null)."""
    lines: list[str] = []

    def emit(prefix: str, obj: dict[str, Any]) -> None:
        tables = {k: v for k, v in obj.items() if isinstance(v, dict)}
        for k, v in obj.items():
            if v is None or isinstance(v, dict):
                continue
            lines.append(f"{k} = {toml_value(v)}")
        for k, v in tables.items():
            lines.append(f"\n[{prefix}{k}]")
            emit(f"{prefix}{k}.", v)

    emit("", cfg.model_dump(mode="json"))
    return "\n".join(lines) + "\n"


def toml_value(v: Any) -> str:
    """One value in TOML syntax (a string, number, bool, list or inline table)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v != v:
        return "nan"
    if isinstance(v, float) and v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {toml_value(x)}" for k, x in v.items()) + "}"
    return json.dumps(str(v))
