"""Resume under kills: SIGKILL model-free searches at random moments, resume them, and check that nothing
was lost, duplicated or evaluated twice, and that best/ and summary.json agree with the store.

`chaos` is the harness; the default suite runs a few kill points, the `slow` one a hundred and more."""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arts.policy.executor import program_key
from arts.search.config import SearchConfig
from arts.search.run import resume_run, start_run
from arts.search.store import Store
from arts.tasks.base import load_task
from tests.doubles import make_task

DRIVER = """
import sys
from pathlib import Path
from arts.search.config import SearchConfig
from arts.search.run import resume_run, start_run
task, run_dir, evals = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
if (run_dir / "config.toml").is_file():
    resume_run(run_dir, log=lambda line: None)
else:
    cfg = SearchConfig(task=task, method="mutate", group=2, budget={"evals": evals}, seed=len(run_dir.name))
    start_run(cfg, run_dir, log=lambda line: None)
"""
NO_EVALUATION = ("interrupted", "already evaluated", "no applicable", "evaluation budget spent")
"""Reasons of invalid nodes whose program never finished an evaluation."""


def _finished(run_dir: Path) -> dict:
    """The run's finished nodes: not pending, and the seed only once its evaluation is stored."""
    if not Store.holds_run(run_dir):
        return {}
    with Store.open_readonly(run_dir) as store:
        state = store.load_state()
    scored = state.meta.get("seed_scored", True)
    return {
        i: n for i, n in state.nodes.items() if n.status != "pending" and (n.parent is not None or scored)
    }


def _check(run_dir: Path, seen: dict) -> dict[str, int]:
    """Lost, duplicated and repeated counts of a finished run, given the finished nodes seen between kills."""
    with Store.open_readonly(run_dir) as store:
        state = store.load_state()
    nodes = state.nodes
    changed = [i for i, n in seen.items() if i not in nodes or nodes[i].model_dump() != n.model_dump()]
    for i in changed:
        print("lost or changed:", seen[i].model_dump(), nodes.get(i) and nodes[i].model_dump())
    lost = len(changed)
    lost += sum(n.status == "pending" for n in nodes.values())
    roots = [n for n in nodes.values() if n.parent is None]
    folders = sum(
        any((run_dir / "nodes" / str(n.id) / name).read_text() != text for name, text in n.files.items())
        for n in nodes.values()
    )
    duplicated = len(roots) - 1 + folders
    ran = [
        n for n in nodes.values()
        if n.status in ("seed", "valid") or (n.status == "invalid" and not n.reason.startswith(NO_EVALUATION))
    ]  # fmt: skip
    keys = [program_key(n.files) for n in ran]
    repeated = len(keys) - len(set(keys))
    best = state.best()
    summary = json.loads((run_dir / "summary.json").read_text())
    root = roots[0] if roots else None
    if best is None:  # nothing scored: on a loaded machine the seed's own evaluation may time out
        disagree = summary["best"]["score"] is not None or root is None or root.reason == ""
    else:
        disagree = summary["best"]["node"] != best.id or summary["best"]["score"] != best.raw_score
        disagree |= any((run_dir / "best" / k).read_text() != v for k, v in best.files.items())
    disagree |= root is None or summary["baseline"] != root.raw_score  # the seed was evaluated and stored
    return {"lost": lost, "duplicated": duplicated, "repeated": repeated, "disagree": int(disagree)}


def chaos(tmp_path: Path, kills: int, evals: int, seed: int = 0, window=(0.3, 1.0)) -> dict[str, int]:
    """Kill runs of `mutate` at a random moment of `window` after each start, as fractions of how long the
    first, uninterrupted run took on this machine (importing arts is most of it on a busy one), until `kills`
    SIGKILLs landed, resuming each run until it finishes; a finished run is checked and the next one starts.
    Returns the totals."""
    task = str(make_task(tmp_path / "task"))
    rng, totals, runs = random.Random(seed), dict.fromkeys(("kills", "lost", "duplicated", "repeated"), 0), 0
    totals["disagree"], span = 0, None
    while totals["kills"] < kills:
        assert runs < 20 * kills + 20, f"{totals['kills']} of {kills} kills landed in {runs} runs"
        run_dir, seen = tmp_path / f"run{runs}", {}
        runs += 1
        while True:
            args = [sys.executable, "-c", DRIVER, task, str(run_dir), str(evals)]
            proc = subprocess.Popen(
                args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
            )
            start = time.monotonic()
            landing = span is not None and totals["kills"] < kills
            try:
                _, err = proc.communicate(timeout=rng.uniform(*window) * span if landing else 120)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                totals["kills"] += 1
                seen |= _finished(run_dir)
                continue
            assert proc.returncode == 0, err.decode()[-2000:]
            span = span or time.monotonic() - start
            break
        for key, value in _check(run_dir, seen).items():
            totals[key] += value
    totals["runs"] = runs
    return totals


def test_kills_lose_duplicate_and_repeat_nothing(tmp_path):
    totals = chaos(tmp_path, kills=1, evals=2)
    assert totals["lost"] == totals["duplicated"] == totals["repeated"] == totals["disagree"] == 0, totals


@pytest.mark.slow
def test_a_hundred_kill_points(tmp_path):
    totals = chaos(tmp_path, kills=110, evals=12, seed=1)
    print("chaos:", totals)
    assert totals["lost"] == totals["duplicated"] == totals["repeated"] == totals["disagree"] == 0, totals


def test_uninterrupted_mutate_never_reruns_a_program(tmp_path):
    cfg = SearchConfig(task=str(make_task(tmp_path / "task")), method="mutate", group=3, budget={"evals": 6})
    start_run(cfg, tmp_path / "run", log=lambda line: None)
    assert _check(tmp_path / "run", {})["repeated"] == 0


def test_kill_during_the_seeds_evaluation_is_recovered(tmp_path, monkeypatch):
    cfg = SearchConfig(task=str(make_task(tmp_path / "task")), method="mutate", group=1, budget={"evals": 1})

    def killed(*args, **kwargs):
        raise KeyboardInterrupt  # stands for the SIGKILL: nothing after this point runs

    monkeypatch.setattr("arts.search.lab.run_evaluation", killed)
    with pytest.raises(KeyboardInterrupt):
        start_run(cfg, tmp_path / "run", log=lambda line: None)
    monkeypatch.undo()
    assert resume_run(tmp_path / "run", log=lambda line: None)["baseline"] is not None


def test_store_killed_before_its_first_commit_can_be_started_or_resumed(tmp_path):
    cfg = SearchConfig(task=str(make_task(tmp_path / "task")), method="mutate", group=1, budget={"evals": 1})
    for how in ("start", "resume"):
        run_dir = tmp_path / how
        run_dir.mkdir()
        (run_dir / "config.toml").write_text((tmp_path / "task" / "task.toml").read_text() and "")
        (run_dir / "arts.db").write_bytes(b"")  # created, schema never committed
        if how == "start":
            (run_dir / "config.toml").unlink()
            summary = start_run(cfg, run_dir, log=lambda line: None)
        else:
            start_run(cfg, tmp_path / "donor", log=lambda line: None)
            (run_dir / "config.toml").write_text((tmp_path / "donor" / "config.toml").read_text())
            summary = resume_run(run_dir, log=lambda line: None)
        assert summary["nodes"] >= 1


GRADER = 'import json\njson.dump({"score": 1.0, "valid": True}, open("result.json", "w"))\n'


def test_resuming_a_finished_run_does_not_grade_the_hidden_split_again(tmp_path):
    root = make_task(tmp_path / "task")
    (root / "grader").mkdir()
    (root / "grader" / "test.py").write_text(GRADER)
    toml = (
        (root / "task.toml")
        .read_text()
        .replace('material = ["evaluate.py"]', 'material = ["evaluate.py"]\nhidden = ["grader/"]')
    )
    (root / "task.toml").write_text(toml + '\n[test]\ncommand = ["python", "grader/test.py"]\n')
    load_task(root)
    cfg = SearchConfig(task=str(root), method="mutate", group=1, budget={"evals": 1})
    start_run(cfg, tmp_path / "run", log=lambda line: None)
    for _ in range(2):
        summary = resume_run(tmp_path / "run", log=lambda line: None)
    with Store.open_readonly(tmp_path / "run") as store:
        assert len(store.events("test")) == 1
    assert summary["best"]["test_score"] == 1.0
