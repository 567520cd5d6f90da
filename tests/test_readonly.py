"""tasks.readonly: the allow-list, path and option refusals, and reading a tiny case in the sandbox."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from arts.tasks.base import Task
from arts.tasks.readonly import ReadonlyError, check_argv, grep_lines, read_lines, run_readonly
from tests.doubles import SECRET, make_case


@pytest.fixture
def case(tmp_path: Path) -> Task:
    return make_case(tmp_path)


@pytest.mark.parametrize(
    "argv", [["rm", "-rf", "."], ["python", "-c", "1"], ["sh", "-c", "ls"], ["sed", "p"], []]
)
def test_commands_off_the_allow_list_are_refused(case, tmp_path, argv):
    with pytest.raises(ReadonlyError, match="not a read-only command"):
        run_readonly(case, argv, tmp_path / "work")


@pytest.mark.parametrize(
    "argv",
    [
        ["sort", "-o", "out.txt", "incidents/i1/logs.txt"],
        ["sort", "-ro", "out.txt", "incidents/i1/logs.txt"],
        ["sort", "--output=out.txt", "incidents/i1/logs.txt"],
        ["sort", "--compress-program=sh", "incidents/i1/logs.txt"],
        ["sort", "-T", ".", "incidents/i1/logs.txt"],
        ["grep", "-f", "incidents/i1/logs.txt", "incidents/i1/logs.txt"],
        ["grep", "-R", "db", "."],
        ["tail", "-f", "incidents/i1/logs.txt"],
        ["uniq", "incidents/i1/logs.txt", "out.txt"],
    ],
)
def test_options_that_write_run_programs_or_hang_are_refused(case, tmp_path, argv):
    with pytest.raises(ReadonlyError, match="allowed options"):
        run_readonly(case, argv, tmp_path / "work")
    assert not (tmp_path / "work" / "out.txt").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["cat", "/etc/passwd"],
        ["cat", "../case/grader/truth.txt"],
        ["head", "-n", "3", "incidents/../../case/grader/truth.txt"],
        ["grep", "-e", "db", "--", "/etc/hostname"],
        ["grep", "db", ".."],
        ["ls", "/"],
    ],
)
def test_paths_that_leave_the_working_copy_are_refused(case, tmp_path, argv):
    with pytest.raises(ReadonlyError, match="leaves the working copy"):
        run_readonly(case, argv, tmp_path / "work")


def test_a_link_out_of_the_working_copy_is_refused(case, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    os.symlink(case.root, work / "out")
    with pytest.raises(ReadonlyError, match="leaves the working copy"):
        run_readonly(case, ["cat", "out/grader/truth.txt"], work)


def test_a_pattern_is_not_taken_for_a_path(tmp_path):
    path = check_argv(["grep", "-c", "/var/lib", "incidents/i1/logs.txt"], tmp_path)
    assert os.path.isabs(path) and path.endswith("grep")


def test_grep_and_head_read_the_case(case, tmp_path):
    work = tmp_path / "work"
    grep = run_readonly(case, ["grep", "-c", "ERROR", "incidents/i1/logs.txt"], work)
    assert (grep.returncode, grep.output.strip(), grep.truncated) == (0, "2", False)
    head = run_readonly(case, ["head", "-n", "2", "incidents/i1/metrics.csv"], work)
    assert head.output == "ts,service,latency_ms\n10:00,api,40\n" and head.wall_s >= 0
    counted = run_readonly(case, ["cut", "-d", ",", "-f", "2", "incidents/i1/metrics.csv"], work)
    assert counted.output.split() == ["service", "api", "api", "db"]
    assert run_readonly(case, ["grep", "nothing-here", "incidents/i1/logs.txt"], work).returncode == 1


def test_hidden_files_are_not_reachable(case, tmp_path):
    work = tmp_path / "work"
    (work / "grader").mkdir(parents=True)
    (work / "grader" / "truth.txt").write_text(SECRET)  # left by a test-split run: removed before reading
    listing = run_readonly(case, ["ls", "-R"], work).output
    assert "incidents" in listing and "grader" not in listing and "truth" not in listing
    cat = run_readonly(case, ["cat", "grader/truth.txt"], work)
    assert cat.returncode != 0 and "disk_full" not in cat.output
    assert run_readonly(case, ["grep", "-r", "fault=", "."], work).returncode == 1


def test_long_output_is_cut_and_says_so(tmp_path):
    task = make_case(tmp_path, {"incidents/i1/big.txt": "".join(f"line {i}\n" for i in range(5000))})
    short = run_readonly(task, ["head", "-n", "300", "incidents/i1/big.txt"], tmp_path / "w", max_output=500)
    assert short.truncated and short.output.startswith("line 0\n") and "more characters]" in short.output
    assert len(short.output) < 560
    full = run_readonly(task, ["cat", "incidents/i1/big.txt"], tmp_path / "w", max_output=500)
    assert full.truncated and full.output.startswith("[... the start") and full.output.endswith("line 4999\n")


def test_read_lines_and_grep_lines_number_the_lines(case, tmp_path):
    work = tmp_path / "work"
    assert read_lines(case, work, "incidents/i1/logs.txt", 3, count=2).splitlines() == [
        "3: 10:01 db ERROR disk full on /var/lib/db",
        "4: 10:02 api ERROR timeout calling db",
    ]
    assert "fewer than 40 lines" in read_lines(case, work, "incidents/i1/logs.txt", 40)
    assert grep_lines(case, work, "error", "incidents/i1/logs.txt").splitlines()[0].startswith("3: 10:01 db")
    assert "no line" in grep_lines(case, work, "zzz", "incidents/i1/logs.txt")
    with pytest.raises(ReadonlyError):
        read_lines(case, work, "/etc/passwd", 1)


def test_read_lines_far_into_a_long_file(tmp_path):
    # 3000 long lines: far more than the sandbox's 20 KB tail, so grep's own numbering finds the lines
    task = make_case(tmp_path, {"incidents/i1/big.txt": "".join(f"{i} {'x' * 40}\n" for i in range(1, 3001))})
    lines = read_lines(task, tmp_path / "work", "incidents/i1/big.txt", 2500).splitlines()
    assert len(lines) == 20 and lines[0].startswith("2500: 2500 x") and lines[-1].startswith("2519: 2519 x")
