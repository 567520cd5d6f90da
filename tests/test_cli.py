"""The `arts` command on built-in and user tasks."""

from __future__ import annotations

import json

from arts.search.cli import main
from tests.test_tasks import write_task


def test_tasks_list_shows_every_builtin_with_its_references(capsys):
    assert main(["tasks", "list"]) == 0
    out = capsys.readouterr().out
    for name in (
        "circle-packing-26",
        "bin-packing-weibull",
        "digits-classifier",
        "friedman-regression",
        "char-lm",
    ):
        assert name in out
    assert "2.635" in out and "minimize" in out


def test_tasks_show_prints_statement_files_and_metric(capsys):
    assert main(["tasks", "show", "circle-packing-26"]) == 0
    out = capsys.readouterr().out
    assert "sum_of_radii" in out and "solution.py" in out and "AlphaEvolve" in out


def test_tasks_check_accepts_a_good_dir_and_rejects_a_broken_one(tmp_path, capsys):
    assert main(["tasks", "check", str(write_task(tmp_path / "good"))]) == 0
    bad = write_task(tmp_path / "bad")
    (bad / "task.toml").write_text((bad / "task.toml").read_text().replace('"maximize"', '"upwards"'))
    assert main(["tasks", "check", str(bad)]) == 1
    assert "field 'metric.direction'" in capsys.readouterr().err


def test_eval_json_reports_the_recorded_baseline(capsys):
    assert main(["eval", "circle-packing-26", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["valid"] and abs(out["score"] - 0.9797642169962063) < 1e-9


def test_eval_files_overlay_is_scored(tmp_path, capsys):
    (tmp_path / "solution.py").write_text("def pack():\n    return [[0.5, 0.5]] * 26, [0.1] * 26\n")
    assert main(["eval", "circle-packing-26", "--files", str(tmp_path), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert not out["valid"] and "overlap" in (out["reason"] + out["message"]).lower()


def test_search_flags_map_to_config_paths():
    from arts.search.cli import _overrides, build_parser
    from arts.search.config import load_config

    args = build_parser().parse_args(
        [
            "search",
            "toy",
            "--without",
            "comparison",
            "--without",
            "memory",
            "--set",
            "space.cooldown=3",
            "-k",
            "4",
        ]
    )
    cfg = load_config(None, _overrides(args))
    assert not cfg.components.comparison and not cfg.components.memory and cfg.components.attribution
    assert cfg.space.cooldown == 3 and cfg.scientist.candidates == 4
