"""The report from a hand-made store: the harness's own words stay as written, the model's are grounded;
the tree, the curves and the diffs show what happened (the browser test checks the page renders)."""

from __future__ import annotations

import re

from arts.search.report.html import render_report
from arts.search.report.plots import ticks
from arts.search.state import Event, Insight, Node, Observation, SearchState

SEED = "MARGIN = 0.01\ndef pack():\n    return MARGIN\n"


def state() -> SearchState:
    child = SEED.replace("0.01", "0.02")
    reason = "evaluator: circles 0 and 8 overlap by 0.488 (tolerance 1e-09) at line 21"
    nodes = {
        1: Node(id=1, status="seed", score=0.5, raw_score=0.5, files={"solution.py": SEED}),
        2: Node(id=2, parent=1, round=1, status="valid", score=0.75, raw_score=0.75, files={"solution.py": child},
                hypothesis="increase MARGIN"),
        3: Node(id=3, parent=2, round=2, status="invalid", reason=reason, files={"solution.py": child + "x\n"},
                hypothesis='{"start": "21 | d = 1"}'),
    }  # fmt: skip
    return SearchState(
        nodes=nodes,
        insights={
            1: Insight(id=1, kind="memory", node=3, text=f'mutation: {{"start": "21 | d = 1"}} -> invalid ({reason})'),
            2: Insight(id=2, kind="audit", text="weakness: accuracy reached 0.93 with 17 layers"),
        },
        observations={1: Observation(id=1, source="execution", node=3, text="changing d broke the program (line 21)")},
        events={1: Event(id=1, kind="eval", payload={"valid": True, "score": 0.75}),
                2: Event(id=2, kind="eval", payload={"valid": False, "score": None}),
                3: Event(id=3, kind="update", payload={"k": 1, "round": 2, "reward_mean": 0.5, "kl": 0.002,
                                                       "loss": 0.1, "clip_fraction": 0.1, "grad_norm": 1.5})},
        meta={"round": 2, "isolation": "bwrap+uid"},
    )  # fmt: skip


def test_harness_text_keeps_its_numbers_and_model_text_is_grounded():
    page = render_report(state(), None, "t")
    assert "tolerance 1e-09) at line 21" in page and "(line 21)" in page and "21 | d = 1" in page
    assert "accuracy reached [unmeasured] with [unmeasured] layers" in page
    assert page.count("[unmeasured]") == 2


def test_tree_curves_diffs_updates_and_sandbox_are_drawn():
    page = render_report(state(), None, "t")
    assert len(re.findall(r'<g class="node" data-node="\d+" data-status="(\w+)"', page)) == 3
    assert 'data-status="invalid"' in page and 'data-verdict="invalid"' in page  # the failed node is visible
    assert page.count('class="chart"') == 2  # best so far x2; one TTT update is said, not charted
    assert page.count('class="figure"') == 2 and "KL to the base</b>: KL to the base 0.002" in page
    assert "evaluations (0: the seed)" in page and "seconds since the start" in page
    assert (
        '<span class="del">-MARGIN = 0.01</span>' in page
        and '<span class="add">+MARGIN = 0.02</span>' in page
    )
    assert 'id="node-3"' in page and 'href="#node-3"' in page  # a tree node opens its panel
    assert "<b>sandbox</b> bwrap+uid" in page and "<td>0.002</td>" in page
    assert "in progress" in page and "http" not in page.replace("http-equiv", "")


def test_ticks_cover_the_data_with_round_steps():
    assert ticks(0.97, 1.25) == [0.9, 1.0, 1.1, 1.2, 1.3]
    assert ticks(1, 2, integer=True) == [1, 2]
    t = ticks(-3.3, 17.2)
    assert t[0] <= -3.3 and t[-1] >= 17.2 and len(t) <= 8


def test_a_one_round_run_records_its_sandbox(tmp_path):
    from arts.search.cli.main import main

    run = tmp_path / "run"
    argv = ["search", "circle-packing-26", "--method", "mutate", "--evals", "1", "--run-dir", str(run), "-q"]
    assert main(argv) in (0, 1)  # 1: the one mutation may be invalid, which is not the point here
    page = (run / "report.html").read_text()
    assert "<b>sandbox</b> not recorded" not in page and "<b>sandbox</b> " in page
