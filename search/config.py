"""The configuration of a search run: one pydantic tree, loaded from TOML, overridden by CLI flags.

The flag path equals the field path (`--set scientist.candidates=3`), plus short flags for the common
fields. The resolved config is written to the run directory, so a resumed run uses exactly the same one.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from arts.policy.analysis import AnalysisConfig
from arts.policy.base import Pricing
from arts.policy.executor import ExecutorConfig
from arts.policy.investigator import InvestigatorConfig
from arts.policy.scientist import ScientistConfig
from arts.rewards import RewardConfig
from arts.search.attribution import AttributionConfig
from arts.search.dual import ComponentsConfig, SpaceConfig
from arts.search.render import RenderConfig
from arts.training.grpo import GRPOConfig

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


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


class BudgetConfig(BaseModel):
    """A run stops as soon as any budget is spent."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    evals: int = Field(20, ge=1)
    """Sandboxed evaluations (every executor validate call counts)."""
    rounds: int = Field(100, ge=1)
    """Search rounds."""
    tokens: int | None = Field(None, ge=1)
    """Model tokens, prompt plus completion, scientist and executor together."""
    wall_s: float | None = Field(None, gt=0)
    """Wall-clock seconds."""
    dollars: float | None = Field(None, gt=0)
    """Model spending, priced by each model's `pricing` (models without a price cost nothing)."""


class SearchConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    task: str = "circle-packing-26"
    """Built-in task name or task directory."""
    method: Literal["arts", "greedy", "random", "mutate"] = "arts"
    """arts: the scientist's verbalized proposals; greedy: AIDE-like drafts then improve the best;
    random: a uniformly random node with the scientist's first candidate; mutate: random edits, no model."""
    group: int = Field(4, ge=1)
    """N: actions drawn from one proposal per round (the GRPO group)."""
    drafts: int = Field(2, ge=1)
    """greedy: initial drafts from the root before improving the best node."""
    debug_depth: int = Field(2, ge=0)
    """greedy: how many times in a row a failed node is debugged before the best node is improved."""
    seed: int = 0
    """Seeds the sampler and the models."""
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
    ttt: bool = False
    """Test-time training: LoRA GRPO updates of the scientist during the search (transformers backend)."""
    trainer_model: str | None = None
    """TTT with a served scientist (vllm/openai): the local weights trained in this process; default:
    scientist_model.model. Each checkpoint is loaded into the server under a new adapter name."""
    grpo: GRPOConfig = GRPOConfig()
    """The GRPO update and its schedule (used when `ttt` is on)."""
    reward: RewardConfig = RewardConfig()
    """How an action's score becomes its reward (used when `ttt` is on)."""

    @model_validator(mode="after")
    def _ttt_needs_groups(self) -> SearchConfig:
        if self.ttt and self.method != "arts":
            raise ValueError(
                f"ttt trains on groups of actions drawn from one proposal, which only method arts makes "
                f"(got method={self.method!r}); use --method arts or drop --ttt"
            )
        if self.ttt and self.group < 2:
            raise ValueError(
                f"ttt needs at least 2 actions per group to compare (group={self.group}); raise --group"
            )
        return self

    @model_validator(mode="after")
    def _group_fits(self) -> SearchConfig:
        if self.method == "arts" and self.group > self.scientist.candidates * 4:
            raise ValueError(
                f"group={self.group} draws far more actions than scientist.candidates={self.scientist.candidates}; "
                "raise scientist.candidates or lower group"
            )
        return self


def _set_path(d: dict[str, Any], path: str, value: Any) -> None:
    keys = path.split(".")
    for k in keys[:-1]:
        d = d.setdefault(k, {})
    d[keys[-1]] = value


def parse_value(text: str) -> Any:
    """A --set value: TOML syntax where it parses (numbers, booleans, lists), else the plain string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def load_config(path: Path | None, overrides: dict[str, Any]) -> SearchConfig:
    """The TOML file (if any) with dotted-path overrides applied on top."""
    data: dict[str, Any] = tomllib.loads(path.read_text()) if path else {}
    for key, value in overrides.items():
        _set_path(data, key, value)
    return SearchConfig.model_validate(data)


def to_toml(cfg: SearchConfig) -> str:
    """The resolved config as TOML (None values left out, as TOML has no null)."""
    lines: list[str] = []

    def emit(prefix: str, obj: dict[str, Any]) -> None:
        tables = {k: v for k, v in obj.items() if isinstance(v, dict)}
        for k, v in obj.items():
            if v is None or isinstance(v, dict):
                continue
            lines.append(f"{k} = {_toml_value(v)}")
        for k, v in tables.items():
            lines.append(f"\n[{prefix}{k}]")
            emit(f"{prefix}{k}.", v)

    emit("", cfg.model_dump(mode="json"))
    return "\n".join(lines) + "\n"


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    import json

    return json.dumps(str(v))
