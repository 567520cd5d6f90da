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

from arts.policy.base import Completion, Usage
from arts.policy.edits.moves import directed_target, spread
from arts.search.config import SearchConfig
from arts.search.loop import run_search
from arts.search.methods.targets import by_promise
from arts.search.run import build_run, resume_run, start_run
from arts.search.state import Node
from arts.search.store import Store

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


MOVE = re.compile(r"\(?((?:increase|decrease|rewrite|tune)(?:\|increase|\|decrease|\|probe)*)\)? (\w+)")
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
        self.prompts: list[str] = []
        """The user message of every proposal call."""
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
                verb = verbs.split("|")[i % len(verbs.split("|"))]  # the first move this candidate is offered
                props = item.model_json_schema()["properties"]
                cands.append(
                    {
                        "parent": self.rng.choice(parents),
                        "hypothesis": f"{verb} {target} towards three, step {i}",
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
        if purpose == "propose":
            self.prompts.append(prompts[-1]["content"])
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


CRITICALITY = {"minor": 0.3, "major": 0.6, "fatal": 0.9}
"""The scripted critic's criticality for each severity the scripted causes carry: the gated route is the
route of the table on those labels (minor: local, major: structural, fatal: pivot)."""

ANALYSIS = {
    "plan": lambda b, schema: (
        {
            "situation": "one constant X",
            "deliverable": "solution.py",
            "requirements": [],
        }
        | ({"axes": ["x value", "precision"]} if "axes" in schema.model_fields else {})
    ),
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
            {
                "index": i,
                "score": 0.9 - 0.1 * i,
                "category": b.cause[0],
                "criticality": CRITICALITY[b.cause[1]],
            }
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
        return run_search(*build_run(cfg, store, log=lambda line: None))


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
        known = build_run(cfg, store, log=lambda line: None)[0].lab.known_programs()
    assert known(state.nodes[1].files) == "node 1: score -4" and known({"solution.py": "X = 0"}) is None
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["task"] == "toy-quadratic"
    assert (tmp_path / "run" / "best" / "solution.py").is_file()


def test_a_program_that_failed_in_any_attempt_is_not_evaluated_again_even_after_a_resume(tmp_path, rules):
    """A node keeps only its last attempt's files; an earlier attempt that failed is still refused, by the
    node that ran it, without spending an evaluation, also in a run resumed from its store."""
    task = make_task(tmp_path / "task")
    cfg = SearchConfig(task=str(task), budget={"evals": 5})
    failing = {"solution.py": "X = 2.0\n\n\ndef value():\n    raise ValueError(X)\n"}
    (tmp_path / "run").mkdir()
    with Store.open(tmp_path / "run") as store:
        lab = build_run(cfg, store, log=lambda line: None)[0].lab
        assert not lab.evaluate(failing, tmp_path / "7").valid and lab.meter.evals == 1
        assert lab.known_programs()(failing) == "node 7: it failed"
        again = lab.evaluate(failing, tmp_path / "9")
        assert again.reason == "already evaluated (node 7: it failed); not run again" and lab.meter.evals == 1
    with Store.open(tmp_path / "run", create=False) as store:
        lab = build_run(cfg, store, log=lambda line: None)[0].lab
        assert lab.known_programs()(failing) == "node 7: it failed"
        assert lab.known_programs()({"solution.py": "X = 3.0\n\n\ndef value():\n    return X\n"}) is None


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
    monkeypatch.setattr("arts.search.run.make_backend", lambda mc, sink, seed: RuleBackend(seed))
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
    assert "<svg" in page and "best so far" in page
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
        baselines={"drafts": 1},
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


def test_targets_that_raised_the_best_lead_then_untested_ones_then_the_least_recently_tested():
    moves = {name: ("increase", "decrease") for name in ("A", "B", "C", "D", "E")}
    nodes = [
        Node(id=1, parent=None, round=0, score=1.0, hypothesis=""),
        Node(id=2, parent=1, round=1, score=2.0, hypothesis="increase C"),  # raised the best
        Node(id=3, parent=1, round=1, score=0.5, hypothesis="decrease A"),
        Node(id=4, parent=2, round=2, score=1.5, hypothesis="increase E by half"),
        Node(id=5, parent=2, round=3, score=None, hypothesis="decrease A"),
    ]
    assert list(by_promise(moves, nodes)) == ["C", "B", "D", "E", "A"]
    nodes.append(Node(id=6, parent=2, round=4, score=1.9, hypothesis="increase C"))  # no longer raises
    assert list(by_promise(moves, nodes)) == ["B", "D", "E", "A", "C"]


def test_targets_whose_tests_never_moved_the_score_go_last():
    """An inert knob (every valid test scored exactly as its parent) waits behind a tested knob that did
    something, even a more recently tested one; a failed test counts as doing something."""
    moves = {name: ("increase", "decrease") for name in ("A", "B", "C")}
    nodes = [
        Node(id=1, parent=None, round=0, score=1.0, hypothesis=""),
        Node(id=2, parent=1, round=1, score=1.0, hypothesis="increase A"),  # inert
        Node(id=3, parent=1, round=2, score=0.9, hypothesis="decrease B"),  # moved (down)
        Node(id=4, parent=1, round=2, score=None, hypothesis="decrease C"),  # failed
    ]
    assert list(by_promise(moves, nodes)) == ["B", "C", "A"]
    nodes.append(Node(id=5, parent=1, round=3, score=0.95, hypothesis="increase A"))  # A moves after all
    assert list(by_promise(moves, nodes)) == ["B", "C", "A"]  # now by recency: A was tested last
    assert list(by_promise(moves, nodes[:2] + nodes[3:4])) == ["B", "C", "A"]  # untested B, failed C, inert A


def test_each_candidate_gets_its_own_share_of_the_targets():
    moves = {n: ("increase",) for n in "ABCDEFG"}
    assert [list(m) for m in spread(moves, 3)] == [["A", "D", "G"], ["B", "E"], ["C", "F"]]
    assert [list(m) for m in spread({"A": ("rewrite",), "B": ("decrease",)}, 3)] == [["A"], ["B"], ["A"]]


def test_the_first_leading_swap_is_a_share_of_its_own():
    moves = {"Tree": ("swap",), "a": ("increase",), "b": ("decrease",), "c": ("increase",), "Sum": ("swap",)}
    assert [list(m) for m in spread(moves, 3)] == [["Tree"], ["a", "c"], ["b", "Sum"]]
    two = {"Scaler": ("swap",), "Knn": ("swap",), "k": ("increase",), "w": ("tune",), "p": ("increase",)}
    assert [list(m) for m in spread(two, 3)] == [
        ["Scaler"],
        ["Knn", "w"],
        ["k", "p"],
    ]  # the second is not alone
    assert [list(m) for m in spread({"Tree": ("swap",), "a": ("increase",)}, 3)] == [
        ["Tree"],
        ["a"],
        ["Tree"],
    ]


def test_on_the_breast_cancer_seed_one_candidate_can_only_swap_the_tree():
    """The real targets of the built-in seed: the tree's numeric keywords move like constants, and the
    swap, which leads them, gets a candidate whose grammar admits nothing else."""
    from arts.policy.scientist import directed_pattern
    from arts.search.methods.targets import targets
    from arts.search.state import SearchState
    from arts.tasks.base import BUILTIN_DIR

    files = {"model.py": (BUILTIN_DIR / "breast-cancer-tree" / "model.py").read_text()}
    state = SearchState(nodes={1: Node(id=1, files=files, status="seed", score=0.91)})
    moves = targets(state, lambda files: None)
    assert list(moves)[0] == "DecisionTreeClassifier" and "increase" in moves["min_samples_leaf"]
    first, *rest = spread(moves, 5)
    assert first == {"DecisionTreeClassifier": ("swap",)}
    assert re.fullmatch(directed_pattern(first), "swap DecisionTreeClassifier for a forest")
    assert not re.fullmatch(directed_pattern(first), "increase min_samples_leaf")
    assert all("DecisionTreeClassifier" not in share for share in rest)
    assert {n for share in spread(moves, 5) for n in share} == set(moves)  # every target is still offered


def test_a_directed_run_spreads_a_round_over_the_targets_and_starts_from_the_best_node(tmp_path, rules):
    task = make_task(tmp_path / "task")
    (task / "solution.py").write_text("X = 1.0\nY = 2.0  # unused\n\n\ndef value():\n    return X\n")
    cfg = SearchConfig(task=str(task), group=2, budget={"evals": 6}, scientist={"audits": 0, "inspect": 0})
    run_with_rules(cfg, tmp_path / "run")
    with Store.open(tmp_path / "run", create=False) as store:
        state = store.load_state()
    draws = [e.payload for e in state.events.values() if e.kind == "draw"]
    assert len(draws) >= 2
    for d in draws:  # X, Y and value each lead a candidate
        named = {directed_target(c["hypothesis"])[1] for c in d["candidates"]}
        assert named == {"X", "Y", "value"}
    nodes = [n for n in state.nodes.values() if n.parent is not None]
    for n in (n for n in nodes if n.rollout is not None):  # a proposal's node, not a follow-up's
        # the best node when the round proposed: its earlier rounds, and the follow-ups run before it
        before = [m for m in state.nodes.values() if m.id < n.id and not (m.round == n.round and m.rollout)]
        earlier = [m for m in before if m.score is not None]
        assert n.parent == max(earlier, key=lambda m: (m.score, -m.id)).id  # the best node


def test_a_run_whose_menus_are_all_used_up_stops_instead_of_proposing_refused_moves(tmp_path, rules):
    task = make_task(tmp_path / "task")
    (task / "solution.py").write_text("X = 2\nvalue = lambda: X  # noqa: E731\n")  # one constant, no function
    cfg = SearchConfig(task=str(task), group=2, budget={"evals": 40}, scientist={"audits": 0, "inspect": 0})
    summary = run_with_rules(cfg, tmp_path / "run")
    assert summary["stopped_because"].startswith("every value on the menus")
    with Store.open(tmp_path / "run", create=False) as store:
        state = store.load_state()
    assert state.best().metrics["x"] == 3 and summary["evals"] < 40


def test_an_optimize_run_ends_after_rounds_that_spend_no_evaluation(tmp_path, rules, monkeypatch):
    from arts.policy.executor import Executor, ExecutorResult

    def refuse(self, hypothesis, files, editable, validate, **kwargs):
        return ExecutorResult(files=dict(files), reason="no valid result after 6 actions; already run")

    monkeypatch.setattr(Executor, "run", refuse)
    task = make_task(tmp_path / "task")
    cfg = SearchConfig(task=str(task), group=2, budget={"evals": 6, "rounds": 50}, scientist={"audits": 0})
    summary = run_with_rules(cfg, tmp_path / "run")
    assert summary["stopped_because"].startswith("3 rounds in a row spent no evaluation")
