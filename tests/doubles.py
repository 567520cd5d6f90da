"""Test doubles and small fixtures that several test modules share: the toy task and the rule-following
backend of the harness tests, scripted backends, small task and case folders, and helpers that start a run
or a server. The scripted backends only test the harness (the loop, the bookkeeping), never what a model
can do. pytest fixtures stay in conftest.py; a test module imports its shared helpers from here, never
from another test module."""

from __future__ import annotations

import json
import random
import re
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arts.policy.base import Completion, Usage
from arts.tasks.base import Task, load_task

if TYPE_CHECKING:  # the search stack is imported where a helper runs one, so task tests need none of it
    from arts.search.config import SearchConfig
    from arts.search.state import SearchState

ROOT = Path(__file__).resolve().parent.parent
"""The repository root (a subprocess puts it on sys.path to import `tests.doubles`)."""


# ---- the toy task and the rule-following backend of the harness tests ----------------------------------

EVALUATE = """
import json, subprocess, sys
out = subprocess.run([sys.executable, "-c", "import solution; print(solution.value())"],
                     capture_output=True, text=True, timeout=20)
try:
    x = float(out.stdout.strip().splitlines()[-1])
    res = {"score": -(x - 3.0) ** 2, "valid": True, "metrics": {"x": x}, "message": "ok"}
except Exception as e:
    res = {"score": None, "valid": False, "metrics": {}, "message": f"bad output: {e}"}
json.dump(res, open("result.json", "w"))
"""


def make_task(root: Path) -> Path:
    """The toy task at `root`: choose X so that value() is as close to 3 as possible (the seed has X = 1)."""
    root.mkdir(parents=True)
    (root / "task.toml").write_text(
        'name = "toy-quadratic"\nstatement = "statement.md"\nkind = "optimize"\neditable = ["solution.py"]\n'
        'material = ["evaluate.py"]\n\n[metric]\nname = "neg_sq_err"\ndirection = "maximize"\n\n'
        '[evaluate]\ncommand = ["python", "evaluate.py"]\ntimeout_s = 20\nmemory_mb = 1024\n'
    )
    (root / "statement.md").write_text("Choose X so that value() is as close to 3 as possible.\n")
    (root / "solution.py").write_text("X = 1.0\n\n\ndef value():\n    return X\n")
    (root / "evaluate.py").write_text(EVALUATE)
    return root


MOVE = re.compile(
    r"\(?((?:increase|decrease|rewrite|tune|suspect)(?:\|increase|\|decrease|\|probe)*)\)? (\w+(?:\\?[.-]\w+)*)"
)
"""The first move of a directed hypothesis pattern: its verbs and its target."""


def _first(prop: dict, default: str) -> str:
    """The first value a JSON-schema string property allows (`const` or `enum`), else `default`."""
    return prop["const"] if "const" in prop else (prop.get("enum") or [default])[0]


class RuleBackend:
    """Answers every call with a schema-valid object built by simple rules (harness tests only)."""

    name = "rules"
    model_id = "rules"

    def __init__(self, seed: int = 0, delay: float = 0.0, bad_edits: int = 0):
        self.cause = ("method", "major")
        """(category, severity) of every cause the `causes` call returns."""
        self.judge = (False, 0.9)
        """(valid_measurement, confidence) of every judgement."""
        self.rng = random.Random(seed)
        self.bad_edits = bad_edits
        """The first `bad_edits` executor answers set X to 1e308 (the evaluator overflows: invalid)."""
        self.delay = delay
        self.purposes: list[str] = []
        self.schemas: list[tuple[str, object]] = []
        """(purpose, schema) of every call."""
        self.prompts: list[str] = []
        """The user message of every proposal call."""
        self.sink = None

    def answer(self, schema, purpose: str, sample: int = 0) -> dict:
        """The rules' answer; `sample` numbers the n completions of one call (independent lists differ)."""
        if purpose == "audit":
            return {
                "metric": "squared error, smooth",
                "structure": "one constant",
                "weakness": "X is far from 3",
            }
        if purpose == "inspect":
            answer = {"nodes": [self._ids(schema.model_fields["nodes"].annotation.__args__[0])[0]]}
            if "forget" in schema.model_fields:  # drop the oldest memory entry shown
                answer["forget"] = [self._ids(schema.model_fields["forget"].annotation.__args__[0])[0]]
            return answer
        if purpose == "propose":
            field = schema.model_fields["candidates"]
            if field.annotation.__origin__ is tuple:  # one item model per candidate (directed hypotheses)
                items = list(field.annotation.__args__)
            else:
                items = [field.annotation.__args__[0]] * field.metadata[0].min_length
            parents = self._ids(items[0].model_fields["parent"].annotation)
            cites = (
                self._ids(items[0].model_fields["cites"].annotation.__args__[0])[-1:]
                if "cites" in items[0].model_fields
                else None
            )
            cands = []
            for i, item in enumerate(items):
                pattern = item.model_json_schema()["properties"]["hypothesis"]["pattern"]
                verbs, target = m.groups() if (m := MOVE.search(pattern)) else ("increase|decrease", "X")
                target = target.replace("\\.", ".")  # a dotted target is escaped in the pattern
                verb = verbs.split("|")[i % len(verbs.split("|"))]  # the first move this candidate is offered
                props = item.model_json_schema()["properties"]
                cands.append(
                    {
                        "parent": self.rng.choice(parents),
                        "hypothesis": f"{verb} {target} towards three, step {i}"
                        + (f", list {sample}" if sample else ""),
                        # the grammar's vocabulary where it has one, else one axis written two ways
                        "axis": _first(props["axis"], "X value" if i % 2 else "x-values"),
                        "region": _first(props["region"], "constants"),
                        "probability": 1.0 / (i + 1),
                    }
                )
            if "refines" in items[0].model_fields:  # the newest hypothesis shown (the first allowed id)
                spec = items[0].model_json_schema()["properties"]["refines"]["anyOf"][0]
                refines = spec["const"] if "const" in spec else spec["enum"][0]
                cands = [c | {"refines": refines if i == 0 else None} for i, c in enumerate(cands)]
            return {"candidates": [c | ({"cites": cites} if cites is not None else {}) for c in cands]}
        if purpose in ANALYSIS:
            return ANALYSIS[purpose](self, schema)
        if purpose not in ("executor", ""):
            return fill(schema.model_json_schema())  # e.g. the investigator's steps and answers
        text = json.dumps(schema.model_json_schema())
        if '"set_constant"' not in text and '"set_keyword"' in text:  # `tune k`: the first menu's first value
            js = schema.model_json_schema()
            spec = next(
                d["properties"]
                for d in [js, *js.get("$defs", {}).values()]
                if "keyword" in d.get("properties", {})
            )
            action = {k: v.get("const", (v.get("enum") or [None])[0]) for k, v in spec.items()}
            return {"action": action} if "action" in schema.model_fields else action
        if '"set_constant"' not in text and (f := re.search(r"SetReturn_(\w+)", text)):  # `rewrite value`
            action = {
                "function": f.group(1),
                "op": "set_return",
                "expression": f"X + {self.rng.randint(1, 3)}",
            }
            return {"action": action} if "action" in schema.model_fields else action
        name = m.group(1) if (m := re.search(r"SetConstant_(\w+)", text)) else "X"  # the first menu offered
        after = text.split(f'"const": "{name}"', 1)[-1].split('"value": ', 1)
        spec = json.JSONDecoder().raw_decode(after[1])[0] if len(after) > 1 and m is not None else {}
        if "enum" in spec or "const" in spec:  # the constant's value menu (of one value: a const)
            value = self.rng.choice(spec["enum"]) if "enum" in spec else spec["const"]
        else:
            value = round(self.rng.uniform(0, 5), 3)
        if self.bad_edits > 0:  # needs executor.value_menu off: 1e308 is on no menu
            self.bad_edits, value = self.bad_edits - 1, 1e308
        action = {"name": name, "op": "set_constant", "value": value}
        return {"action": action} if "action" in schema.model_fields else action

    @staticmethod
    def _ids(annotation) -> list[int]:
        return list(annotation.__args__)

    def generate(self, prompts, n=1, sampling=None, schema=None, adapter=None, purpose=""):
        time.sleep(self.delay)
        self.purposes.append(purpose)
        self.schemas.append((purpose, schema))
        if purpose == "propose":
            self.prompts.append(prompts[-1]["content"])
        if self.sink is not None:
            self.sink(
                Usage(backend="rules", model="rules", prompt_tokens=50, completion_tokens=10, purpose=purpose)
            )
        return [[self._completion(json.dumps(self.answer(schema, purpose, s)), schema) for s in range(n)]]

    @staticmethod
    def _completion(text: str, schema) -> Completion:
        try:
            parsed, error = schema.model_validate_json(text), None
        except ValueError as e:  # e.g. X's value menu is used up: a typed failure, as from a model
            parsed, error = None, str(e).splitlines()[0]
        return Completion(text=text, parsed=parsed, error=error, prompt_tokens=50, completion_tokens=10)

    def logprobs(self, prompt, completion, schema=None, adapter=None):
        raise NotImplementedError

    def count_tokens(self, text: str) -> int:
        return len(text) // 4


def _min(schema, field: str) -> int:
    """How many items a list (its min_length) or a tuple (its slots) field holds."""
    info = schema.model_fields[field]
    if getattr(info.annotation, "__origin__", None) is tuple:
        return len(info.annotation.__args__)
    return next(m.min_length for m in info.metadata if hasattr(m, "min_length"))


def _slot_category(schema, i: int, default: str) -> str:
    """The category the grammar fixes for cause i (`Analyst.causes`' slots), else `default`."""
    args = getattr(schema.model_fields["causes"].annotation, "__args__", ())
    if i < len(args) and isinstance(args[i], type) and "category" in args[i].model_fields:
        allowed = getattr(args[i].model_fields["category"].annotation, "__args__", ())
        return allowed[0] if len(allowed) == 1 else default
    return default


def compare_answer(b: RuleBackend, schema) -> dict:
    verdict = schema.model_fields["verdicts"].annotation.__args__[0]
    ids = list(verdict.model_fields["hypothesis"].annotation.__args__)
    return {
        "flawed": [],
        "predictions": ["X above 3 scores lower"],
        "verdicts": [
            {"hypothesis": i, "verdict": "support", "observation": "X near 3 scores higher"} for i in ids
        ],
    }


def _choices(schema, name: str) -> list[float]:
    """The values the critic's item schema allows for field `name` (its grades or levels), in order."""
    item = schema.model_fields["scores"].annotation.__args__[0]
    return list(item.model_fields[name].annotation.__args__)


CRITICALITY = {"minor": 0.3, "major": 0.6, "fatal": 0.9}
"""The scripted critic's criticality for each severity the scripted causes carry (the nearest level the
critic may give): the gated route is the route of the table on those labels (minor: local, major:
structural, fatal: pivot)."""

ANALYSIS = {
    "plan": lambda b, schema: (
        {
            "situation": "one constant X",
            "deliverable": "solution.py",
            "requirements": [],
        }
        | ({"axes": ["x value", "precision"]} if "axes" in schema.model_fields else {})
    ),
    "causes": lambda b, schema: {  # each slot's own category where the grammar fixes it; the critic
        "causes": [  # below gives every cause the scripted category, so the route is the scripted one
            {
                "cause": "X overflowed",
                "evidence": "exit 1",
                "category": _slot_category(schema, i, b.cause[0]),
                "severity": b.cause[1],
                "fix": "use a finite X",
            }
            for i in range(_min(schema, "causes"))
        ]
    },
    "critic": lambda b, schema: {
        "scores": [
            {
                "index": i,
                "score": _choices(schema, "score")[-1 - i % 5],  # the grades, best first
                "category": b.cause[0],
                "criticality": min(
                    _choices(schema, "criticality"), key=lambda v: abs(v - CRITICALITY[b.cause[1]])
                ),
            }
            for i in range(_min(schema, "scores"))
        ]
    },
    "judge": lambda b, schema: {
        "reason": "it ran as intended",
        "valid_measurement": b.judge[0],
        "confidence": b.judge[1],
    },
    "compare": compare_answer,
}


def fill(node: dict, defs: dict | None = None) -> object:
    """The first valid value of a JSON schema (enums, consts, minimal strings and lists)."""
    defs = defs if defs is not None else node.get("$defs", {})
    if "$ref" in node:
        return fill(defs[node["$ref"].split("/")[-1]], defs)
    for key in ("anyOf", "oneOf"):
        if key in node:
            return fill(node[key][-1], defs)
    if "const" in node:
        return node["const"]
    if "enum" in node:
        return node["enum"][0]
    kind = node.get("type")
    if kind == "object":
        return {
            k: fill(v, defs) for k, v in node.get("properties", {}).items() if k in node.get("required", [])
        }
    if kind == "array":
        return [fill(node["items"], defs) for _ in range(node.get("minItems", 0))]
    if kind == "string":
        return "found in the logs"[: node.get("maxLength", 40)].ljust(node.get("minLength", 0), "x")
    if kind == "boolean":
        return True
    return node.get("minimum", 1)


def run_with_rules(cfg: SearchConfig, run_dir: Path) -> dict:
    """A whole search of `cfg` into `run_dir`, quietly; its summary (the backend is what make_backend gives)."""
    from arts.search.loop import run_search
    from arts.search.run import build_run
    from arts.search.store import Store

    run_dir.mkdir(parents=True, exist_ok=True)
    with Store.open(run_dir) as store:
        return run_search(*build_run(cfg, store, log=lambda line: None))


def search_with_rules(cfg: SearchConfig, run_dir: Path) -> dict:
    """`run_with_rules` the way a user starts it: `arts search --config FILE --run-dir DIR --quiet`, the
    config written as `arts config show` writes one; the run's stored summary."""
    from arts.search.cli.main import main
    from arts.search.config import to_toml

    run_dir.parent.mkdir(parents=True, exist_ok=True)
    config = run_dir.parent / f"{run_dir.name}.toml"
    config.write_text(to_toml(cfg))
    code = main(["search", "--config", str(config), "--run-dir", str(run_dir), "--quiet"])
    assert code == 0, f"arts search exited {code}"
    return json.loads((run_dir / "summary.json").read_text())


class BatchingRules(RuleBackend):
    """The harness tests' rules, decoded in batches (as the transformers backend does)."""

    def __init__(self):
        super().__init__()
        self.batch_purposes: list[list[str]] = []

    def generate_each(self, requests):
        self.batch_purposes.append([r.purpose for r in requests])
        return [self.generate(r.prompt, r.n, r.sampling, r.schema, r.adapter, r.purpose)[0] for r in requests]


class SwapRules:
    """The rule-following backend of the harness tests, also following `swap c` moves: a candidate
    offered a swap proposes it, and a swap_call edit takes the first of PREFER on the menu."""

    PREFER = ("ExtraTreesClassifier", "RandomForestClassifier", "LogisticRegression")

    def __init__(self):
        self.rules = RuleBackend()

    def __getattr__(self, name):
        return getattr(self.rules, name)

    def generate(self, prompts, n=1, sampling=None, schema=None, adapter=None, purpose=""):
        out = self.rules.generate(prompts, n, sampling, schema, adapter, purpose)
        js = schema.model_json_schema()
        answer = None
        if purpose == "propose" and "swap " in json.dumps(js):
            answer = json.loads(out[0][0].text)
            items = schema.model_fields["candidates"].annotation.__args__
            for cand, item in zip(answer["candidates"], items):
                pattern = item.model_json_schema()["properties"]["hypothesis"]["pattern"]
                if m := re.search(r"swap ([\w\\.#]+)", pattern):
                    cand["hypothesis"] = f"swap {m.group(1).replace(chr(92), '')} for a stronger model"
        elif purpose == "executor" and (action := self.edit(js)) is not None:
            answer = {"action": action} if "action" in schema.model_fields else action
        if answer is not None:
            text = json.dumps(answer)
            out[0][0].text, out[0][0].parsed, out[0][0].error = text, schema.model_validate_json(text), None
        return out

    def edit(self, js: dict) -> dict | None:
        """The executor's action for an action schema (its JSON schema), or None to follow the rules."""
        spec = next(
            (d["properties"] for d in [js, *js.get("$defs", {}).values()] if "to" in d.get("properties", {})),
            None,
        )
        if spec is None:
            return None
        menu = spec["to"].get("enum") or [spec["to"]["const"]]
        return {
            "call": spec["call"]["const"],
            "op": "swap_call",
            "to": next((t for t in self.PREFER if t in menu), menu[0]),
        }


def tree(n: int, seed: int = 0) -> SearchState:
    """A synthetic SearchState of `n` nodes (70% valid, random parents, an insight each): what prompt rendering
    is measured and tested on (scripts/bench_harness.py uses the same one)."""
    from arts.search.state import Insight, Node, SearchState

    rng = random.Random(seed)
    s = SearchState(
        nodes={1: Node(id=1, status="seed", score=1.0, raw_score=1.0, files={"solution.py": "X = 1\n" * 50})}
    )
    for i in range(2, n + 1):
        ok = rng.random() < 0.7
        score = rng.random() * 3 if ok else None
        s.nodes[i] = Node(
            id=i,
            parent=rng.randint(1, i - 1),
            depth=1,
            hypothesis=f"variant {i} " * 8,
            axis=f"axis {i % 41}",
            status="valid" if ok else "invalid",
            score=score,
            raw_score=score,
            reason="" if ok else "exit status 1: ValueError",
            files={"solution.py": "X = 1\n" * 50},
        )
        s.insights[i] = Insight(id=i, text=f"insight {i} " * 6, node=i)
    return s


def minimise_state() -> SearchState:
    """The store of a minimise task's run (it keeps score = -raw): seed 2.65, a worse 4.96, a better 2.61 and
    a failure, with an audit and a memory line (the report's tests)."""
    from arts.search.state import Insight, Node, SearchState

    code = "DEGREE = 2\n"
    nodes = {
        1: Node(id=1, status="seed", score=-2.65, raw_score=2.65, files={"model.py": code}),
        2: Node(id=2, parent=1, round=1, status="valid", score=-4.96, raw_score=4.96, metrics={"rmse": 4.96},
                files={"model.py": "DEGREE = 3\n"}, hypothesis="increase DEGREE to fit curvature"),
        3: Node(id=3, parent=1, round=1, status="valid", score=-2.61, raw_score=2.61,
                files={"model.py": "DEGREE = 1\n"}, hypothesis="decrease DEGREE"),
        4: Node(id=4, parent=2, round=2, status="invalid", reason="evaluator: the candidate crashed",
                files={"model.py": "DEGREE = -1\n"}, hypothesis="decrease DEGREE a lot"),
    }  # fmt: skip
    insights = {
        1: Insight(id=1, kind="audit", text="metric: mammal"),
        2: Insight(id=2, kind="memory", node=2, text="raising DEGREE hurt"),
    }
    return SearchState(nodes=nodes, insights=insights, meta={"round": 2})


# ---- scripted backends --------------------------------------------------------------------------------


class ScriptedBackend:
    """Returns pre-written answers in order (validated against the call's schema), recording each call.
    Only for harness tests: it says nothing about what a model can do."""

    name = "scripted"
    model_id = "scripted"

    def __init__(self, answers: list[dict | str]):
        self.answers = list(answers)
        self.calls: list[dict] = []

    def generate(self, prompts, n=1, sampling=None, schema=None, adapter=None, purpose=""):
        self.calls.append({"prompts": prompts, "schema": schema, "sampling": sampling, "purpose": purpose})
        answer = self.answers.pop(0)
        if isinstance(answer, dict) and "action" in schema.model_fields:
            answer = {"action": answer}  # the schema wraps several branches in a root object
        text = answer if isinstance(answer, str) else json.dumps(answer)
        try:
            parsed, error = schema.model_validate_json(text), None
        except ValueError as e:
            parsed, error = None, str(e).splitlines()[0]
        return [[Completion(text=text, parsed=parsed, error=error, prompt_tokens=100, completion_tokens=20)]]

    def logprobs(self, prompt, completion, schema=None, adapter=None):
        raise NotImplementedError

    def count_tokens(self, text):
        return len(text.split())


class Scripted:
    """Answers each purpose with a fixed JSON text, validated against the call's schema as a real backend
    does (a text that does not validate becomes a typed failure). Harness tests only."""

    name = "scripted"
    model_id = "scripted"

    def __init__(self, answers: dict[str, object]):
        self.answers = answers
        self.calls: list[dict] = []

    def generate(self, prompts, n=1, sampling=None, schema=None, adapter=None, purpose=""):
        self.calls.append({"messages": prompts, "purpose": purpose, "schema": schema, "sampling": sampling})
        answer = self.answers[purpose]
        text = answer if isinstance(answer, str) else json.dumps(answer)
        try:
            return [[Completion(text=text, parsed=schema.model_validate_json(text))]]
        except ValueError as e:
            return [[Completion(text=text, error=str(e)[:200])]]

    def logprobs(self, prompt, completion, schema=None, adapter=None):
        raise NotImplementedError

    def count_tokens(self, text: str) -> int:
        return len(text) // 4


# ---- task folders, cases and programs -------------------------------------------------------------------

TASK_TOML = """name = "my-task"
statement = "statement.md"
kind = "optimize"
editable = ["solution.py"]
material = ["evaluate.py"]
hidden = ["grader/"]

[metric]
name = "score"
direction = "maximize"

[evaluate]
command = ["python", "evaluate.py"]

[test]
command = ["python", "grader/test.py"]
"""


def write_task(root: Path, toml: str = TASK_TOML) -> Path:
    """A task folder for `toml` (TASK_TOML: a good one), each file it names holding `x = 1`."""
    (root / "grader").mkdir(parents=True, exist_ok=True)
    (root / "task.toml").write_text(toml)
    for name in ("statement.md", "evaluate.py", "solution.py", "grader/test.py"):
        (root / name).write_text("x = 1\n")
    return root


LOGS = """ts service level message
10:00 api INFO request ok
10:01 db ERROR disk full on /var/lib/db
10:02 api ERROR timeout calling db
10:03 cache INFO hit ratio 0.93
"""
METRICS = "ts,service,latency_ms\n10:00,api,40\n10:01,api,900\n10:02,db,1200\n"
SECRET = "root_service=db fault=disk_full"
"""The material (LOGS, METRICS) and hidden truth (SECRET) of make_case's one incident."""


def make_case(tmp_path: Path, files: dict[str, str] | None = None) -> Task:
    """A one-incident answer task: logs and metrics as material, the truth hidden."""
    root = tmp_path / "case"
    material = {"incidents/i1/logs.txt": LOGS, "incidents/i1/metrics.csv": METRICS, **(files or {})}
    for rel, text in {**material, "grader/truth.txt": SECRET, "grader/test.py": "print(1)\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "statement.md").write_text("Find the root cause of incident i1.")
    (root / "task.toml").write_text(
        'name = "tiny-rca"\nstatement = "statement.md"\nkind = "answer"\neditable = ["answer.json"]\n'
        'material = ["incidents/"]\nhidden = ["grader/"]\n[test]\ncommand = ["python", "grader/test.py"]\n'
    )
    return load_task(root)


SAMPLE = '''"""A tiny packing program."""

import math

RADIUS = 0.1
COUNT: int = 5
NAME = "grid"
lower = 3


def place(n):
    """Place n circles on a line."""
    xs = []
    for i in range(n):
        xs.append(0.5 + i * 0.2)
    return xs


def score(xs):
    total = sum(RADIUS for _ in xs) * 1.5
    return total / max(len(xs), 1)


def one(): return 1
'''
FILES = {"solution.py": SAMPLE}
"""A small program with every kind of edit target (constants, functions, a one-line def), as files."""


def dual_cfg(tmp_path, **kw) -> SearchConfig:
    """The toy task's config for the investigation tests: group 2, 6 evaluations, free values (`kw`
    merges into it, a table into a table)."""
    from arts.search.config import SearchConfig

    # free values: the scripted executor's failing edits (X = 1e308) are on no value menu
    data = {
        "task": str(make_task(tmp_path / "task")),
        "group": 2,
        "budget": {"evals": 6},
        "executor": {"value_menu": False},
    }
    for key, value in kw.items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) else value
    return SearchConfig.model_validate(data)


# ---- runs, servers and training helpers -----------------------------------------------------------------

RUNNER = """
import sys
sys.path.insert(0, {root!r})
from pathlib import Path
from arts.policy.backends.transformers import TransformersBackend
from tests.doubles import RuleBackend
import arts.search.run as r
r.make_backend = lambda mc, sink, seed: (
    TransformersBackend({tiny!r}, usage_sink=sink, seed=seed) if mc.backend == "transformers" else RuleBackend(seed, delay={delay})
)
from arts.search.config import SearchConfig
cfg = SearchConfig(task={task!r}, group=4, budget={{"evals": 400, "rounds": {rounds}}},
                   executor_model={{"backend": "rules"}}, ttt={{"enabled": True, "grpo": {{"lr": 1e-2}}}},
                   scientist={{"audits": 0, "inspect": 0, "candidates": 2, "max_tokens": 640, "parents": 3}})
if {resume}:
    r.resume_run(Path({run!r}))
else:
    r.start_run(cfg, Path({run!r}))
"""


def runner(tmp_path: Path, tiny: Path, rounds: int, resume: bool, delay: float = 0.0) -> list[str]:
    """The argv of a TTT run on the toy task in `tmp_path`: the scientist is the model in `tiny`, the
    executor RuleBackend (slowed by `delay` seconds a call); `resume` continues the run folder."""
    code = RUNNER.format(
        root=str(ROOT), tiny=str(tiny), task=str(tmp_path / "task"), run=str(tmp_path / "run"),
        rounds=rounds, resume=resume, delay=delay,
    )  # fmt: skip
    return [sys.executable, "-c", code]


STATE = "## Task\nChoose X so that value() is close to 3.\n\n## Nodes you may start from\n- node 1: score -4"
"""A short search state to propose on."""


def sampled_proposal(backend, k: int = 3):
    """The scientist's proposal of `k` candidates on STATE, sampled at temperature 1 under the TTT adapter."""
    from arts.policy.scientist import Scientist, ScientistConfig
    from arts.training.ttt import ADAPTER

    backend_scientist = Scientist(backend, ScientistConfig(candidates=k, temperature=1.0, max_tokens=400))
    backend_scientist.adapter = ADAPTER
    return backend_scientist.propose(STATE, [1, 2], tail=False, seed=7)


def tiny_scientist(monkeypatch: Any, tiny_model_dir: Path) -> None:
    """`arts search` builds the tiny random model as its scientist and `RuleBackend` as its executor (the
    latter where the config names the `rules` backend)."""
    from arts.policy.backends.transformers import TransformersBackend

    def make(mc, sink, seed):
        if mc.backend == "rules":
            return RuleBackend(seed)
        return TransformersBackend(str(tiny_model_dir), usage_sink=sink, seed=seed)

    monkeypatch.setattr("arts.search.run.make_backend", make)


def rules_executor(monkeypatch: Any) -> dict[str, Any]:
    """`arts search` makes its backends as usual, except a model named `rules` (`--executor-model rules`),
    which becomes a `RuleBackend`; the returned dict holds the executor and the last other backend made
    (`scientist`)."""
    import arts.search.run

    made, real_make = {"executor": RuleBackend()}, arts.search.run.make_backend

    def make(mc, sink, seed):
        if mc.model == "rules":
            made["executor"].sink = sink
            return made["executor"]
        made["scientist"] = real_make(mc, sink, seed)
        return made["scientist"]

    monkeypatch.setattr("arts.search.run.make_backend", make)
    return made


def free_port() -> int:
    """A loopback port that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """`app` on a free loopback port in a uvicorn thread; yields its /v1 base URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(10)


def lora(r: int = 4):
    """A small LoRA config on the attention projections, initialised away from zero (it changes outputs)."""
    from peft import LoraConfig

    return LoraConfig(r=r, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)


SEEN: list[tuple[str, dict, int]] = []
"""What `Recorder` was sent (the tracker is loaded by name, `tests.doubles:Recorder`: this same module)."""


class Recorder:
    """A tracker that keeps what it was sent (`--report-to tests.doubles:Recorder`)."""

    def __init__(self, run_dir: Path, config: dict):
        SEEN.append(("init", {"task": config["task"]}, 0))

    def log(self, metrics: dict[str, float], step: int) -> None:
        SEEN.append(("log", metrics, step))

    def close(self) -> None:
        SEEN.append(("close", {}, 0))


def load_script(name: str):
    """The module of `scripts/<name>.py` (scripts are not a package), for tests of their functions."""
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
