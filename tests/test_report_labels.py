"""What the report says of a node at a glance: its move from the hypothesis, its verdict against the seed
in the task's direction, and the model's free text collapsed and marked (`search.report.labels`)."""

from __future__ import annotations

import re

from arts.search.report.html import render_report
from arts.search.report.labels import move_label, verdict
from arts.search.report.plots import Series, line_chart
from tests.doubles import minimise_state


def test_move_labels_name_the_verb_and_the_target():
    assert move_label("increase MARGIN to spread the circles") == "increase MARGIN"
    assert move_label("Try to decrease lr.scale#2 a bit") == "decrease lr.scale#2"
    assert move_label('{"name":"DEGREE","op":"set_constant","value":3}') == "set DEGREE = 3"
    assert (
        move_label('{"call":"LinearRegression","op":"swap_call","to":"Ridge"}')
        == "swap LinearRegression → Ridge"
    )
    assert (
        move_label('{"call":"Ridge","op":"set_keyword","keyword":"alpha","value":"0.1"}')
        == "tune Ridge alpha=0.1"
    )
    assert move_label("") == "seed" and move_label("random mutation") == "random mutation"
    assert len(move_label("a very long free hypothesis " * 5)) <= 30


def test_a_worse_node_on_a_minimise_task_is_worse_not_green():
    s = minimise_state()
    assert [verdict(s.nodes[i], s.nodes[1]) for i in (1, 2, 3, 4)] == ["seed", "worse", "better", "invalid"]
    page = render_report(s, None, "t")
    fill = re.search(
        r'data-node="2"[^>]*data-verdict="worse">.*?<circle class="dot"[^>]*fill="#(\w{6})"', page
    )
    r, g, _ = (int(fill.group(1)[i : i + 2], 16) for i in (0, 2, 4))
    assert r > g, f"a worse node is drawn #{fill.group(1)}"
    assert '<td class="r-worse">4.96</td>' in page and '<td class="r-better">2.61</td>' in page
    assert "lower is better" in page


def test_tree_nodes_are_labelled_and_each_has_a_panel():
    page = render_report(minimise_state(), None, "t")
    assert re.search(r'data-node="2".*?<tspan font-weight="bold">2</tspan> <tspan class="score">4.96</tspan> '
                     r'<tspan class="move">increase DEGREE</tspan>', page)  # fmt: skip
    panel = page[page.index('id="node-2"') : page.index('id="node-3"')]
    assert "worse than the seed" in panel and "increase DEGREE to fit curvature" in panel
    assert '<span class="add">+DEGREE = 3</span>' in panel and "<td>rmse</td><td>4.96</td>" in panel
    assert 'class="node-panel open" id="node-3"' in page  # the best node's panel starts open


def test_model_free_text_is_collapsed_and_marked():
    page = render_report(minimise_state(), None, "t")
    for title in ("Audit notes", "Memory (what each node showed)"):
        block = page[page.index(title) - 120 : page.index(title) + 120]
        assert (
            '<details class="model">' in block and "model-written" in block and "<details open" not in block
        )


def test_a_chart_of_one_point_is_said_not_drawn_and_a_flat_one_keeps_a_tight_axis():
    one = line_chart([Series("KL to the base", [(1.0, 0.0)])], "update", "KL to the base", integer_x=True)
    assert "<svg" not in one and "KL to the base 0" in one and "one point" in one
    flat = line_chart([Series("s", [(1.0, 0.5), (2.0, 0.5)])], "update", "reward", integer_x=True)
    labels = [float(t) for t in re.findall(r'text-anchor="end">([-\d.e]+)</text>', flat)]
    assert min(labels) >= 0.4 and max(labels) <= 0.6, labels
    zero = line_chart([Series("kl", [(1.0, 0.0), (2.0, 0.0)])], "update", "KL", integer_x=True)
    labels = [float(t) for t in re.findall(r'text-anchor="end">([-\d.e]+)</text>', zero)]
    assert -0.1 <= min(labels) and max(labels) <= 0.1, labels
