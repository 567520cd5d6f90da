"""Following runs as a user does: `arts runs`, `arts status` and `arts report` on a search that is running
(in another process, holding its lock), then killed, then on a finished one."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arts.search.cli.follow import is_locked
from arts.search.cli.main import main
from arts.search.store import Store

ARTS = str(Path(sys.executable).parent / "arts")


def wait_for(check, timeout: float = 60.0, what: str = "") -> None:
    end = time.time() + timeout
    while not check():
        if time.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def rounds_done(run: Path) -> int:
    try:
        with Store.open_readonly(run) as store:
            return len(store.events("round_start"))
    except Exception:  # not created yet  # noqa: BLE001
        return 0


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory) -> tuple[Path, dict]:
    """A mutate search (no model) followed while it runs, then SIGKILLed mid-run. Returns the run and
    what `status`, `runs` and the report showed while it was running."""
    root = tmp_path_factory.mktemp("runs")
    run = root / "live"
    argv = [ARTS, "search", "circle-packing-26", "--method", "mutate", "--evals", "40", "--group", "2",
            "--run-dir", str(run)]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen: dict = {}
    try:
        wait_for(lambda: rounds_done(run) >= 3 or proc.poll() is not None, what="three rounds")
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        t0 = time.perf_counter()
        seen["status"] = subprocess.run([ARTS, "status", str(run)], capture_output=True, text=True)
        seen["status_s"] = time.perf_counter() - t0
        seen["runs"] = subprocess.run([ARTS, "runs", str(root)], capture_output=True, text=True)
        seen["report"] = (run / "report.html").read_text()
        seen["summary"] = json.loads((run / "summary.json").read_text())
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    # a helper the search forked an instant before (it kills a sandbox uid's processes) may hold the lock
    # for the few milliseconds it has left
    wait_for(lambda: not is_locked(run), timeout=10, what="the killed search's lock to be released")
    return run, seen


def test_status_and_runs_read_a_running_search_without_blocking_it(killed_run):
    run, seen = killed_run
    status = seen["status"]
    assert status.returncode == 0, status.stderr
    assert f"{run}  circle-packing-26  mutate  running" in status.stdout
    assert "now: " in status.stdout and re.search(r"^node \d+ <- \d+  round \d", status.stdout, re.M)
    assert seen["status_s"] < 10
    line = next(ln for ln in seen["runs"].stdout.splitlines() if ln.startswith("live "))
    assert line.split()[1:4] == ["circle-packing-26", "mutate", "running"], line


def test_the_report_and_summary_are_written_while_the_search_runs(killed_run):
    _, seen = killed_run
    assert "running · written" in seen["report"] and 'http-equiv="refresh"' in seen["report"]
    assert seen["summary"]["running"] is True and seen["summary"]["evals"] >= 2


def test_a_killed_run_is_listed_as_killed_and_still_gets_a_report(killed_run, tmp_path, capsys):
    run, _ = killed_run
    assert main(["runs", str(run.parent)]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("live "))
    assert line.split()[3] == "killed", line
    out = tmp_path / "elsewhere" / "r.html"
    assert main(["report", str(run), "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    page = out.read_text()
    assert page.count('class="node"') == len(Store.open_readonly(run).load_state().nodes)
    assert "killed before it finished" in page and "refresh" not in page


def test_export_reads_a_run_that_another_process_holds(killed_run, tmp_path, capsys):
    run, _ = killed_run
    with Store.open(run, create=False):  # a search holds the lock
        assert main(["status", str(run)]) == 0
        assert "running" in capsys.readouterr().out
        assert main(["rollouts", "export", str(run), "--out", str(tmp_path / "d")]) in (0, 2)
        assert "in use by process" not in capsys.readouterr().err


def test_runs_on_a_folder_without_runs_says_so(tmp_path, capsys):
    assert main(["runs", str(tmp_path)]) == 1
    assert "no runs in" in capsys.readouterr().err


def test_status_of_a_folder_without_a_run_names_it(tmp_path, capsys):
    assert main(["status", str(tmp_path)]) == 2
    assert f"no run store at {tmp_path / 'arts.db'}" in capsys.readouterr().err


def test_reading_a_run_does_not_make_it_look_recent(killed_run, capsys):
    run, _ = killed_run
    old = time.time() - 7200
    for p in run.glob("arts.*"):
        os.utime(p, (old, old))
    for _ in range(2):  # the first read's -shm and WAL touches must not count for the second
        assert main(["runs", str(run.parent)]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("live "))
    assert line.split()[-1] == "2h", line


def test_status_counts_a_live_runs_wall_time_up_to_now(killed_run, capsys):
    run, _ = killed_run
    with Store.open_readonly(run) as store:
        stored = float(store.load_state().meta.get("wall_s", 0.0))  # written as each round ends
    time.sleep(1.5)
    with Store.open(run, create=False):  # the run is live again: its wall keeps counting
        assert main(["status", str(run)]) == 0
    wall = int(re.search(r"wall (\d+)s", capsys.readouterr().out).group(1))
    assert wall >= stored + 1


def test_runs_names_a_user_task_by_its_name_not_its_folder(tmp_path, capsys):
    from tests.doubles import make_task

    task = make_task(tmp_path / "mytask")
    argv = [
        "search",
        str(task),
        "--method",
        "mutate",
        "--evals",
        "2",
        "--run-dir",
        str(tmp_path / "runs" / "r"),
    ]
    assert main([*argv, "-q"]) == 0
    capsys.readouterr()
    assert main(["runs", str(tmp_path / "runs")]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("r "))
    assert line.split()[1] == "toy-quadratic", line
