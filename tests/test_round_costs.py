"""scripts/round_costs.py: each gap between events charged to the step that ends it."""

from __future__ import annotations

from tests.doubles import load_script


def load():
    return load_script("round_costs")


def test_each_gap_is_charged_to_the_event_that_ends_it():
    events = [(0.0, "round_start", None), (5.0, "usage", "propose"), (6.0, "draw", None),
              (16.0, "watch", None), (20.0, "update", None), (21.0, "usage", "propose")]  # fmt: skip
    seconds, count, span = load().costs(events)
    assert span == 21.0 and seconds["watch"] == 10.0 and seconds["usage:propose"] == 6.0
    assert count["usage:propose"] == 2 and sum(seconds.values()) == span
    assert load().costs([]) == ({}, {}, 0.0)
