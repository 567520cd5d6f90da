"""The learning probes: the move class each declares keeps paying, its decoys never do, the small profile
offers the paying move, and a bench and a TTT run find them without being told.

Scores come from `arts eval --files` (the sandboxed evaluator); edits from the edit engine's value menus,
as the executor makes them.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from arts.policy.edits.actions import SetConstant
from arts.policy.edits.apply import apply_edit, constant_menus
from arts.policy.proposal_schema import directed_pattern
from arts.search.cli.main import main
from arts.search.methods.targets import targets
from arts.search.state import Node, SearchState
from arts.tasks.base import TaskConfig, TaskError, resolve_task
from arts.tasks.probe import in_class

PROBES = {
    "probe-quadrature": "increase STEPS",
    "probe-kepler": "decrease TOL",
    "probe-jacobi": "decrease TOL",
    "probe-ridge": "decrease",  # a verb on any target: each penalty's halving pays
}
PAYING_STEPS = 6
"""Doublings (or halvings) in a row that must each raise the score."""


def evaluate(files: dict[str, str], task: str, tmp: Path, capsys: pytest.CaptureFixture[str]) -> float:
    """The score `arts eval TASK --files` gives the program, higher always better."""
    folder = Path(tmp) / f"program-{len(list(Path(tmp).iterdir()))}"
    folder.mkdir()
    for rel, text in files.items():
        (folder / rel).write_text(text)
    capsys.readouterr()
    code = main(["eval", task, "--files", str(folder), "--json"])
    score = json.loads(capsys.readouterr().out)["score"]
    assert code == (0 if score is not None else 1)
    return -math.inf if score is None else resolve_task(task).normalise(score)  # invalid: the worst


def step(files: dict[str, str], name: str, side: int) -> dict[str, str]:
    """The program with constant `name` moved one coarse step (x2 or x0.5: its menu's first entry) to `side`."""
    value = constant_menus(files, sides={name: side})[name][0]
    return apply_edit(files, SetConstant(name=name, value=value))


def test_the_probes_are_builtin_and_declare_what_pays(capsys):
    assert main(["tasks", "list"]) == 0
    listed = capsys.readouterr().out
    for name, paying in PROBES.items():
        probe = resolve_task(name).config.probe
        assert name in listed and probe is not None and probe.paying == paying
        assert paying.split()[-1] not in resolve_task(name).statement  # the scientist is not told
        assert main(["tasks", "show", name]) == 0
        assert f"probe:    {paying} pays" in capsys.readouterr().out


def paying_targets(task) -> list[str]:
    """The targets the task's paying class moves: its one target, or (a verb alone) every constant of the
    seed program's menus but the decoys."""
    words = task.config.probe.paying.split()
    if len(words) == 2:
        return [words[1]]
    return [n for n in constant_menus(task.seed_files()) if n not in task.config.probe.decoys]


@pytest.mark.parametrize("name", sorted(PROBES))
def test_the_paying_class_pays_again_and_again_and_the_decoys_never(name, tmp_path, capsys):
    """PAYING_STEPS steps of the class in a row each raise the score: on its one target, or for a verb
    alone, on each of its targets in turn (then round again); the other way hurts on every target."""
    task = resolve_task(name)
    side = 1 if task.config.probe.paying.startswith("increase") else -1
    targets_ = paying_targets(task)
    files = task.seed_files()
    scores = [evaluate(files, name, tmp_path, capsys)]
    assert scores[0] == pytest.approx(task.normalise(task.config.metric.baseline))
    for i in range(max(PAYING_STEPS, len(targets_))):
        files = step(files, targets_[i % len(targets_)], side)
        scores.append(evaluate(files, name, tmp_path, capsys))
    assert all(b > a for a, b in zip(scores, scores[1:])), scores
    seed = task.seed_files()
    for decoy in task.config.probe.decoys:
        for way in constant_menus(seed, sides={decoy: 1}), constant_menus(seed, sides={decoy: -1}):
            if way[decoy]:  # REPEAT = 1 has no step down
                moved = apply_edit(seed, SetConstant(name=decoy, value=way[decoy][0]))
                assert evaluate(moved, name, tmp_path, capsys) <= scores[0], (decoy, way[decoy][0])
    for target in targets_:
        assert evaluate(step(seed, target, -side), name, tmp_path, capsys) < scores[0]  # the other way hurts


@pytest.mark.parametrize("name", sorted(PROBES))
def test_the_small_profile_offers_the_paying_move_from_the_seed(name):
    task = resolve_task(name)
    verb = task.config.probe.paying.split()[0]
    state = SearchState(nodes={1: Node(id=1, files=task.seed_files(), status="seed", score=0.0)})
    moves = targets(state, lambda files: None)
    assert set(task.config.probe.decoys) <= set(moves)
    for target in paying_targets(task):
        assert verb in moves[target]
        assert re.fullmatch(directed_pattern(moves), f"{verb} {target} by one step")
    if len(paying_targets(task)) == 1:
        assert list(moves)[0] != paying_targets(task)[0]  # not first: a searcher has to find it


def test_a_probe_names_a_verb_and_a_target():
    base = {
        "name": "t",
        "statement": "s.md",
        "kind": "answer",
        "editable": ["a.json"],
        "test": {"command": ["x"]},
    }
    assert TaskConfig(**base, probe={"paying": "tune k"}).probe.paying == "tune k"
    with pytest.raises(ValueError, match="e.g. 'increase STEPS'"):
        TaskConfig(**base, probe={"paying": "more STEPS"})
    with pytest.raises(TaskError):
        resolve_task("probes")  # a suite of the bench, not a task


def test_a_verb_alone_on_a_decoy_is_not_of_the_class():
    """What the watch and the class counts count: `decrease` on any target but the decoys."""
    decoys = resolve_task("probe-ridge").config.probe.decoys
    assert in_class("decrease PENALTY_AGE by half", "decrease", decoys)
    assert not in_class("decrease PIVOT_EPS by half", "decrease", decoys)
    assert not in_class("increase PENALTY_AGE", "decrease", decoys)
    assert in_class("decrease TOL#2", "decrease TOL", ["TOL"])  # a named target is the class, decoy or not


def test_bench_runs_the_probe_suite(tmp_path, capsys, monkeypatch):
    out = tmp_path / "bench"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "probes").mkdir()  # a folder named like the suite (of earlier runs) does not shadow it
    assert main(["bench", "--tasks", "probes", "--methods", "arts,arts-ttt", "--seeds", "2", "--out", str(out),
                 "--report"]) == 0  # fmt: skip
    summary = (out / "summary.md").read_text()
    assert "tasks probe-jacobi, probe-kepler, probe-quadrature, probe-ridge; methods arts, arts-ttt" in summary


def test_a_ttt_run_on_a_probe_watches_its_paying_class(monkeypatch, tmp_path):
    import arts.search.learning
    import arts.training.ttt
    from arts.search.config import SearchConfig
    from arts.search.run import start_learning

    watched = []

    class Learning:
        def __init__(self, *args, watch=None, **kwargs):
            watched.append(watch)

        def start(self):
            pass

    monkeypatch.setattr(arts.search.learning, "Learning", Learning)
    monkeypatch.setattr(arts.training.ttt, "Trainer", lambda *a, **k: None)
    for name, set_watch in [
        ("probe-kepler", None),
        ("probe-quadrature", "increase NODE"),
        ("circle-packing-26", None),
    ]:
        cfg = SearchConfig(task=name, ttt={"enabled": True, "watch": set_watch})
        run = SimpleNamespace(
            task=resolve_task(name),
            ledger=SimpleNamespace(store=SimpleNamespace(run_dir=tmp_path)),
            log=print,
            agents=SimpleNamespace(use_adapter=lambda name: None),
        )
        start_learning(cfg, run, None)
    assert watched == ["decrease TOL", "increase NODE", None]
