"""The console of `arts search`: phases shown live with their seconds, the model's words only under -v,
quiet mode, and everything in arts.log at every level."""

from __future__ import annotations

import io
import re
import time

from arts.search.console import Console, drawn_line


def test_a_phase_is_shown_live_with_its_seconds_and_lines_print_above_it(tmp_path):
    out = io.StringIO()
    c = Console(0, stream=out, live=True)
    c.attach(tmp_path)
    c.phase("propose", 3)
    time.sleep(1.2)  # a long model call: the live line refreshes twice a second
    c("round 3  node 7 <- 5  1.25")
    c.close()
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())  # without the terminal's escapes
    assert "[bold]" not in text and "round 3: propose" in text and "round 3  node 7 <- 5  1.25" in text
    assert "propose  1s" in text or "propose  2s" in text, text[-400:]


def test_quiet_default_and_verbose_levels(tmp_path):
    shown = {}
    for level in (-1, 0, 1):
        out = io.StringIO()
        run_dir = tmp_path / str(level)
        run_dir.mkdir()
        c = Console(level, stream=out, live=False)
        c.attach(run_dir)
        c.phase("execute 1/2", 1)
        c("round 1  node 2 <- 1  0.5")
        c.said("The error is at the error level.")
        c.result("best 0.5")
        c.close()
        shown[level] = out.getvalue()
        log = (run_dir / "arts.log").read_text()  # the log has everything at every level
        assert "phase round 1: execute 1/2" in log and "model: The error is at the error level." in log
        assert "node 2 <- 1" in log and "best 0.5" in log
    assert shown[-1] == "best 0.5\n"
    assert "node 2" in shown[0] and "error level" not in shown[0] and "best 0.5" in shown[0]
    assert "model: The error is at the error level." in shown[1] and "[round 1: execute 1/2]" in shown[1]


def test_nothing_is_written_before_the_run_makes_its_folder(tmp_path):
    c = Console(-1, stream=io.StringIO(), live=False)
    c.attach(tmp_path / "run")
    c("run: starting")
    assert not (tmp_path / "run").exists()  # a start that fails here leaves no folder
    (tmp_path / "run").mkdir()
    c("seed: 0.9")
    c.close()
    lines = (tmp_path / "run" / "arts.log").read_text().splitlines()
    assert [ln.split("s  ", 1)[1] for ln in lines] == ["run: starting", "seed: 0.9"]  # the earlier line kept
    assert re.match(r"\d\d:\d\d:\d\d +\d+\.\ds  run: starting", lines[0]), lines[0]


def test_drawn_actions_show_what_the_grammar_forced():
    from arts.policy.candidates import Candidate

    drawn = [(Candidate(parent=4, hypothesis="increase MARGIN: the error is at the error level", probability=0.5), 0.5),
             (Candidate(parent=4, hypothesis="A free idea", axis="layout", probability=0.2), 0.25)]  # fmt: skip
    line = drawn_line(2, drawn)
    assert line == "round 2: drew increase MARGIN on node 4 (p=0.50); layout hypothesis on node 4 (p=0.25)"
