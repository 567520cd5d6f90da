"""The compass's step level per parent (`search.compass`): coarse moves that all failed make the next
ones finer, a move that beat the parent keeps the level, and `arts search` passes it to the executor."""

from __future__ import annotations

import json
import sqlite3

from arts.search import compass
from arts.search.state import Node, SearchState
from tests.doubles import RuleBackend, make_task

SEED = "A = 0.8\nB = 2.0\nC = 10\n"


def _state(
    moves: list[tuple[str, float, float | None]], parent_score: float = -1.0
) -> tuple[SearchState, Node]:
    """A parent and one child per (constant, value, score or None for a failed program)."""
    state = SearchState()
    parent = Node(
        id=1,
        parent=None,
        files={"solution.py": SEED},
        status="seed",
        score=parent_score,
        raw_score=parent_score,
    )
    state.nodes[1] = parent
    for i, (name, value, score) in enumerate(moves, start=2):
        t = {
            "action": {"op": "set_constant", "name": name, "value": value},
            "valid": score is not None,
            "score": score,
        }
        state.nodes[i] = Node(
            id=i,
            parent=1,
            files={},
            transcript=[t],
            status="valid" if score is not None else "invalid",
            score=score,
            raw_score=score,
        )
    return state, parent


def same(x):
    return x


def test_three_failed_coarse_moves_make_the_next_finer():
    state, parent = _state([("A", 1.6, -2.0), ("B", 1.0, None), ("C", 20, -1.5)])
    assert compass.level(state, parent, same) == 1


def test_fewer_failures_or_a_win_keep_the_level():
    state, parent = _state([("A", 1.6, -2.0), ("B", 1.0, -3.0)])
    assert compass.level(state, parent, same) == 0
    state, parent = _state([("A", 1.6, -2.0), ("B", 1.0, -3.0), ("C", 20, -1.5), ("A", 0.4, -0.5)])
    assert compass.level(state, parent, same) == 0  # x0.5 beat the parent: coarse steps still pay


def test_failed_fine_moves_go_finer_still_but_never_to_the_extreme_steps():
    coarse = [("A", 1.6, -2.0), ("B", 1.0, -3.0), ("C", 20, -1.5)]
    middle = [("A", 1.0, -2.0), ("B", 1.6, -3.0), ("C", 8, -1.5)]  # x1.25, x0.8, x0.8
    fine = [("A", 0.88, -2.0), ("B", 1.8, -3.0), ("C", 11, -1.5)]  # x1.1, x0.9, x1.1
    assert compass.level(*_state(coarse + middle), same) == 2
    assert compass.level(*_state(coarse + middle + fine), same) == 2


def test_a_probe_counts_as_a_move_of_its_size():
    """A probe node carries its one edit without a per-edit result: the node's own is used."""
    state, parent = _state([("A", 1.6, -2.0), ("B", 1.0, -3.0)])
    probe = Node(
        id=9,
        parent=1,
        files={},
        transcript=[{"action": {"op": "set_constant", "name": "C", "value": 5}, "applied": True}],
        status="valid",
        score=-4.0,
        raw_score=-4.0,
        axis="probe",
    )
    state.nodes[9] = probe
    assert compass.level(state, parent, same) == 1


def test_arts_search_gives_the_executor_the_parents_level(tmp_path, monkeypatch):
    """Through `arts search`: each experiment's executor gets the level of its own parent."""
    from arts.policy.executor import Executor
    from arts.search.cli.main import main
    from arts.search.store import Store

    backend = RuleBackend()
    monkeypatch.setattr("arts.search.run.make_backend", lambda mc, sink, seed: backend)
    asked: list[int] = []
    monkeypatch.setattr(
        compass, "level", lambda state, parent, normalise: asked.append(parent.id) or parent.id
    )
    given: list[int] = []
    run = Executor.run

    def spy(self, *args, **kwargs):
        given.append(kwargs["level"])
        return run(self, *args, **kwargs)

    monkeypatch.setattr(Executor, "run", spy)
    argv = ["search", str(make_task(tmp_path / "task")), "--run-dir", str(tmp_path / "run"), "--group", "2"]
    assert main([*argv, "--budget.evals", "4", "--workers", "1"]) == 0
    with Store.open_readonly(tmp_path / "run") as store:
        nodes = store.load_state().nodes.values()
    parents = [n.parent for n in sorted(nodes, key=lambda n: n.id) if n.parent is not None]
    assert given and given == parents and set(parents) <= set(asked)  # each its own parent's level


def test_a_failed_step_is_held_back_until_the_other_way_has_run():
    """`held`: a direction that failed from the best node waits for the opposite one, at any step size;
    once both ran, neither."""
    state, _ = _state([("A", 1.6, -2.0)])  # increase A (x2) failed
    assert compass.held(state, same) == {"increase A"}
    state, _ = _state([("A", 1.6, -2.0), ("A", 0.4, -3.0)])  # and decrease A failed too
    assert compass.held(state, same) == set()
    state, _ = _state([("A", 1.6, -0.5)])  # beat the parent: the child is the best node, nothing ran from it
    assert compass.held(state, same) == set()
    state, parent = _state([("A", 1.6, -2.0), ("B", 4.0, -2.0), ("C", 20, -2.0)])  # coarse, all failed
    assert compass.level(state, parent, same) == 1  # the next steps are finer, and still not that way
    assert compass.held(state, same) == {"increase A", "increase B", "increase C"}


def _offered(
    tmp_path,
    monkeypatch,
    name: str,
    *extra: str,
    solution: str = "X = 5.0\n\n\ndef value():\n    return float(X)\n",
) -> tuple[list[dict], list[list[str]], list[list]]:
    """Through `arts search` on the toy task with X = 5 (the target is 3: `increase X` hurts): the moves
    each proposal offered, each round's candidates as the scientist wrote them (the draw events), and
    what the poll held back (its events)."""
    from arts.policy.scientist import Scientist
    from arts.search.cli.main import main

    task = make_task(tmp_path / f"task-{name}")
    (task / "solution.py").write_text(solution)  # X alone by default
    toml = (task / "task.toml").read_text()
    (task / "task.toml").write_text(
        toml.replace('direction = "maximize"\n', 'direction = "maximize"\ndeterministic = true\n')
    )
    monkeypatch.setattr("arts.search.run.make_backend", lambda mc, sink, seed: RuleBackend())
    offered: list[dict] = []
    propose = Scientist.propose_lists

    def spy(self, *args, **kwargs):
        offered.append(dict(kwargs.get("targets") or {}))
        return propose(self, *args, **kwargs)

    monkeypatch.setattr(Scientist, "propose_lists", spy)
    run = tmp_path / f"run-{name}"
    argv = ["search", str(task), "--run-dir", str(run), "--group", "2", "--budget.evals", "5"]
    assert main([*argv, "--workers", "1", *extra]) == 0
    with sqlite3.connect(run / "arts.db") as db:
        events = [json.loads(d) for (d,) in db.execute("select data from events")]
    draws = [e["payload"] for e in events if e["kind"] == "draw"]
    held = [e["payload"]["held"] for e in events if e["kind"] == "poll"]
    return offered, [[c["hypothesis"] for c in d["candidates"]] for d in draws], held


def test_arts_search_offers_the_other_way_after_a_failed_step(tmp_path, monkeypatch):
    """Through `arts search`: once `increase X` fails, the next proposal offers X only `decrease` and its
    lists write `decrease X`; with `scientist.poll` off they write `increase X` again."""
    offered, lists, held = _offered(tmp_path, monkeypatch, "poll")
    assert held and held[0] == ["increase X"]  # recorded: the run says what its menus left out
    assert offered[0]["X"] == ("increase", "decrease")
    assert offered[1]["X"] == ("decrease",)
    assert any(h.startswith("increase X") for h in lists[0])
    assert any(h.startswith("decrease X") for h in lists[1])
    assert not any(h.startswith("increase X") for h in lists[1])
    offered, lists, held = _offered(tmp_path, monkeypatch, "free", "--set", "scientist.poll=false")
    assert not held
    assert offered[1]["X"] == ("increase", "decrease")
    assert any(h.startswith("increase X") for h in lists[1])


def test_arts_search_leaves_a_knob_that_changed_nothing(tmp_path, monkeypatch):
    """Through `arts search` on an exact evaluator, the poll off: N changes no score, so each step of it is
    pivoted from, one way and then the other, and the last proposal no longer offers N at all."""
    solution = "X = 5.0\nN = 10\n\n\ndef value():\n    return float(X)\n"
    offered, lists, _ = _offered(
        tmp_path,
        monkeypatch,
        "inert",
        "--set",
        "scientist.poll=false",
        "--budget.evals",
        "10",
        solution=solution,
    )
    assert {"increase", "decrease"} <= set(offered[0]["N"])
    assert any(h.split()[1:2] == ["N"] for ls in lists for h in ls)  # N was written and run
    assert "N" not in offered[-1] and offered[-1]  # the inert knob left the menus; X is still offered
