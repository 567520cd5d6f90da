"""`--report-to`: a run's figures reach the tracker, through the `arts search` command."""

from __future__ import annotations

import pytest

from arts.search.cli.main import main
from arts.search.report.trackers import Reporting
from arts.search.state import Event, Node, SearchState
from tests.doubles import SEEN


def test_a_search_sends_its_figures_each_round_and_closes(tmp_path):
    SEEN.clear()
    argv = ["search", "circle-packing-26", "--method", "mutate", "--evals", "4", "--group", "2",
            "--run-dir", str(tmp_path / "run"), "-q", "--report-to", "tests.doubles:Recorder"]  # fmt: skip
    assert main(argv) == 0
    assert SEEN[0] == ("init", {"task": "circle-packing-26"}, 0) and SEEN[-1][0] == "close"
    logs = [(m, step) for kind, m, step in SEEN if kind == "log"]
    assert [step for _, step in logs] == [1, 2]  # one per round, the last one sent at the end
    assert logs[-1][0]["search/evals"] == 4 and "search/best" in logs[-1][0]


def test_each_ttt_update_is_sent_once_with_its_figures(tmp_path):
    SEEN.clear()
    r = Reporting("tests.doubles:Recorder", tmp_path, {"task": "t"})
    update = {"k": 1, "loss": 0.5, "reward_mean": 0.25, "clip_fraction": 0.0, "kl": 0.01, "grad_norm": 2.0}
    state = SearchState(
        nodes={1: Node(id=1, status="seed", score=1.0, raw_score=1.0)},
        events={1: Event(id=1, kind="update", payload=update)},
    )
    r.send(state, 1)
    r.send(state, 2)
    sent = [(m, step) for kind, m, step in SEEN if kind == "log" and "ttt/loss" in m]
    assert sent == [({"ttt/loss": 0.5, "ttt/reward_mean": 0.25, "ttt/clip_fraction": 0.0, "ttt/kl": 0.01,
                      "ttt/grad_norm": 2.0}, 1)]  # fmt: skip


def test_a_missing_tracker_package_is_named_before_the_run(tmp_path, capsys):
    import importlib.util

    if importlib.util.find_spec("wandb") is not None:
        pytest.skip("wandb is installed here")
    argv = ["search", "circle-packing-26", "--method", "mutate", "--run-dir", str(tmp_path / "run"),
            "--report-to", "wandb"]  # fmt: skip
    assert main(argv) == 2
    assert "pip install wandb" in capsys.readouterr().err and not (tmp_path / "run").exists()
