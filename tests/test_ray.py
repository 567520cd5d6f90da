"""Ray when one machine is not enough, against a local Ray the tests start (skipped, saying why, where Ray
is not installed or cannot start): `arts search --evaluate-on ray` evaluates as Ray tasks, a dead worker's
evaluation is recorded as interrupted and not charged, and `arts bench --ray` runs each search as a Ray
task and resumes from its folder."""

from __future__ import annotations

import csv
import os

import pytest

from arts.search.cli.main import main
from arts.search.store import Store
from tests.doubles import BatchingRules, make_task


@pytest.fixture(scope="module")
def ray_local():
    try:
        import ray
    except ImportError:
        pytest.skip("Ray is not installed (pip install 'arts[ray]')")
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"a local Ray could not start here: {e}")
    yield ray
    ray.shutdown()


def test_search_evaluates_on_ray_workers(ray_local, tmp_path, monkeypatch):
    backend = BatchingRules()
    monkeypatch.setattr("arts.search.run.make_backend", lambda mc, sink, seed: backend)
    task, run = make_task(tmp_path / "task"), tmp_path / "run"
    argv = ["search", str(task), "--run-dir", str(run), "--group", "2", "--budget.evals", "4",
            "--evaluate-on", "ray", "--workers", "2"]  # fmt: skip
    assert main(argv) == 0
    with Store.open(run, create=False) as store:
        state = store.load_state()
    evals = [e.payload for e in state.events.values() if e.kind == "eval"]
    assert len(evals) == 4 and all(e["on"] == "ray" for e in evals)
    assert any(n.status == "valid" for n in state.nodes.values() if n.parent is not None)


def test_a_dead_worker_interrupts_its_evaluation_without_charging_it(ray_local, tmp_path, monkeypatch):
    from arts.search.config import SearchConfig
    from arts.search.remote import RayEvaluations
    from arts.search.run import build_run

    monkeypatch.setattr("arts.search.run.make_backend", lambda mc, sink, seed: BatchingRules())

    def dies(task_root, files, workdir):  # the worker process ends mid-evaluation
        os._exit(1)

    task = make_task(tmp_path / "task")
    (tmp_path / "run").mkdir()
    with Store.open(tmp_path / "run") as store:
        run, _ = build_run(SearchConfig(task=str(task)), store, log=lambda line: None)
        run.lab.evaluator = RayEvaluations(fn=dies)
        files = {"solution.py": "X = 2.0\n\n\ndef value():\n    return X\n"}
        res = run.lab.evaluate(files, tmp_path / "work")
        assert not res.valid and res.reason.startswith("interrupted: the evaluation's Ray worker died")
        assert run.meter.evals == 0  # not charged
        assert run.lab.known_programs()(files) is None  # it may be evaluated again
        run.lab.evaluator = RayEvaluations()  # a healthy worker: the same program now runs
        again = run.lab.evaluate(files, tmp_path / "work")
        assert again.valid and again.score == pytest.approx(-1.0) and run.meter.evals == 1
        events = [e.payload for e in store.load_state().events.values() if e.kind == "eval"]
    assert [e.get("interrupted", False) for e in events] == [True, False]


def test_bench_runs_each_search_as_a_ray_task(ray_local, tmp_path, capsys):
    task = make_task(tmp_path / "task")
    out = tmp_path / "bench"
    argv = ["bench", "--tasks", str(task), "--methods", "mutate", "--seeds", "2", "--evals", "3",
            "--out", str(out), "--ray", "--jobs", "2"]  # fmt: skip
    assert main(argv) == 0
    rows = list(csv.DictReader((out / "runs.csv").open()))
    assert [(r["seed"], r["status"]) for r in rows] == [("0", "finished"), ("1", "finished")]
    capsys.readouterr()
    assert main(argv) == 0  # run again: everything is kept, nothing reruns
    assert "2 already finished" in capsys.readouterr().out
