import math

import pytest
from pydantic import ValidationError

from arts.rewards import (
    RewardConfig,
    compute_reward,
    get_reward,
    group_advantages,
    group_rewards,
    is_degenerate,
    reward_names,
)
from arts.rewards.functions import best_only, percentile, rank, raw
from arts.rewards.parent import beats_parent, gain_sign, improvement

CFG = RewardConfig()


def test_config_defaults_and_checks():
    assert (CFG.name, CFG.q, CFG.invalid, CFG.empty_history, CFG.clip) == (
        "beats_parent",
        0.7,
        0.0,
        1.0,
        None,
    )
    for bad in ({"q": 1.0}, {"q": 0.0}, {"typo": 1}, {"clip": 0.0}, {"invalid": math.nan}):
        with pytest.raises(ValidationError):
            RewardConfig(**bad)


def test_percentile_hand_computed():
    hist = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0]  # 70th pct (linear) = 8.0 exactly
    assert percentile(8.0, hist, config=CFG) == 1.0  # tie at the threshold is rewarded
    assert percentile(7.99, hist, config=CFG) == 0.0
    assert percentile(100.0, hist, config=CFG) == 1.0
    assert percentile(1.75, [1.0, 2.0], config=CFG) == 1.0  # threshold 1.7, interpolated
    assert percentile(1.65, [1.0, 2.0], config=CFG) == 0.0
    assert percentile(5.0, hist, config=RewardConfig(q=0.3)) == 1.0  # 30th pct = 4.0


def test_percentile_threshold_rises_with_the_search():
    early, late = [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0, 6.0, 7.0, 8.0, 9.0]
    assert percentile(5.0, early, config=CFG) == 1.0  # threshold 3.1
    assert percentile(5.0, late, config=CFG) == 0.0  # threshold 7.3


def test_invalid_and_empty_history_for_every_function():
    cfg = RewardConfig(invalid=-1.0, empty_history=0.5)
    for fn in (percentile, best_only, raw, rank, improvement, beats_parent):
        assert fn(None, [1.0, 2.0], parent_score=1.0, config=cfg) == -1.0
        assert fn(math.nan, [1.0, 2.0], parent_score=1.0, config=cfg) == -1.0
    for fn in (percentile, best_only, raw, rank):
        assert fn(3.0, [], config=cfg) == 0.5
        assert fn(3.0, [None, math.inf], config=cfg) == 0.5  # only invalid entries: empty
    assert percentile(3.0, [], config=CFG) == 1.0  # default: the first valid result is a success


def test_beats_parent_rewards_the_move_not_where_it_was_made():
    """A move that changes nothing off the best node is not rewarded, a move that pays off a weak parent
    is, wherever the history stands."""
    hist = [1.0, 5.0, 9.0]
    assert beats_parent(9.0, hist, parent_score=9.0, config=CFG) == 0.0  # a tie: the move changed nothing
    assert percentile(9.0, hist, config=CFG) == 1.0  # while a history bar rewards it
    assert beats_parent(2.0, hist, parent_score=1.0, config=CFG) == 1.0  # paid, far below the history
    assert beats_parent(8.0, hist, parent_score=9.0, config=CFG) == 0.0
    assert beats_parent(3.0, [], parent_score=None, config=CFG) == 0.0  # no parent to beat


def test_gain_sign_counts_harm_apart_from_a_tie():
    """A round of moves that all failed to pay still ranks them: the harmful below the idle."""
    assert gain_sign(2.0, [], parent_score=1.0, config=CFG) == 1.0
    assert gain_sign(1.0, [], parent_score=1.0, config=CFG) == 0.0
    assert gain_sign(0.5, [], parent_score=1.0, config=CFG) == -1.0
    assert gain_sign(None, [], parent_score=1.0, config=RewardConfig(invalid=-1.0)) == -1.0
    assert gain_sign(3.0, [], parent_score=None, config=CFG) == 0.0
    assert not is_degenerate([gain_sign(s, [], parent_score=1.0, config=CFG) for s in (1.0, 1.0, 0.2, 0.9)])


def test_best_only():
    assert best_only(3.0, [1.0, 2.0], config=CFG) == 1.0
    assert best_only(2.0, [1.0, 2.0], config=CFG) == 0.0  # a tie is not a new best
    assert best_only(1.5, [1.0, 2.0], config=CFG) == 0.0


def test_raw():
    assert raw(2.0, [0.0, 4.0], config=CFG) == 0.5
    assert raw(8.0, [0.0, 4.0], config=CFG) == 1.0
    assert raw(-4.0, [0.0, 4.0], config=CFG) == 0.0
    assert raw(3.0, [3.0, 3.0], config=CFG) == 1.0  # zero range: ties the best


def test_rank():
    assert rank(2.5, [1.0, 2.0, 3.0, 4.0], config=CFG) == 0.5
    assert rank(3.0, [1.0, 2.0, 3.0, 4.0], config=CFG) == 0.5  # ties do not count
    assert rank(0.0, [1.0, 2.0], config=CFG) == 0.0
    assert rank(9.0, [1.0, 2.0], config=CFG) == 1.0


def test_improvement():
    assert improvement(3.0, [], parent_score=1.0, config=CFG) == 2.0
    assert improvement(1.0, [], parent_score=3.0, config=CFG) == -2.0
    assert improvement(3.0, [], parent_score=None, config=CFG) == 0.0  # root or invalid parent
    clipped = RewardConfig(clip=0.5)
    assert improvement(3.0, [], parent_score=1.0, config=clipped) == 0.5
    assert improvement(1.0, [], parent_score=3.0, config=clipped) == -0.5


def test_registry_lookup_by_name():
    assert reward_names() == [
        "beats_parent",
        "best_only",
        "gain_sign",
        "improvement",
        "percentile",
        "rank",
        "raw",
    ]
    assert get_reward("percentile") is percentile
    assert compute_reward(3.0, [1.0, 2.0], config=RewardConfig(name="rank")) == 1.0
    assert group_rewards([3.0, None, 0.0], [1.0, 2.0], config=RewardConfig(name="percentile")) == [
        1.0,
        0.0,
        0.0,
    ]
    assert group_rewards([3.0, None, 0.0], [1.0, 2.0], parent_scores=[2.0, 2.0, 2.0], config=CFG) == [
        1.0,
        0.0,
        0.0,
    ]
    assert group_rewards(
        [3.0, 0.0], [], parent_scores=[1.0, None], config=RewardConfig(name="improvement")
    ) == [
        2.0,
        0.0,
    ]


def test_module_attr_fallback(tmp_path, monkeypatch):
    assert get_reward("arts.rewards.functions:raw") is raw
    (tmp_path / "my_rewards.py").write_text(
        "def double(score, history, *, parent_score=None, config):\n    return 2.0 * (score or 0.0)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = RewardConfig(name="my_rewards:double")
    assert compute_reward(1.5, [], config=cfg) == 3.0


def test_unknown_name_lists_known_names():
    with pytest.raises(
        KeyError, match="known: beats_parent, best_only, gain_sign, improvement, percentile, rank, raw"
    ):
        get_reward("percentil")
    with pytest.raises(KeyError, match="cannot import"):
        get_reward("no_such_module_xyz:fn")
    with pytest.raises(ValidationError, match="known: beats_parent"):
        RewardConfig(name="percentil")


def test_advantages_sum_to_zero():
    adv = group_advantages([1.0, 0.0, 0.0, 1.0, 1.0])
    assert sum(adv) == pytest.approx(0.0, abs=1e-9)
    assert adv[0] > 0 > adv[1]
    assert group_advantages([1.0, 0.0]) == pytest.approx([1.0, -1.0], abs=1e-5)  # mean .5, std .5


def test_degenerate_group_gives_zeros():
    assert is_degenerate([1.0, 1.0, 1.0]) and is_degenerate([0.3]) and is_degenerate([])
    assert not is_degenerate([0.0, 1.0])
    assert group_advantages([1.0, 1.0, 1.0]) == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="finite"):
        group_advantages([1.0, math.nan])
