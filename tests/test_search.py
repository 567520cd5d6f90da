"""Harness tests of the round loop with a rule-following backend (it tests the loop, not any model),
on a user task directory written from DESIGN.md's contract."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from policy.base import Completion, Usage
from search.config import SearchConfig
from search.run import build_search, resume_run, start_run
from search.store import Store

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
        self.sink = None

    def answer(self, schema, purpose: str) -> dict:
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
            cand = schema.model_fields["candidates"].annotation.__args__[0]
            parents = self._ids(cand.model_fields["parent"].annotation)
            k = schema.model_fields["candidates"].metadata[0].min_length
            cites = (
                self._ids(cand.model_fields["cites"].annotation.__args__[0])[-1:]
                if "cites" in cand.model_fields
                else None
            )
            pattern = cand.model_json_schema()["properties"]["hypothesis"]["pattern"]
            named = re.search(r"\(increase\|decrease\) \(([\w|]+)\)", pattern)
            target = named.group(1).split("|")[-1] if named else "X"  # the last constant offered
            cands = [
                {
                    "parent": self.rng.choice(parents),
                    "hypothesis": f"{('increase', 'decrease')[i % 2]} {target} towards three, step {i}",
                    "axis": "X value" if i % 2 else "x-values",  # one axis written two ways
                    "region": "constants",
                    "probability": 1.0 / (i + 1),
                }
                for i in range(k)
            ]
            return {"candidates": [c | ({"cites": cites} if cites is not None else {}) for c in cands]}
        if purpose in ANALYSIS:
            return ANALYSIS[purpose](self, schema)
        if purpose not in ("executor", ""):
            return fill(schema.model_json_schema())  # e.g. the investigator's steps and answers
        text = json.dumps(schema.model_json_schema())
        name = m.group(1) if (m := re.search(r"SetConstant_(\w+)", text)) else "X"  # the first menu offered
        menu = text.split(f'"const": "{name}"', 1)[-1].split('"enum": ', 1)
        if len(menu) > 1 and m is not None:  # the constant's value menu
            value = self.rng.choice(json.loads(menu[1][: menu[1].index("]") + 1]))
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
        if self.sink is not None:
            self.sink(
                Usage(backend="rules", model="rules", prompt_tokens=50, completion_tokens=10, purpose=purpose)
            )
        text = json.dumps(self.answer(schema, purpose))
        try:
            parsed, error = schema.model_validate_json(text), None
        except ValueError as e:  # e.g. X's value menu is used up: a typed failure, as from a model
            parsed, error = None, str(e).splitlines()[0]
        return [
            [
                Completion(text=text, parsed=parsed, error=error, prompt_tokens=50, completion_tokens=10)
                for _ in range(n)
            ]
        ]

    def logprobs(self, prompt, completion, schema=None, adapter=None):
        raise NotImplementedError

    def count_tokens(self, text: str) -> int:
        return len(text) // 4


def _min(schema, field: str) -> int:
    return next(m.min_length for m in schema.model_fields[field].metadata if hasattr(m, "min_length"))


def _compare(b: RuleBackend, schema) -> dict:
    verdict = schema.model_fields["verdicts"].annotation.__args__[0]
    ids = list(verdict.model_fields["hypothesis"].annotation.__args__)
    return {
        "flawed": [],
        "predictions": ["X above 3 scores lower"],
        "verdicts": [
            {"hypothesis": i, "verdict": "support", "observation": "X near 3 scores higher"} for i in ids
        ],
    }


ANALYSIS = {
    "plan": lambda b, schema: {
        "situation": "one constant X",
        "deliverable": "solution.py",
        "requirements": [],
    },
    "causes": lambda b, schema: {
        "causes": [
            {
                "cause": "X overflowed",
                "evidence": "exit 1",
                "category": b.cause[0],
                "severity": b.cause[1],
                "fix": "use a finite X",
            }
        ]
        * _min(schema, "causes")
    },
    "critic": lambda b, schema: {
        "scores": [
            {"index": i, "score": 0.9 - 0.1 * i, "category": b.cause[0]}
            for i in range(_min(schema, "scores"))
        ]
    },
    "judge": lambda b, schema: {
        "reason": "it ran as intended",
        "valid_measurement": b.judge[0],
        "confidence": b.judge[1],
    },
    "compare": _compare,
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
    run_dir.mkdir(parents=True, exist_ok=True)
    with Store.open(run_dir) as store:
        return build_search(cfg, store, log=lambda line: None).run()


def test_arts_search_end_to_end_on_a_user_task(tmp_path, rules):
    task = make_task(tmp_path / "task")
    cfg = SearchConfig(task=str(task), group=2, budget={"evals": 6})
    summary = run_with_rules(cfg, tmp_path / "run")
    backend = rules
    assert summary["stopped_because"].startswith("evaluation budget spent")
    assert summary["baseline"] == pytest.approx(-4.0)
    assert summary["valid_nodes"] >= 1 and summary["best"]["score"] > -4.0
    assert backend.purposes[:2] == ["audit", "audit"] and "propose" in backend.purposes
    with Store.open(tmp_path / "run", create=False) as store:
        state = store.load_state()
    assert len([i for i in state.insights.values() if i.kind == "audit"]) == 6
    assert any(i.kind == "memory" for i in state.insights.values())
    dropped = [e.payload["insight"] for e in state.events.values() if e.kind == "memory_drop"]
    assert dropped and all(not state.insights[i].active for i in dropped)  # the scientist edits its memory
    r = next(iter(state.rollouts.values()))
    assert abs(sum(c["probability"] for c in r.candidates) - 1.0) < 1e-9 and r.action.startswith('{"parent"')
    assert all(n.transcript for n in state.nodes.values() if n.parent is not None)
    ran = [n.files["solution.py"] for n in state.nodes.values() if n.status in ("seed", "valid")]
    assert len(ran) == len(set(ran))  # a program already evaluated is never evaluated again
    with Store.open(tmp_path / "run", create=False) as store:
        known = build_search(cfg, store, log=lambda line: None).known_programs()
    assert known(state.nodes[1].files) == "node 1: score -4" and known({"solution.py": "X = 0"}) is None
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["task"] == "toy-quadratic"
    assert (tmp_path / "run" / "best" / "solution.py").is_file()


@pytest.mark.parametrize("method", ["greedy", "random", "mutate"])
def test_baseline_methods_run_in_the_same_loop(tmp_path, rules, method):
    cfg = SearchConfig(task=str(make_task(tmp_path / "task")), method=method, group=2, budget={"evals": 4})
    summary = run_with_rules(cfg, tmp_path / "run")
    assert summary["method"] == method and summary["nodes"] >= 2


def test_mutate_stops_at_once_on_a_program_with_nothing_to_mutate(tmp_path):
    task = make_task(tmp_path / "task")
    (task / "solution.py").write_text("def value():\n    return float('3')\n")
    cfg = SearchConfig(task=str(task), method="mutate", budget={"evals": 5})
    summary = start_run(cfg, tmp_path / "run", log=lambda line: None)
    assert summary["nodes"] == 0 and summary["stopped_because"].startswith("mutate: no numeric constant")


def test_config_is_written_and_a_finished_run_refuses_a_restart(tmp_path, rules):
    cfg = SearchConfig(task=str(make_task(tmp_path / "task")), method="mutate", budget={"evals": 2})
    start_run(cfg, tmp_path / "run", log=lambda line: None)
    assert 'method = "mutate"' in (tmp_path / "run" / "config.toml").read_text()
    with pytest.raises(ValueError, match="--resume"):
        start_run(cfg, tmp_path / "run", log=lambda line: None)


def test_resume_after_sigkill_keeps_finished_nodes(tmp_path, monkeypatch):
    task = make_task(tmp_path / "task")
    run_dir = tmp_path / "run"
    code = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).parent.parent)!r})\n"
        "from tests.test_search import RuleBackend\n"
        "import search.run as r\n"
        "r.make_backend = lambda mc, sink, seed: RuleBackend(seed, delay=0.3)\n"
        "from search.config import SearchConfig\n"
        f"r.start_run(SearchConfig(task={str(task)!r}, group=2, budget={{'evals': 50}}), __import__('pathlib').Path({str(run_dir)!r}))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if sum(ln.startswith("round") for ln in lines) >= 3:
            break
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    with Store.open(run_dir, create=False) as store:
        before = {
            n.id: n for n in store.load_state().nodes.values() if n.status in ("valid", "invalid", "seed")
        }
    assert len(before) >= 3
    cfg_text = (run_dir / "config.toml").read_text().replace("evals = 50", "evals = 8")
    (run_dir / "config.toml").write_text(cfg_text)
    monkeypatch.setattr("search.run.make_backend", lambda mc, sink, seed: RuleBackend(seed))
    summary = resume_run(run_dir, log=lambda line: None)
    with Store.open(run_dir, create=False) as store:
        after = store.load_state().nodes
    for nid, node in before.items():
        assert after[nid].files == node.files and after[nid].score == node.score
    assert not any(n.status == "pending" for n in after.values())
    assert summary["evals"] >= 8


def test_report_is_written_with_the_curve_and_every_node(tmp_path, rules):
    cfg = SearchConfig(task=str(make_task(tmp_path / "task")), method="mutate", group=2, budget={"evals": 3})
    summary = start_run(cfg, tmp_path / "run", log=lambda line: None)
    page = (tmp_path / "run" / "report.html").read_text()
    assert "<svg" in page and "best-so-far" in page
    assert page.count("<tr><td>") == summary["nodes"] + 1


def test_dollar_budget_stops_the_run(tmp_path, rules):
    cfg = SearchConfig(
        task=str(make_task(tmp_path / "task")),
        group=2,
        budget={"evals": 50, "dollars": 0.001},
        scientist_model={"pricing": {"input_per_m": 10.0, "output_per_m": 30.0}},
    )
    summary = run_with_rules(cfg, tmp_path / "run")
    assert summary["stopped_because"].startswith("dollar budget spent") and summary["dollars"] >= 0.001


def test_greedy_debugs_a_failed_leaf_before_improving_the_best(tmp_path, rules):
    rules.bad_edits = 2
    cfg = SearchConfig(
        task=str(make_task(tmp_path / "task")),
        method="greedy",
        drafts=1,
        group=3,
        budget={"evals": 3},
        executor={"max_actions": 1, "value_menu": False},  # X = 1e308 is on no value menu
    )
    run_with_rules(cfg, tmp_path / "run")
    with Store.open(tmp_path / "run", create=False) as store:
        nodes = store.load_state().nodes
    debug = [n for n in nodes.values() if n.hypothesis.startswith("Fix the failure")]
    assert len(debug) == 2 and all(nodes[n.parent].status == "invalid" for n in debug)
    assert debug[-1].status == "valid"


def test_a_target_that_did_not_raise_the_best_cools_for_a_round(tmp_path, rules):
    task = make_task(tmp_path / "task")
    (task / "solution.py").write_text("X = 1.0\nY = 2.0  # unused\n\n\ndef value():\n    return X\n")
    cfg = SearchConfig(task=str(task), group=2, budget={"evals": 4}, scientist={"audits": 0, "inspect": 0})
    run_with_rules(cfg, tmp_path / "run")
    with Store.open(tmp_path / "run", create=False) as store:
        state = store.load_state()
    nodes = sorted((n for n in state.nodes.values() if n.parent is not None), key=lambda n: n.id)
    assert [(n.round, n.hypothesis.split()[1]) for n in nodes] == [
        (1, "Y"),
        (1, "Y"),
        (2, "X"),
        (2, "X"),
    ]  # Y moved nothing: round 2 may not name it
