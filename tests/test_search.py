"""Harness tests of the round loop with a rule-following backend (it tests the loop, not any model),
on a user task directory written from the task contract (docs/tasks.md)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from arts.policy.edits.moves import directed_target, spread
from arts.search.config import SearchConfig
from arts.search.methods.targets import by_promise
from arts.search.run import build_run, resume_run, start_run
from arts.search.state import Node
from arts.search.store import Store
from tests.doubles import RuleBackend, make_task, run_with_rules


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
        "from tests.doubles import RuleBackend\n"
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
    from arts.policy.proposal_schema import directed_pattern
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
