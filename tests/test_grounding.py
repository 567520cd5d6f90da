"""Grounded text: numbers as written, and method claims against code (numbers against the store: test_claims)."""

from __future__ import annotations

from arts.search.report.grounding import (
    UNSUPPORTED,
    Sanitized,
    claimed_methods,
    mark_methods,
    numbers,
    unsupported_claims,
)


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


def test_each_unsupported_mention_is_marked_in_place():
    code = "import numpy as np\nw = np.linalg.lstsq(X, y)[0]\n"
    out = mark_methods(Sanitized(text="The transformer (node 4); the transformer beat least squares."), code)
    assert out.unsupported == ["transformer"]
    assert (
        out.text == f"The transformer{UNSUPPORTED} (node 4); the transformer{UNSUPPORTED} beat least squares."
    )
    clean = mark_methods(Sanitized(text="least squares on node 4"), code)
    assert clean.text == "least squares on node 4" and clean.unsupported == []
