import random
from collections import Counter

from arts.policy.sampler import draw, normalise


def test_normalise_makes_a_distribution_and_survives_nonsense():
    assert normalise([2, 2, 4]) == [0.25, 0.25, 0.5]
    assert normalise([0, 0]) == [0.5, 0.5]
    assert normalise([float("nan"), -1, 1]) == [0.0, 0.0, 1.0]


def test_draws_follow_stated_probabilities():
    rng = random.Random(0)
    counts = Counter(draw([0.7, 0.2, 0.1], 1, rng)[0].index for _ in range(4000))
    assert abs(counts[0] / 4000 - 0.7) < 0.03
    assert abs(counts[2] / 4000 - 0.1) < 0.02


def test_group_draws_are_distinct_while_candidates_last():
    picks = draw([0.5, 0.3, 0.1, 0.1], 4, random.Random(1))
    assert sorted(d.index for d in picks) == [0, 1, 2, 3]
    assert len(draw([0.5, 0.5], 5, random.Random(1))) == 5


def test_tail_draw_only_picks_low_probability_candidates():
    rng = random.Random(2)
    for _ in range(200):
        (d,) = draw([0.6, 0.2, 0.1, 0.1], 1, rng, tail_threshold=0.25)
        assert d.index != 0 and d.tail


def test_tail_draw_falls_back_to_whole_list_when_nothing_is_below_threshold():
    (d,) = draw([0.5, 0.5], 1, random.Random(3), tail_threshold=0.1)
    assert not d.tail


def test_the_tail_is_the_stated_one_so_a_tilt_cannot_push_a_favoured_move_out_of_it():
    """Past the tail depth, the candidates stated below the threshold are eligible; an adapter's tilt then
    weighs them. Read from the tilted weights instead, the tail would hold exactly the moves the adapter
    disfavours (seen live: a move tilted x4 was never drawn again for eight rounds)."""
    stated = [0.2] * 5  # a 135M list: every candidate alike, all in the tail
    tilted = [8.0, 0.2, 0.2, 0.2, 0.2]  # the adapter favours the first
    rng = random.Random(0)
    drawn = [draw(tilted, 1, rng, tail_threshold=0.25, stated=stated)[0] for _ in range(400)]
    assert all(d.tail for d in drawn)
    assert sum(d.index == 0 for d in drawn) > 300  # its tilted share, 8 / 8.8
    assert all(d.index != 0 for d in (draw(tilted, 1, rng, tail_threshold=0.25)[0] for _ in range(100)))
    stated = [0.6, 0.1, 0.1, 0.1, 0.1]  # stated above the threshold: out of the tail, whatever the tilt
    assert all(draw(tilted, 1, rng, tail_threshold=0.25, stated=stated)[0].index != 0 for _ in range(100))
