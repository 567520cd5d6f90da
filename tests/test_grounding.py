"""Grounded text: numbers as written, the sanitizer and its tolerance edges, and method claims against code."""

from __future__ import annotations

import pytest

from arts.search.report.grounding import (
    REDACTED,
    UNSUPPORTED,
    claimed_methods,
    ground,
    measured_values,
    numbers,
    sanitize,
    unsupported_claims,
)
from arts.search.state import Event, Node, SearchState


def values_of(text: str) -> list[tuple[float, str]]:
    return [(s.value, s.unit) for s in numbers(text)]


def test_numbers_are_read_as_written():
    text = "13,365,000 steps, 4.5x faster, 12% fewer, lr 1.2e-3, loss -0.5, score 0.97976."
    assert values_of(text) == [(13365000, ""), (4.5, "x"), (12, "%"), (0.0012, ""), (-0.5, ""), (0.97976, "")]
    spans = numbers("took 4.5x")
    assert spans[0].text == "4.5" and "took 4.5x"[spans[0].start : spans[0].end] == "4.5"


def test_digits_inside_names_and_identifiers_are_not_numbers():
    assert numbers("i3 x2 SmolLM2 SmolLM2-135M CIFAR-10 GPT-2 v1.2.3 conv2d 2x2 3rd") == []


def test_ranges_lists_and_hyphens_are_read_apart():
    assert values_of("nodes 3-5") == [(3, ""), (5, "")]
    assert values_of("ids 1,2,3") == [(1, ""), (2, ""), (3, "")]
    assert values_of("a 5-fold split, ran 12s") == [(5, ""), (12, "s")]


def test_sanitize_keeps_measured_numbers_and_redacts_the_rest():
    out = sanitize(
        "13,365,000 steps at 0.97976, 4.5x faster, 7 nodes, 0.93 accuracy", [13365000, 0.979761, 4.5, 7]
    )
    assert out.text == f"13,365,000 steps at 0.97976, 4.5x faster, 7 nodes, {REDACTED} accuracy"
    assert out.redacted == ["0.93"]
    assert sanitize("a 3.2x speed-up", [4.5]).text == f"a {REDACTED}x speed-up"


def test_a_percentage_matches_the_value_or_its_hundredth():
    assert sanitize("accuracy 12%", [12.0]).redacted == []
    assert sanitize("accuracy 12%", [0.12]).redacted == []
    assert sanitize("accuracy 12 %", [0.3]).text == f"accuracy {REDACTED} %"
    assert sanitize("12 nodes", [0.12]).redacted == ["12"]  # only a written % may be read as a fraction


def test_tolerance_edges_are_one_percent_of_the_measured_value():
    measured = [100.0, -2.0]
    assert sanitize("100.9 and 99.1", measured).redacted == []
    assert sanitize("101.1 and 98.9", measured).redacted == ["101.1", "98.9"]
    assert sanitize("-2.018", measured).redacted == [] and sanitize("-2.022", measured).redacted == ["-2.022"]
    assert sanitize("2", measured).redacted == ["2"]  # the sign is part of the number
    assert sanitize("0 and 0.0", [0.0]).redacted == [] and sanitize("0.0001", [0.0]).redacted == ["0.0001"]
    assert sanitize("100.5", measured, rel_tol=0).redacted == ["100.5"]
    with pytest.raises(ValueError, match="rel_tol"):
        sanitize("1", [1.0], rel_tol=1.5)


def test_measured_values_come_from_nodes_counts_and_measured_events():
    s = SearchState(
        nodes={
            1: Node(id=1, status="seed", score=0.5, raw_score=0.5, eval_s=1.25),
            2: Node(
                id=2, parent=1, round=3, status="valid", score=-0.25, raw_score=0.25, metrics={"acc": 0.875}
            ),
            5: Node(id=5, parent=1, round=3, status="invalid"),
        },
        events={
            1: Event(id=1, kind="eval", payload={"score": 0.25, "wall_s": 2.5, "valid": True}),
            2: Event(id=2, kind="draw", payload={"candidates": [{"probability": 0.333}]}),
        },
    )
    vals = set(measured_values(s))
    assert {0.5, 0.25, -0.25, 1.25, 0.875, 2.5, 3.0, 5.0} <= vals  # scores, metric, seconds, round, id
    assert {3.0, 2.0, 1.0} <= vals  # nodes, nodes without the seed, valid nodes
    assert 0.333 not in vals  # a model-stated probability is not a measurement
    text = "node 2 reached 0.25 in 2.5 s, acc 87.5%, 3 nodes; then 0.99"
    assert sanitize(text, vals).redacted == ["0.99"]


def test_methods_are_found_by_alias_and_negation_is_respected():
    text = "We used sklearn's random forests and a 2-layer LSTM on MNIST, without XGBoost."
    assert claimed_methods(text) == {"scikit-learn", "random forest", "LSTM", "MNIST"}
    assert claimed_methods("Gradient-boosted trees in PyTorch") == {"gradient boosting", "pytorch"}
    assert claimed_methods("a simple heuristic, no learning at all") == set()


def test_claimed_and_present_passes_claimed_and_absent_is_reported():
    code = "from sklearn.ensemble import RandomForestRegressor\nimport numpy as np\n"
    assert unsupported_claims("A random forest in scikit-learn with numpy", code) == []
    assert unsupported_claims("A random forest and an LSTM trained on CIFAR-10", code) == ["CIFAR", "LSTM"]
    # an alias claim is met by any of its signatures: gradient boosting by xgboost
    assert unsupported_claims("gradient boosting did best", "import xgboost as xgb") == []
    assert unsupported_claims("gradient boosting did best", code) == ["gradient boosting"]


def test_ground_redacts_numbers_and_marks_each_unsupported_mention():
    code = "import numpy as np\nw = np.linalg.lstsq(X, y)[0]\n"
    out = ground(
        "The transformer reached 0.91 (node 4); the transformer beat least squares.", [4.0, 0.5], code
    )
    assert out.unsupported == ["transformer"] and out.redacted == ["0.91"]
    assert out.text == (
        f"The transformer{UNSUPPORTED} reached {REDACTED} (node 4); "
        f"the transformer{UNSUPPORTED} beat least squares."
    )
    clean = ground("least squares on node 4", [4.0], code)
    assert clean.text == "least squares on node 4" and clean.unsupported == [] and clean.redacted == []
