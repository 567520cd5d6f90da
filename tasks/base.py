"""The task contract: what a task directory holds, how it is loaded and checked, and what an evaluation returns.

A task is a directory with `task.toml` (see docs/tasks.md). Built-in tasks and users' own directories go
through the same loader, so a user task gets exactly the checks a built-in one does. Every error names
the file, the field and the fix. This module reads files only; running anything is the sandbox's (`tasks.evaluate`).

Two rules a Python evaluator or grader follows, because the sandbox's launcher (`tasks.launch`) enforces
them: write result.json last (opening it for writing stops every other process of the evaluation, so that
nothing can race the write), and read the hidden files before starting the candidate (under [test] they
are deleted when the grader starts its first process). Every built-in task follows both.
"""

from __future__ import annotations

import functools
import json
import math
import re
import sys
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from arts.tasks.hidden import GENERATOR, HiddenBuildError, hidden_root
from arts.tasks.probe import ProbeConfig
from arts.tasks.problems import field_problems, links_out, not_utf8, schema_problems, shown_and_hidden, under

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

BUILTIN_DIR = Path(__file__).parent / "builtin"


class TaskError(ValueError):
    """A task directory that cannot be used; the message names the file, the field and the fix."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MetricConfig(_Strict):
    name: str
    """What the score measures, e.g. `sum_of_radii`."""
    direction: Literal["maximize", "minimize"]
    """Whether a larger or a smaller raw score is better."""
    baseline: float | None = Field(None, strict=True, allow_inf_nan=False)
    """The seed program's score, for reports."""
    best_known: float | None = Field(None, strict=True, allow_inf_nan=False)
    """A published reference score, for the optimality gap."""
    references: list[str] = []
    """Where the reference numbers come from (free text, shown by `arts tasks show`)."""
    deterministic: bool = Field(False, strict=True)
    """The evaluator gives a program the same score every time (seeded, no wall-clock budget on the
    score): a doubted measurement is never repeated; a failure routed to the protocol is repaired."""


MAX_TIMEOUT_S = 7 * 24 * 3600
MAX_MEMORY_MB = 1 << 20


class CommandConfig(_Strict):
    command: list[str] = Field(min_length=1)
    """argv run inside the node's working copy; it must write `result.json`."""
    timeout_s: float = Field(60.0, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False, strict=True)
    """Wall-clock limit (at most a week); the whole process tree is killed past it."""
    memory_mb: int = Field(2048, gt=0, le=MAX_MEMORY_MB, strict=True)
    """Memory limit in MiB (at most 1 TiB): over the whole process tree where a memory cgroup is available,
    else per process."""
    disk_mb: int = Field(1024, gt=0, le=MAX_MEMORY_MB, strict=True)
    """How much the evaluation may write into its working copy, in MiB, checked four times a second: past
    it the run is stopped and what it wrote is deleted (a burst between two checks may overshoot)."""
    max_procs: int = Field(64, gt=0, le=100_000, strict=True)
    """How many processes the evaluation may run at once."""
    threads: int = Field(1, gt=0, le=1024, strict=True)
    """OMP/MKL/OpenBLAS thread count given to the evaluation."""


class AnswerConfig(_Strict):
    """`[answer]`: what an `answer` task delivers and the JSON schema that bounds it."""

    file: str = "answer.json"
    """The deliverable that `[test]` grades; the search writes it, so it must be listed in `editable`."""
    schema_path: str = Field(alias="schema")
    """JSON-schema file (relative to the task directory, listed under `material`) that answer.json follows;
    a backend can decode the answer under it, so even a small model writes only valid values."""

    @field_validator("file", "schema_path")
    @classmethod
    def _relative(cls, v: str) -> str:
        if v.startswith("/") or ".." in Path(v).parts or v in ("", ".") or v.endswith("/"):
            raise ValueError(f"{v!r} must be a file path relative to the task directory, without '..'")
        return v


class TaskConfig(_Strict):
    name: str
    """Lower-case letters, digits and dashes."""
    statement: str
    """File holding the problem statement shown to the scientist."""
    kind: Literal["optimize", "answer"]
    """`optimize`: a program scored by an evaluator; `answer`: a deliverable graded only at the end."""
    editable: list[str] = Field(min_length=1)
    """Files the executor may write (the program under search)."""
    seedless: bool = Field(False, strict=True)
    """True when an optimize task ships no seed program: its first nodes are drafts. Without it, every
    editable file must exist in the task directory (a missing one is a typo, not a seedless task)."""
    material: list[str] = []
    """Read-only case material (files or folders ending in `/`), visible to scientist and executor."""
    hidden: list[str] = []
    """Never visible during search (test split, ground truth); present only for `[test]`."""
    metric: MetricConfig | None = None
    evaluate: CommandConfig | None = None
    test: CommandConfig | None = None
    answer: AnswerConfig | None = None
    """`answer` tasks only: the deliverable file and the JSON schema it follows."""
    probe: ProbeConfig | None = None
    """Learning probes only: the class of moves that pays (`tasks.probe`)."""

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", v):
            raise ValueError(
                f"{v!r} is not a task name; use lower-case letters, digits and dashes, e.g. 'my-task'"
            )
        return v

    @field_validator("editable", "material", "hidden")
    @classmethod
    def _relative(cls, v: list[str]) -> list[str]:
        for p in v:
            if p.startswith("/") or ".." in Path(p).parts or p in ("", "."):
                raise ValueError(f"{p!r} must be a path relative to the task directory, without '..'")
        return v

    @field_validator("answer")
    @classmethod
    def _answer_rules(cls, answer: AnswerConfig | None, info: ValidationInfo) -> AnswerConfig | None:
        # Fields declared above `answer` are validated first; one that failed is absent and reported alone.
        if answer is None:
            return None
        if info.data.get("kind", "answer") != "answer":
            raise ValueError(
                "an [answer] section belongs to an 'answer' task only; remove it or set kind = \"answer\""
            )
        editable = info.data.get("editable", [answer.file])
        if answer.file not in editable:
            raise ValueError(
                f"answer.file {answer.file!r} is not in editable {editable}; add it there (the search writes it)"
            )
        if not _covers(info.data.get("material", [answer.schema_path]), answer.schema_path):
            raise ValueError(
                f"answer.schema {answer.schema_path!r} is not listed under material; add it (or its folder) there"
            )
        return answer

    @model_validator(mode="after")
    def _kind_rules(self) -> TaskConfig:
        if self.kind == "optimize":
            if self.evaluate is None:
                raise ValueError(
                    "an 'optimize' task needs an [evaluate] section with a command that writes result.json"
                )
            if self.metric is None:
                raise ValueError("an 'optimize' task needs a [metric] section with name and direction")
        else:
            if self.test is None:
                raise ValueError("an 'answer' task needs a [test] section that grades the deliverable")
            if self.evaluate is not None:
                raise ValueError(
                    "an 'answer' task has no [evaluate] section (the search sees no score); remove it"
                )
        overlap = set(self.editable) & (set(self.material) | set(self.hidden))
        if overlap:
            raise ValueError(
                f"{sorted(overlap)} listed as editable and as material/hidden; list each file once"
            )
        return self


def _covers(entries: list[str], rel: str) -> bool:
    """Whether `rel` is one of the listed files or lies inside a listed folder (`dir/`)."""
    return any(rel == e or (e.endswith("/") and rel.startswith(e)) for e in entries)


class EvalResult(BaseModel):
    """What one sandboxed evaluation returned. Never raised as an error: an invalid run says why."""

    model_config = ConfigDict(extra="forbid")
    valid: bool
    score: float | None = None
    """Raw score as the evaluator wrote it (display value)."""
    metrics: dict = {}
    message: str = ""
    """The evaluator's own message."""
    reason: str = ""
    """Why the result is invalid (timeout, crash, killed for memory, bad result.json, ...); empty if valid."""
    wall_s: float = 0.0
    returncode: int | None = None
    stdout_tail: str = ""
    stderr_tail: str = ""


class Task:
    """A loaded, checked task directory."""

    def __init__(self, root: Path, config: TaskConfig):
        self.root = root
        self.config = config

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def statement(self) -> str:
        return (self.root / self.config.statement).read_text()

    @property
    def maximize(self) -> bool:
        return self.config.metric is None or self.config.metric.direction == "maximize"

    def normalise(self, raw: float | None) -> float | None:
        """Direction-normalised score: higher is always better inside the search."""
        if raw is None or not math.isfinite(raw):
            return None
        return raw if self.maximize else -raw

    def seed_files(self) -> dict[str, str]:
        """The editable files as shipped; empty for a seedless task (its first nodes are drafts)."""
        return {p: (self.root / p).read_text() for p in self.config.editable if (self.root / p).is_file()}

    @property
    def seedless(self) -> bool:
        return not self.seed_files()

    def answer_schema(self) -> dict | None:
        """The parsed JSON schema of the deliverable (`[answer] schema`), or None when the task has none."""
        if self.config.answer is None:
            return None
        return json.loads((self.root / self.config.answer.schema_path).read_text())

    def material_files(self) -> list[Path]:
        """Every material file, expanded from folders, relative to the task root."""
        return _expand(self.root, self.config.material)

    @functools.cached_property
    def hidden_root(self) -> Path:
        """The folder that holds the hidden entries: the task directory, or for a built-in task the private
        cache that its make_hidden.py builds them into on first use (`tasks.hidden`: none is shipped)."""
        if not _generated(self.root):
            return self.root
        try:
            return hidden_root(self.root, self.name)
        except HiddenBuildError as e:
            raise TaskError(f"{self.root / GENERATOR}: {e}") from None
        except Exception as e:  # whatever the generator or the file system raised, the user gets one line
            raise TaskError(
                f"{self.root / GENERATOR}: cannot build the hidden files ({e}); set ARTS_CACHE to a writable "
                "folder outside the interpreter's prefix, or reinstall arts"
            ) from None

    def hidden_files(self) -> list[Path]:
        """Every hidden file, expanded from folders, relative to `hidden_root`."""
        return _expand(self.hidden_root, self.config.hidden)

    def read_material(self, max_chars: int = 4000) -> dict[str, str]:
        """Text of the material files (each cut to max_chars), for prompts."""
        out = {}
        for rel in self.material_files():
            try:
                out[str(rel)] = (self.root / rel).read_text()[:max_chars]
            except UnicodeDecodeError:
                out[str(rel)] = f"<binary, {(self.root / rel).stat().st_size} bytes>"
        return out


def _generated(root: Path) -> bool:
    """Whether `root` is a built-in task whose hidden files are built at first use."""
    return root.parent == BUILTIN_DIR.resolve() and (root / GENERATOR).is_file()


def _expand(root: Path, entries: list[str]) -> list[Path]:
    files: list[Path] = []
    for entry in entries:
        p = root / entry
        if p.is_dir():
            files += sorted(
                f.relative_to(root) for f in p.rglob("*") if f.is_file() and "__pycache__" not in f.parts
            )
        elif p.is_file():
            files.append(Path(entry))
    return files


def _format_errors(toml_path: Path, err: ValidationError) -> str:
    return "\n".join([f"{toml_path}: {err.error_count()} problem(s)", *field_problems(err)])


def load_task(path: str | Path) -> Task:
    """Load and check a task directory. Raises TaskError naming file, field and fix."""
    root = Path(path).resolve()
    toml_path = root / "task.toml"
    if not root.is_dir():
        raise TaskError(
            f"{root}: no such task directory; give a built-in task name (`arts tasks list`) or a directory"
        )
    if not toml_path.is_file():
        raise TaskError(f"{toml_path}: missing; a task directory needs a task.toml (see docs/tasks.md)")
    try:
        raw = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise TaskError(f"{toml_path}: not UTF-8 text (byte {e.start}); save it as UTF-8") from None
    except tomllib.TOMLDecodeError as e:
        raise TaskError(f"{toml_path}: not valid TOML ({e}); fix the syntax at that line") from None
    try:
        config = TaskConfig.model_validate(raw)
    except ValidationError as e:
        raise TaskError(_format_errors(toml_path, e)) from None
    problems = []
    if not (root / config.statement).is_file():
        problems.append(
            f"  field 'statement': file {config.statement!r} not found in {root}; create it or fix the name"
        )
    for key, names in (("statement", [config.statement]), ("editable", config.editable)):
        for name in names:
            if (root / name).is_file() and (why := not_utf8(root / name)):
                problems.append(f"  field '{key}': {name!r} is not UTF-8 text ({why}); save it as UTF-8")
    missing = [e for e in config.editable if not (root / e).is_file()]
    if config.kind == "optimize" and missing and not config.seedless:
        problems.append(
            f"  field 'editable': {', '.join(map(repr, missing))} not found in {root}; create the seed "
            "program, fix the name, or set seedless = true if the search starts from nothing"
        )
    for key in ("material", "hidden") if not _generated(root) else ("material",):
        for entry in getattr(config, key):
            if not (root / entry).exists():
                problems.append(
                    f"  field '{key}': {entry!r} not found in {root}; create it or remove it from the list"
                )
    problems += shown_and_hidden(config)
    for key in ("evaluate", "test"):
        cmd = getattr(config, key)
        if cmd is None:
            continue
        for arg in cmd.command[1:]:
            if (
                arg.endswith(".py")
                and not (root / arg).is_file()
                and not (_generated(root) and key == "test")
            ):
                problems.append(
                    f"  field '{key}.command': script {arg!r} not found in {root}; create it or fix the path"
                )
            elif key == "evaluate" and under(arg, config.hidden) and not under(arg, config.material):
                problems.append(
                    f"  field 'evaluate.command': {arg!r} is hidden, so absent during the search; "
                    "take it out of hidden and list it under material"
                )
    problems += links_out(root, config)
    if config.answer is not None:
        problems += schema_problems(root, config.answer.schema_path)
    if problems:
        raise TaskError("\n".join([f"{toml_path}: {len(problems)} problem(s)", *problems]))
    return Task(root, config)


def builtin_names() -> list[str]:
    return (
        sorted(p.name for p in BUILTIN_DIR.iterdir() if (p / "task.toml").is_file())
        if BUILTIN_DIR.is_dir()
        else []
    )


def resolve_task(name_or_dir: str | Path) -> Task:
    """A built-in task by name, or a task directory by path."""
    s = str(name_or_dir)
    if s in builtin_names():
        return load_task(BUILTIN_DIR / s)
    if Path(s).is_dir():
        return load_task(s)
    known = ", ".join(builtin_names()) or "(none installed)"
    raise TaskError(f"{s!r} is neither a built-in task nor a directory; built-in tasks: {known}")
