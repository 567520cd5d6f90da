"""`arts bench` (search/bench/): the jobs it plans, what it reads from a run, and a whole bench of two tasks
and two methods with a scripted backend in worker processes, killed mid-way and continued."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from arts.search.bench.cli import add_parser, cmd_bench, config_from
from arts.search.bench.plan import BenchConfig, final_summary, parse_seeds, plan
from arts.search.bench.results import active_clock, learning
from arts.search.state import Event, Rollout, SearchState
from arts.tasks.base import TaskError
from tests.doubles import make_task

REPO = Path(__file__).resolve().parent.parent
SCRIPTED = "tests.bench_backend:ScriptedBackend"


def parse(argv: list[str]) -> argparse.Namespace:
    """The flags as the `arts` command parses them once `add_parser` is wired into it."""
    parser = argparse.ArgumentParser(prog="arts")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["bench", *argv])


def two_tasks(root: Path) -> list[str]:
    a = make_task(root / "task-a")
    b = make_task(root / "task-b")
    (b / "task.toml").write_text((b / "task.toml").read_text().replace("toy-quadratic", "toy-b"))
    (b / "solution.py").write_text("X = 6.0\n\n\ndef value():\n    return X\n")  # seed score -9
    return [str(a), str(b)]


def test_seeds_are_a_count_or_the_seeds_themselves():
    assert parse_seeds(["3"]) == [0, 1, 2]
    assert parse_seeds(["0", "3", "7"]) == [0, 3, 7]
    assert parse_seeds(["4,9"]) == [4, 9] and parse_seeds(["7,"]) == [7]
    with pytest.raises(ValueError, match="a count"):
        parse_seeds(["two"])


def test_every_job_shares_budget_model_and_settings_and_arts_ttt_turns_training_on(tmp_path):
    tasks = two_tasks(tmp_path)
    args = parse(
        ["--tasks", *tasks, "--methods", "arts,arts-ttt", "mutate", "--seeds", "2", "--evals", "7"]
        + ["--out", str(tmp_path / "b"), "--model", "some/model", "--set", "group=3"]
    )

    jobs = plan(config_from(args))
    assert len(jobs) == 2 * 3 * 2 and len({j.run_dir for j in jobs}) == 12
    for j in jobs:
        ov = j.overrides
        assert ov["budget.evals"] == 7 and ov["group"] == 3 and ov["seed"] == j.seed
        assert ov["scientist_model.model"] == ov["executor_model.model"] == "some/model"
        assert ov["method"] == ("arts" if j.method == "arts-ttt" else j.method)
        assert ov.get("ttt.enabled", False) is (j.method == "arts-ttt")


def test_a_bench_that_trains_some_methods_loads_every_method_in_the_trained_dtype(tmp_path, monkeypatch):
    """On a CPU with native bf16, auto would load arts in bf16 and arts-ttt in float32: the bench pins
    every job to float32, so the methods differ in training alone."""
    monkeypatch.setattr("arts.search.run.cpu_has_bf16", lambda: True)
    tasks = two_tasks(tmp_path)
    argv = ["--tasks", *tasks, "--seeds", "1", "--out", str(tmp_path / "b")]
    mixed = plan(config_from(parse([*argv, "--methods", "arts,arts-ttt,mutate"])))
    assert {(j.overrides["scientist_model.dtype"], j.overrides["executor_model.dtype"]) for j in mixed} == {
        ("float32", "float32")
    }
    untrained = plan(config_from(parse([*argv, "--methods", "arts,greedy"])))
    assert not any("scientist_model.dtype" in j.overrides for j in untrained)
    chosen = plan(
        config_from(parse([*argv, "--methods", "arts,arts-ttt", "--set", "scientist_model.dtype=bfloat16"]))
    )
    assert {j.overrides["scientist_model.dtype"] for j in chosen} == {"bfloat16"}

    class Started(Exception):
        pass

    def launched(todo, *args, **kw):  # the bench's jobs as its workers would get them, and no run
        assert {j.overrides["executor_model.dtype"] for j in todo} == {"float32"}
        raise Started

    monkeypatch.setattr("arts.search.bench.runner.run_jobs", launched)
    lines: list[str] = []
    monkeypatch.setattr("builtins.print", lambda line, **kw: lines.append(line))
    with pytest.raises(Started):
        cmd_bench(parse([*argv, "--methods", "arts,arts-ttt"]))
    assert "weights: every method in float32, the dtype of the methods that train" in lines


def test_the_ablations_are_methods_of_one_bench(tmp_path):
    """Each ablation alias runs arts with its one part off; the configs are resolved (and checked) by
    the plan, and the report reads each against arts."""
    from arts.search.bench.report import _oriented

    ablations = ["arts-no-observations", "arts-no-comparison", "arts-no-attribution", "arts-no-critic"]
    ablations += ["arts-k1", "arts-reflection"]
    methods = ",".join(["arts", *ablations])
    args = parse(["--tasks", two_tasks(tmp_path)[0], "--methods", methods, "--out", str(tmp_path / "b")])
    jobs = {j.method: j for j in plan(config_from(args))}
    assert all(jobs[m].overrides["method"] == "arts" for m in ablations)
    assert jobs["arts-no-observations"].overrides["components.observations"] is False
    assert jobs["arts-no-comparison"].overrides["components.comparison"] is False
    assert jobs["arts-no-attribution"].overrides["components.attribution"] is False
    assert jobs["arts-no-critic"].overrides["attribution.critic"] is False
    assert jobs["arts-k1"].overrides["attribution.k"] == 1
    assert jobs["arts-reflection"].overrides["attribution.mode"] == "reflection"
    assert "attribution.k" not in jobs["arts"].overrides
    assert _oriented(("arts", "arts-k1")) == ("arts-k1", "arts")  # the difference reads as the ablation's


def test_a_warm_method_starts_from_the_bench_adapter_and_refuses_without_one(tmp_path):
    from arts.search.bench.report import _oriented

    argv = ["--tasks", two_tasks(tmp_path)[0], "--methods", "arts,arts-warm,arts-ttt-warm", "--out", str(tmp_path / "b")]
    with pytest.raises(ValueError, match="arts-warm starts from an adapter: give --adapter PATH"):
        plan(config_from(parse(argv)))
    warm_dir = tmp_path / "warm" / "kepler"
    with pytest.raises(ValueError, match="no adapter_config.json there"):
        plan(config_from(parse([*argv, "--adapter", str(warm_dir)])))
    warm_dir.mkdir(parents=True)
    (warm_dir / "adapter_config.json").write_text("{}")
    jobs = {j.method: j for j in plan(config_from(parse([*argv, "--adapter", str(warm_dir)])))}
    warm = str(warm_dir.resolve())
    assert jobs["arts-warm"].overrides["scientist.adapter"] == warm
    assert jobs["arts-ttt-warm"].overrides["scientist.adapter"] == warm
    assert jobs["arts-ttt-warm"].overrides["ttt.enabled"] is True and jobs["arts-warm"].overrides["method"] == "arts"
    assert "scientist.adapter" not in jobs["arts"].overrides
    assert _oriented(("arts", "arts-warm")) == ("arts-warm", "arts")  # read as what the warm start adds


def test_only_the_summary_a_run_ends_with_makes_it_finished(tmp_path):
    from arts.search.bench.plan import folder_state

    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text('{"running": true, "stopped_because": null, "evals": 2}')  # mid-run
    assert final_summary(run) is None and folder_state(run) == "fresh"
    (run / "arts.db").touch()
    (run / "config.toml").touch()
    assert folder_state(run) == "resumable"
    (run / "summary.json").write_text('{"stopped_because": "evaluation budget spent (3/3)", "evals": 3}')
    assert final_summary(run)["evals"] == 3 and folder_state(run) == "finished"


def test_a_bad_setting_fails_before_any_run_starts(tmp_path):

    out = tmp_path / "b"
    args = parse(
        ["--tasks", *two_tasks(tmp_path), "--methods", "mutate", "--out", str(out), "--set", "grup=2"]
    )
    with pytest.raises(ValueError, match="grup"):
        cmd_bench(args)
    assert not (out / "runs").exists() and not (out / "bench.json").exists()
    with pytest.raises(TaskError, match="built-in tasks: "):
        cmd_bench(parse(["--tasks", "no-such-task", "--methods", "mutate", "--out", str(out)]))
    assert not (out / "runs").exists()


def test_active_clock_leaves_out_the_time_a_killed_run_lay_dead():
    # worker 1 from t=100 (records 100..130), killed; worker 2 started at 1000 (records 1005..1020)
    clock = active_clock([100, 110, 130, 1005, 1020], starts=[99, 1000])
    assert clock(100) == 0 and clock(120) == 20 and clock(500) == 30
    assert clock(1010) == 35 and clock(1020) == 45
    assert active_clock([5, 8], starts=[])(8) == 3  # no session file: one session


def test_each_update_reports_reward_rewarded_share_and_proposal_entropies():
    cands = [
        {"parent": 1, "hypothesis": "increase X to 2", "axis": "x"},
        {"parent": 1, "hypothesis": "decrease X to 0.5", "axis": "x"},
        {"parent": 2, "hypothesis": "increase Y to 3", "axis": "y"},
        {"parent": 3, "hypothesis": "a free idea", "axis": "init"},
    ]
    acted = [json.dumps(cands[i]) for i in (0, 2, 1, 0)]
    rollouts = {
        i: Rollout(id=i, round=r, group=g, candidates=cands if g == 1 else cands[:2], action=acted[i - 1])
        for i, (r, g) in enumerate([(1, 1), (1, 1), (2, 2), (2, 2)], start=1)
    }
    ev = [
        Event(id=1, kind="rewards", payload={"group": 1, "round": 1, "rewards": [1.0, 0.0]}),
        Event(id=2, kind="rewards", payload={"group": 2, "round": 2, "rewards": [0.0, 0.0]}),
        Event(
            id=3, kind="update", payload={"k": 1, "round": 2, "kl": 0.25, "loss": 0.1, "seconds": 2.0}, ts=40
        ),
        Event(id=4, kind="update_skipped", payload={"round": 4, "since_round": 2, "kl": 0.0}),
        Event(
            id=7,
            kind="watch",
            payload={"round": 2, "k": 0, "move": "increase X", "scored": True, "ratio": 1.0},
        ),
        Event(
            id=8,
            kind="watch",
            payload={"round": 4, "k": 1, "move": "increase X", "scored": True, "ratio": 2.5},
        ),
    ]
    ev += [Event(id=4 + r, kind="round_start", payload={"round": r}, ts=10 * r) for r in (1, 2)]
    state = SearchState(rollouts=rollouts, events={e.id: e for e in ev})
    first, skipped = learning(state)
    assert first["update_s"] == 2.0 and first["round_s"] == pytest.approx((40 - 10 - 2) / 2)
    assert first["update"] == 1 and first["applied"] and first["groups"] == 2
    assert first["mean_reward"] == pytest.approx(0.25)  # group means 0.5 and 0
    assert first["rewarded_fraction"] == pytest.approx(0.25)
    # targets over the 6 candidates: X x4, Y x1, "init" x1; parents: 1 x4, 2 x1, 3 x1
    h = -(4 / 6 * math.log2(4 / 6) + 2 * (1 / 6) * math.log2(1 / 6))
    assert first["entropy_targets"] == pytest.approx(h) and first["entropy_parents"] == pytest.approx(h)
    assert first["kl"] == 0.25 and not skipped["applied"] and math.isnan(skipped["mean_reward"])
    assert (first["watch"], first["watch_k"], skipped["watch"], skipped["watch_k"]) == (1.0, 0, 2.5, 1)
    # "increase X": drawn by rollouts 1 and 4, written in the four lists (each rollout's own, without tokens)
    assert (first["watched_drawn"], first["watched_written"]) == (2, 4)


def _wait_for(predicate, timeout: float, what: str) -> None:
    end = time.time() + timeout
    while not predicate():
        if time.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    """Running, not a zombie: once the sandbox has made this process a child subreaper, a killed bench's
    orphaned worker is re-parented here and stays a zombie until reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    if state == "Z":
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        return False
    return True


def test_a_killed_bench_continues_to_the_same_rows_without_rerunning_finished_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # the workers import the scripted backend from tests/
    out, tasks = tmp_path / "bench", two_tasks(tmp_path)

    def flags(jobs: int, evals: int = 3) -> list[str]:
        return [
            "--tasks", *tasks, "--methods", "mutate,greedy", "--seeds", "0,", "--evals", str(evals),
            "--out", str(out), "--jobs", str(jobs), "--set", "group=2",
            f"--set=scientist_model.backend={SCRIPTED}", f"--set=executor_model.backend={SCRIPTED}",
        ]  # fmt: skip

    # task-a's two runs start together; greedy stalls at its second experiment, so it is under way (its
    # first node stored) when mutate, which calls no model, has finished: then the bench is killed
    slow = {**os.environ, "ARTS_TEST_STALL_AT_EXECUTOR": "2"}
    cmd = [sys.executable, "-m", "arts.search.bench.cli", "bench", *flags(2)]
    bench = subprocess.Popen(cmd, cwd=REPO, env=slow, stdout=subprocess.DEVNULL)
    first, second = out / "runs" / "task-a--mutate--s0", out / "runs" / "task-a--greedy--s0"
    try:
        _wait_for(
            lambda: (
                final_summary(first) is not None
                and "round 1" in _read(second / "bench.log")
                and "interim" in _read(out / "summary.md")
            ),  # the interim report: written last
            60,
            "one finished run, its interim report, and one run under way",
        )
    finally:
        os.kill(bench.pid, signal.SIGKILL)  # the bench only: its workers must die with it
        bench.wait()
    worker = json.loads((second / "bench-sessions.jsonl").read_text().splitlines()[0])["pid"]
    _wait_for(lambda: not _alive(worker), 10, "the worker of the killed bench to die")
    finished = {d: (d / "summary.json").read_text() for d in (out / "runs").iterdir() if final_summary(d)}
    assert first in finished and second not in finished
    assert "still to run: an interim report" in (out / "summary.md").read_text()  # written after each run
    assert set(pd.read_csv(out / "runs.csv").method) == {"mutate"}
    assert cmd_bench(parse([*flags(2), "--report"])) == 0  # a report of what is there; nothing runs
    assert len((second / "bench-sessions.jsonl").read_text().splitlines()) == 1
    # no machine's paths; task-b's mutate may have finished just before the kill (the report lists it then)
    assert set(pd.read_csv(out / "runs.csv").run_dir) == {f"runs/{d.name}" for d in finished}

    assert cmd_bench(parse(flags(3))) == 0  # the same command continues it (here three runs at a time)

    for d, summary in finished.items():  # kept, not run again
        assert (d / "summary.json").read_text() == summary
        assert len((d / "bench-sessions.jsonl").read_text().splitlines()) == 1
    assert len((second / "bench-sessions.jsonl").read_text().splitlines()) == 2  # resumed from its store
    assert "resume:" in _read(second / "bench.log")
    runs = pd.read_parquet(out / "runs.parquet")
    assert sorted(zip(runs.task, runs.method, runs.seed)) == sorted(
        (t, m, 0) for t in ("toy-quadratic", "toy-b") for m in ("mutate", "greedy")
    )
    assert (runs.status == "finished").all() and (runs.evaluations == 3).all()
    assert runs.best.notna().all() and runs.seconds.gt(0).all() and runs.updates.eq(0).all()
    assert runs.experiments.ge(2).all() and runs.valid.between(0, runs.experiments).all()
    assert (
        runs[runs.method == "greedy"].tokens.gt(0).all() and runs[runs.method == "mutate"].tokens.eq(0).all()
    )
    assert (
        runs.normalised.between(-1e-9, 1 + 1e-9).all() and runs.groupby("task").normalised.max().eq(1).all()
    )
    assert pd.read_csv(out / "runs.csv").shape == runs.shape
    text = (out / "summary.md").read_text()
    assert "## Across tasks" in text and "mutate − greedy" in text and "## Per task" in text
    assert "seed -9 (measured)" in text  # task-b's own seed program
    assert "## Investigation" not in text  # greedy and mutate keep no dual space
    assert "| valid experiments | beat the seed |" in text and re.search(
        r"\| \d+/\d+ \(\d+%\) \| \d/1 \|", text
    )
    for name in ("curves-toy-quadratic.png", "curves-toy-b.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"]({name})" in text

    with pytest.raises(ValueError, match="evals=3"):  # a different budget would mix incomparable runs
        cmd_bench(parse(flags(2, evals=4)))

    # on a machine with the bench folder's tables but not its run folders: nothing is rerun or lost
    tables = {name: pd.read_csv(out / name) for name in ("runs.csv", "updates.csv", "curves.csv")}
    per_run = tables["curves.csv"].groupby(["task", "method", "seed"]).size()
    assert len(per_run) == 4 and per_run.ge(4).all()  # the seed's point and one per experiment
    shutil.rmtree(out / "runs")

    def no_worker(job, threads):
        raise AssertionError(f"{job.key} was run again")

    monkeypatch.setattr("arts.search.bench.runner._launch", no_worker)
    assert cmd_bench(parse(flags(2))) == 0
    for name, before in tables.items():
        pd.testing.assert_frame_equal(pd.read_csv(out / name), before, check_dtype=False)
    assert (out / "summary.md").read_text() == text


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def test_a_run_that_crashes_is_reported_failed_and_the_bench_goes_on(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    out, broken = tmp_path / "bench", "tests.bench_backend:BrokenBackend"
    argv = ["--tasks", str(make_task(tmp_path / "task")), "--methods", "greedy,mutate", "--seeds", "1"]
    argv += ["--evals", "2", "--out", str(out), "--jobs", "2", f"--set=scientist_model.backend={broken}"]
    assert cmd_bench(parse(argv)) == 1
    runs = pd.read_csv(out / "runs.csv").set_index("method")
    assert runs.loc["greedy", "status"] == "failed" and "cannot load" in runs.loc["greedy", "error"]
    assert runs.loc["mutate", "status"] == "finished" and runs.loc["mutate", "evaluations"] == 2
    text = (out / "summary.md").read_text()
    assert "## Failed runs" in text and "cannot load" in text and "| mutate | 1 |" in text
    assert "1 run(s) failed" in capsys.readouterr().out


def test_the_report_normalises_against_the_best_known_in_the_task_direction_and_shows_learning(tmp_path):
    from arts.search.bench.report import write_report
    from arts.search.bench.results import RunResult
    from arts.tasks.base import resolve_task

    root = make_task(tmp_path / "task")
    toml = (root / "task.toml").read_text().replace('"maximize"', '"minimize"\nbest_known = 0.0')
    (root / "task.toml").write_text(toml)
    task = resolve_task(str(root))
    cfg = BenchConfig(tasks=[str(root)], methods=["arts", "arts-ttt"], seeds=[0, 1], out=tmp_path / "b")
    cfg.out.mkdir()

    def run(method: str, seed: int, best: float) -> RunResult:
        row = {"task": task.name, "method": method, "seed": seed, "status": "finished", "best": best}
        row |= {"test_score": None, "baseline": 4.0, "evaluations": 3, "tokens": 10, "seconds": 1.0}
        curve = [(0, 0.0, 4.0), (3, 1.0, best)]
        ups = [{"update": 1, "round": 1, "applied": True, "mean_reward": 0.5, "rewarded_fraction": 0.5,
                "entropy_targets": 1.0, "entropy_parents": 0.0, "kl": None, "loss": 0.1}]  # fmt: skip
        if method == "arts-ttt":  # the credit check: concordance 0.6 and 0.8 over 3 pairs each
            row |= {"credit_concordance": 0.6 + 0.2 * seed, "credit_pairs": 3}
        return RunResult(row | {"updates": len(ups)}, curve, ups if method == "arts-ttt" else [])

    results = [run("arts", 0, 3.0), run("arts", 1, 2.0), run("arts-ttt", 0, 1.0), run("arts-ttt", 1, 1.0)]
    write_report(cfg, {str(root): task}, results, log=lambda line: None)
    runs = pd.read_parquet(cfg.out / "runs.parquet")
    # seed 4 = 0 and best known 0 = 1, lower is better: 3 -> 0.25, 2 -> 0.5, 1 -> 0.75
    assert list(runs.normalised) == [0.25, 0.5, 0.75, 0.75]
    text = (cfg.out / "summary.md").read_text()
    assert "minimize; seed 4 (measured) = 0, reference 0 (best known) = 1." in text
    assert "| arts-ttt − arts | 1 | 0.375 [0.250, 0.500] |" in text  # 0.75 - {0.25, 0.375, 0.5}
    assert "## Learning (test-time training)" in text and "](learning.png)" in text
    assert "| all tasks | arts-ttt | 2 | 2 | 0 (0%) | - | - | 1 | 0 | -; - |" in text  # no KL, no seconds given
    assert len(pd.read_csv(cfg.out / "updates.csv")) == 2 and (cfg.out / "learning.png").exists()
    assert f"| {task.name} | arts-ttt | 2 | 6 | 0.700 [0.600, 0.800] |" in text
    assert "| all tasks | arts-ttt | 2 | 6 | 0.700 [0.600, 0.800] |" in text
    assert list(runs.credit_pairs.fillna(0)) == [0, 0, 3, 3]


def test_the_learning_summary_counts_rounds_without_signal_the_last_kl_and_update_seconds():
    from arts.search.bench.sections import learning_summary

    def u(task, seed, applied, kl, parents, update_s, round_s, watch=(float("nan"), 0)):
        return {"task": task, "method": "arts-ttt", "seed": seed, "applied": applied, "kl": kl,
                "entropy_targets": 2.0, "entropy_parents": parents, "update_s": update_s, "round_s": round_s,
                "watch": watch[0], "watch_k": watch[1], "watched_drawn": 1 if task == "a" else float("nan"),
                "watched_written": 2 if task == "a" else float("nan")}  # fmt: skip

    updates = [
        u("a", 0, True, 0.0, 0.0, 10.0, 90.0, (1.0, 0)),  # before any update: not a held-out figure
        u("a", 0, True, 0.002, 1.0, 10.0, 90.0, (2.5, 1)),
        u("a", 0, False, 0.0, 0.0, 0.0, 100.0, (1.5, 2)),  # no signal: skipped, its KL not the run's last
        u("a", 1, True, 0.004, 1.0, 30.0, 70.0),
        u("b", 0, False, float("nan"), 0.0, 0.0, 50.0),  # never applied: no KL
    ]
    table = learning_summary(updates)
    assert (
        table[2]
        == "| a | arts-ttt | 2 | 4 | 1 (25%) | 0.003 | 0.004 | 2 | 0.5 | 0.14; 0.11 | 2 (1/2) | 4/8 |"
    )  # 50 / 350; an applied update: 10/90, 10/90, 30/70
    assert table[3] == "| b | arts-ttt | 1 | 1 | 1 (100%) | - | - | 2 | 0 | 0; - | - | - |"
    assert (
        table[4]
        == "| all tasks | arts-ttt | 3 | 5 | 2 (40%) | 0.003 | 0.004 | 2 | 0.4 | 0.12; 0.11 | 2 (1/2) | 4/8 |"
    )  # 50 / 400


def test_a_run_made_before_the_credit_check_takes_it_from_arts_credit(tmp_path):
    from arts.search.bench.results import _credit

    (tmp_path / "credit.json").write_text(json.dumps({"concordance": 0.75, "pairs": 8}))
    assert _credit(tmp_path, {"credit": None}) == {"credit_concordance": 0.75, "credit_pairs": 8}
    assert _credit(tmp_path, {"credit": {"concordance": None, "pairs": 0}}) == {
        "credit_concordance": None, "credit_pairs": 0,
    }  # fmt: skip
    assert _credit(tmp_path / "none", {}) == {}


@pytest.mark.slow
def test_arts_ttt_runs_train_in_the_bench_and_each_update_is_reported(tmp_path, tiny_model_dir):
    out = tmp_path / "bench"
    argv = ["--tasks", str(make_task(tmp_path / "task")), "--methods", "arts-ttt", "--seeds", "0,"]
    argv += ["--evals", "4", "--out", str(out), "--model", str(tiny_model_dir), "--set", "group=2"]
    assert cmd_bench(parse(argv)) == 0
    run = out / "runs" / "task--arts-ttt--s0"
    assert "enabled = true" in (run / "config.toml").read_text().split("[ttt]")[1]
    ups = pd.read_csv(out / "updates.csv")
    assert len(ups) >= 1 and ups["round"].is_monotonic_increasing
    assert ups.entropy_targets.notna().all() and ups.round_s.gt(0).all()
    assert "## Learning (test-time training)" in (out / "summary.md").read_text()
    assert (out / "learning.png").exists()
    # every TTT run ends with its credit check, and an arts run reports what its investigation did
    runs = pd.read_csv(out / "runs.csv")
    assert runs.credit_pairs.notna().all() and runs.decisions.notna().all()
    summary = json.loads((run / "summary.json").read_text())
    assert runs.sought[0] == summary["observations"]["sources"].get("probe", 0)
    assert runs.sought[0] + runs.byproducts[0] == summary["observations"]["count"]
    assert "## Investigation (what the decisions changed)" in (out / "summary.md").read_text()


def test_a_one_method_bench_prints_rounded_scores_and_no_empty_differences_table(tmp_path, capsys):
    from arts.search.cli.main import main

    out = tmp_path / "bench"
    argv = ["bench", "--tasks", str(make_task(tmp_path / "task")), "--methods", "mutate", "--seeds", "1"]
    assert main([*argv, "--evals", "3", "--out", str(out)]) == 0
    done = next(line for line in capsys.readouterr().out.splitlines() if "/ mutate / seed" in line)
    best = re.search(r"best (\S+)", done).group(1)
    assert best == f"{float(best):.6g}", done
    text = (out / "summary.md").read_text()
    assert "One method (mutate): no pair to compare" in text and "| A − B |" not in text
