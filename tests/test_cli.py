"""The `arts` command on built-in and user tasks."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from arts.search.cli.flags import at
from arts.search.cli.main import main
from tests.doubles import make_task, write_task


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
    assert main(["tasks", "check", "--no-run", str(write_task(tmp_path / "good"))]) == 0
    bad = write_task(tmp_path / "bad")
    (bad / "task.toml").write_text((bad / "task.toml").read_text().replace('"maximize"', '"upwards"'))
    assert main(["tasks", "check", str(bad)]) == 1
    assert "field 'metric.direction'" in capsys.readouterr().err


def test_tasks_check_evaluates_the_seed_once(tmp_path, capsys):
    assert main(["tasks", "check", str(make_task(tmp_path / "toy"))]) == 0
    assert "seed evaluated: neg_sq_err = -4" in capsys.readouterr().out


def test_tasks_check_fails_an_evaluator_that_misspells_score_as_arts_eval_does(tmp_path, capsys):
    root = make_task(tmp_path / "toy")
    (root / "evaluate.py").write_text((root / "evaluate.py").read_text().replace('{"score"', '{"scor"'))
    assert main(["eval", str(root)]) == 1
    said = capsys.readouterr().out
    assert "valid=true but score is null" in said and "'scor'" in said
    assert main(["tasks", "check", str(root)]) == 1
    err = capsys.readouterr().err
    assert said.split("INVALID: ")[1].split("]")[0] in err and "arts eval" in err
    assert main(["tasks", "check", "--no-run", str(root)]) == 0  # the folder itself is fine


def test_tasks_check_names_a_folder_both_material_and_hidden(tmp_path, capsys):
    root = make_task(tmp_path / "toy")
    (root / "grader").mkdir()
    (root / "evaluate.py").rename(root / "grader" / "evaluate.py")
    toml = (root / "task.toml").read_text().replace('"evaluate.py"', '"grader/evaluate.py"')
    toml = toml.replace('material = ["grader/evaluate.py"]', 'material = ["grader/"]\nhidden = ["grader/"]')
    (root / "task.toml").write_text(toml)
    assert main(["tasks", "check", str(root)]) == 1
    err = capsys.readouterr().err
    assert "'grader/' is also material ('grader/')" in err and "move it to material" not in err


def test_eval_json_reports_the_recorded_baseline(capsys):
    assert main(["eval", "circle-packing-26", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["valid"] and abs(out["score"] - 0.9797642169962063) < 1e-9


def test_eval_files_overlay_is_scored(tmp_path, capsys):
    (tmp_path / "solution.py").write_text("def pack():\n    return [[0.5, 0.5]] * 26, [0.1] * 26\n")
    assert main(["eval", "circle-packing-26", "--files", str(tmp_path), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert not out["valid"] and "overlap" in (out["reason"] + out["message"]).lower()


def capture_runs(monkeypatch, summary: dict | None = None) -> list:
    """The configs `arts search` starts runs with; the run itself is replaced (this is about the flags)."""
    seen: list = []

    def start_run(cfg, run_dir=None, log=print):
        seen.append(cfg)
        if summary is None:
            raise KeyError("no run here")
        return summary

    monkeypatch.setitem(
        sys.modules, "arts.search.run", types.SimpleNamespace(start_run=start_run, resume_run=None)
    )
    return seen


def test_search_takes_every_config_field_as_a_flag_beside_the_short_ones(monkeypatch, capsys):
    summary = {"best": {"score": 1.0, "node": 1, "test_score": None}, "baseline": 0.5, "valid_nodes": 1,
               "nodes": 1, "stopped_because": "evals"}  # fmt: skip
    seen = capture_runs(monkeypatch, summary)
    argv = ["search", "toy", "--budget.evals", "30", "--scientist.tail_depth", "2", "--ttt.grpo.lr", "1e-3",
            "--executor.ops", '["write_file"]', "--scientist_model.model", "123", "-k", "4",
            "--without", "comparison", "--set", "space.cooldown=3"]  # fmt: skip
    assert main(argv) == 0
    cfg = seen[0]
    assert (cfg.task, cfg.budget.evals, cfg.scientist.tail_depth, cfg.ttt.grpo.lr) == ("toy", 30, 2, 1e-3)
    assert cfg.executor.ops == ["write_file"] and cfg.scientist_model.model == "123"  # text stays text
    assert cfg.scientist.candidates == 4 and cfg.space.cooldown == 3
    assert not cfg.components.comparison and cfg.components.memory


def test_a_field_flag_overrides_its_short_alias_and_set_overrides_both(monkeypatch):
    seen = capture_runs(monkeypatch)
    main(["search", "--task", "toy", "--evals", "5", "--budget.evals", "6"])
    main(["search", "toy", "--evals", "5", "--budget.evals", "6", "--set", "budget.evals=7"])
    assert [c.budget.evals for c in seen] == [6, 7]


def test_a_bad_field_value_names_the_field(monkeypatch, capsys):
    capture_runs(monkeypatch)
    assert main(["search", "toy", "--budget.evals", "many"]) == 2
    assert "budget.evals" in capsys.readouterr().err


def test_short_flags_set_real_config_fields():
    from arts.search.cli.flags import EXECUTOR_FOLLOWS, SHORT_FLAGS, config_fields
    from arts.search.config import SearchConfig

    leaves = {path for path, _, sub in config_fields(SearchConfig) if sub is None}
    paths = (
        {path for path, _ in SHORT_FLAGS.values()} | set(EXECUTOR_FOLLOWS) | set(EXECUTOR_FOLLOWS.values())
    )
    assert paths <= leaves, paths - leaves


def test_every_short_flag_reaches_its_field(monkeypatch):
    from arts.search.cli.flags import SHORT_FLAGS

    seen = capture_runs(monkeypatch)
    given = {"--method": "greedy", "--model": "m", "--backend": "openai", "--base-url": "http://h/v1",
             "--dtype": "float32", "--executor-model": "e", "--executor-backend": "vllm",
             "--executor-base-url": "http://e/v1", "--evals": 11, "--rounds": 12, "--tokens": 1300, "--wall": 9.5,
             "--group": 4, "-k": 3, "--audits": 1, "--drafts": 3, "--seed": 5, "--profile": "capable",
             "--adapter": "a/", "--evaluate-on": "ray", "--ray-address": "auto", "--ttt": True,
             "--update-every": 2, "--lora-rank": 4, "--lr": 1e-3}  # fmt: skip
    assert set(given) == set(SHORT_FLAGS)
    argv = [x for flag, v in given.items() for x in ([flag] if v is True else [flag, str(v)])]
    main(["search", "toy", *argv])
    dumped = seen[0].model_dump()
    assert {flag: at(dumped, SHORT_FLAGS[flag][0]) for flag in given} == given
    assert seen[0].executor_model.dtype == "float32"  # follows --dtype; the others have their own flags


def test_the_help_lists_each_short_flag_once():
    from arts.search.cli.flags import SHORT_FLAGS

    run = subprocess.run(
        [sys.executable, "-m", "arts.search.cli", "search", "--help"], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    for flag in SHORT_FLAGS:
        assert (
            run.stdout.count(f"  {flag} ") + run.stdout.count(f"  {flag}\n") + run.stdout.count(f"  {flag},")
            >= 1
        ), flag
    assert "--executor {" not in run.stdout and "--evaluate-on {local,ray}" in run.stdout


def test_config_show_prints_toml_that_config_takes_back_unchanged(tmp_path, capsys):
    import tomllib

    from arts.search.config import SearchConfig, load_config

    assert main(["config", "show", "--set", "budget.evals=7", "--set", "scientist.tail_depth=2"]) == 0
    shown = capsys.readouterr().out
    data = tomllib.loads(shown)  # real TOML: no null, tables as [headers]
    assert data["budget"]["evals"] == 7 and "null" not in shown
    assert not any("." in key.split("=")[0] for key in shown.splitlines() if "=" in key and key[0] != "#")
    (tmp_path / "c.toml").write_text(shown)
    want = load_config(None, {"budget.evals": 7, "scientist.tail_depth": 2})
    assert load_config(tmp_path / "c.toml", {}) == want != SearchConfig()
    assert main(["config", "show", "--config", str(tmp_path / "c.toml")]) == 0
    assert capsys.readouterr().out == shown


def test_arts_search_starts_from_the_shown_config_unchanged(tmp_path, capsys, monkeypatch):
    from arts.search.config import load_config

    assert main(["config", "show", "--set", "scientist.candidates=3"]) == 0
    (tmp_path / "c.toml").write_text(capsys.readouterr().out)
    seen = capture_runs(monkeypatch)
    main(["search", "--config", str(tmp_path / "c.toml")])
    assert seen == [load_config(None, {"scientist.candidates": 3})]


def test_config_show_comments_whole_docstrings_and_true_defaults(capsys):
    from arts.search.config import SearchConfig

    assert main(["config", "show"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at_profile = lines.index('profile = "small"')  # `auto` resolves to small for the embedded model
    assert lines[at_profile - 1] == '# default: "auto"'
    assert lines[at_profile - 2].endswith("parameters.")  # the docstring's last words, nothing cut
    doc = " ".join(SearchConfig.model_fields["profile"].description.split())
    comment = " ".join(line.removeprefix("# ") for line in lines[at_profile - 6 : at_profile - 1])
    assert doc in comment
    assert "# [scientist_model.pricing]" in lines  # unset: a header would make it a table of zeros
    assert any(line.startswith("# default: 320 (under the capable profile: ") for line in lines)


def test_version_prints_the_package_version(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out.strip() == f"arts {version('arts')}"


def test_config_show_into_a_closed_pipe_ends_without_a_traceback():
    run = subprocess.run(
        f"{sys.executable} -m arts.search.cli config show | head -1",
        shell=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.stdout.startswith("# ") and "Traceback" not in run.stderr and "Error" not in run.stderr


def test_every_config_model_reads_its_field_docstrings():
    from arts.search.cli.flags import config_fields
    from arts.search.config import SearchConfig

    models = {SearchConfig} | {sub for _, _, sub in config_fields(SearchConfig) if sub is not None}
    blind = sorted(m.__name__ for m in models if not m.model_config.get("use_attribute_docstrings"))
    assert not blind, f"add use_attribute_docstrings=True to the model_config of {blind}"


FAST = """
import sys
from arts.search.cli.flags import at
from arts.search.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print("heavy:", sorted(m for m in ("torch", "transformers", "xgrammar") if m in sys.modules))
"""


@pytest.mark.parametrize(
    "argv, shows",
    [
        (["--help"], "usage: arts"),
        (["tasks", "list"], "circle-packing-26"),
        (["tasks", "show", "char-lm"], "val_bpc"),
        (["runs", "/nonexistent"], ""),
        (["serve", "--help"], "--adapter-name"),
    ],
)
def test_help_and_tasks_import_no_model_code(argv, shows):
    run = subprocess.run([sys.executable, "-c", FAST, *argv], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and shows in run.stdout, run.stdout + run.stderr
    assert run.stdout.strip().endswith("heavy: []"), run.stdout[-500:]


def test_tasks_check_imports_no_model_code(tmp_path):
    argv = ["tasks", "check", str(make_task(tmp_path / "t"))]
    run = subprocess.run([sys.executable, "-c", FAST, *argv], capture_output=True, text=True, timeout=60)
    assert "ok" in run.stdout and run.stdout.strip().endswith("heavy: []"), run.stdout + run.stderr


def test_profile_and_server_flags_reach_the_config(monkeypatch):
    seen = capture_runs(monkeypatch)
    main(["search", "toy", "--profile", "capable"])
    main(["search", "toy", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"])
    main(["search", "toy", "--model", "big-served", "--backend", "openai", "--base-url", "http://h/v1",
          "--profile", "small"])  # fmt: skip
    capable, served, small = seen
    assert capable.profile == "capable" and not capable.scientist.directed and not capable.executor.value_menu
    assert served.executor_model.base_url == "http://127.0.0.1:9/v1"  # the executor reaches the server too
    assert served.profile == "capable"  # a served model's size is unknown: capable unless told
    assert small.profile == "small" and small.scientist.directed


def test_serve_takes_its_flags_through_the_arts_command(monkeypatch, capsys):
    import arts.policy.backends.serve as serve

    seen: list = []
    monkeypatch.setattr(serve, "serve", seen.append)
    argv = ["serve", "--port", "8123", "--model", "m", "--adapter", "a/", "--adapter-name", "sci"]
    assert main(argv) == 0
    assert (seen[0].port, seen[0].model, seen[0].adapter, seen[0].adapter_name) == (8123, "m", "a/", "sci")
    for flag in ("-h", "--help"):
        with pytest.raises(SystemExit) as exit:
            main(["serve", flag])
        assert exit.value.code == 0 and "--adapter-name" in capsys.readouterr().out


def test_serve_help_from_the_installed_command():
    arts = Path(sys.executable).parent / "arts"
    run = subprocess.run([str(arts), "serve", "--port", "8123", "--help"], capture_output=True, text=True)
    assert run.returncode == 0 and "--port" in run.stdout, run.stderr


def test_a_config_file_naming_the_task_needs_no_task_argument(monkeypatch, tmp_path):
    seen = capture_runs(monkeypatch)
    (tmp_path / "c.toml").write_text('task = "toy"\nmethod = "mutate"\n')
    main(["search", "--config", str(tmp_path / "c.toml")])
    assert (seen[0].task, seen[0].method) == ("toy", "mutate")


def test_a_config_file_without_a_task_still_asks_for_one(monkeypatch, tmp_path, capsys):
    capture_runs(monkeypatch)
    (tmp_path / "c.toml").write_text('method = "mutate"\n')
    assert main(["search", "--config", str(tmp_path / "c.toml")]) == 2
    assert "give a task" in capsys.readouterr().err


def test_a_start_against_a_down_server_can_be_resumed_once_it_is_up(tmp_path, capsys, monkeypatch):
    """The failed start's folder is a run: a fresh start there is refused with the way forward, and
    `--resume` gets as far as the server again (not "needs --base-url", not "holds no run")."""
    from functools import partialmethod

    from arts.policy.backends.openai import OpenAIBackend

    monkeypatch.setattr(OpenAIBackend, "__init__", partialmethod(OpenAIBackend.__init__, backoff_s=0.0))
    run = tmp_path / "run"
    argv = ["search", "circle-packing-26", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1",
            "--model", "m", "--run-dir", str(run), "--audits", "0", "-q"]  # fmt: skip
    assert main(argv) == 2
    first = capsys.readouterr().err
    assert "cannot reach http://127.0.0.1:9" in first and "needs a server" not in first, first
    assert main(argv) == 2
    assert f"--resume {run}" in capsys.readouterr().err
    assert main(["search", "--resume", str(run), "-q"]) == 2
    again = capsys.readouterr().err
    assert "cannot reach http://127.0.0.1:9" in again and "holds no run" not in again, again
    assert (run / "arts.log").read_text().count("run: ") == 1


def test_mutate_names_no_model_and_leaves_no_stray_folder(tmp_path, capsys):
    run = tmp_path / "run"
    argv = ["search", "circle-packing-26", "--method", "mutate", "--evals", "2", "--group", "2",
            "--run-dir", str(run), "-q"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("best ") and len(out.strip().splitlines()) == 1, out  # -q: the result only
    assert json.loads((run / "summary.json").read_text())["model"] is None
    log = (run / "arts.log").read_text()
    assert "seed:" in log and "best " in log  # the log has everything -q kept off the console


def test_a_finished_run_leaves_no_test_work_folder(tmp_path):
    run = tmp_path / "run"
    argv = ["search", "circle-packing-26", "--method", "mutate", "--evals", "1", "--run-dir", str(run), "-q"]
    main(argv)  # exits 1 when its one node is invalid; either way the hidden test ran
    assert json.loads((run / "summary.json").read_text())["best"]["test_score"] is not None
    assert not (run / "test-work").exists()


def test_help_imports_no_pydantic():
    code = FAST.replace('("torch", "transformers", "xgrammar")', '("pydantic", "arts.tasks.base")')
    run = subprocess.run([sys.executable, "-c", code, "--help"], capture_output=True, text=True, timeout=60)
    assert run.stdout.strip().endswith("heavy: []"), run.stdout[-300:] + run.stderr[-500:]


def test_the_adapter_flag_reaches_the_config(monkeypatch, tmp_path):
    seen = capture_runs(monkeypatch)
    main(["search", "toy", "--adapter", str(tmp_path / "adapter")])
    assert seen[0].scientist.adapter == str(tmp_path / "adapter")


def test_the_bench_command_is_reached_through_arts(tmp_path, capsys):
    argv = [
        "bench",
        "--tasks",
        "no-such-task",
        "--methods",
        "mutate",
        "--seeds",
        "1",
        "--out",
        str(tmp_path / "b"),
    ]
    assert main(argv) == 2 and "no-such-task" in capsys.readouterr().err


@pytest.mark.parametrize(
    "old, new",
    [("ttt.grpo.seed", "seed"), ("ttt.parents", "scientist.parents"), ("render.memory", "render.memory_entries"),
     ("analysis.statement_chars", "analysis.plan_statement_chars")],
)  # fmt: skip
def test_an_old_config_key_names_the_key_that_replaced_it(monkeypatch, capsys, tmp_path, old, new):
    seen = capture_runs(monkeypatch)
    (tmp_path / "old.toml").write_text(f"[{old.rpartition('.')[0]}]\n{old.rpartition('.')[2]} = 300\n")
    for argv in (["--set", f"{old}=300"], [f"--{old}", "300"], ["--config", str(tmp_path / "old.toml")]):
        assert main(["search", "toy", *argv]) == 2
        err = capsys.readouterr().err
        assert f"{old} is now {new}" in err and f"--set {new}=" in err, (argv, err)
    assert not seen
    main(["search", "toy", "--set", f"{new}=300"])
    assert seen and at(seen[0].model_dump(), new) == 300


def test_ttt_proposes_from_the_parents_arts_would_unless_scientist_parents_is_set(monkeypatch):
    seen = capture_runs(monkeypatch)
    main(["search", "toy", "--ttt"])
    main(["search", "toy", "--ttt", "--scientist.parents", "3"])
    main(["search", "toy", "--ttt", "--profile", "capable"])
    main(["search", "toy", "--profile", "capable"])
    main(["search", "toy"])
    parents = [c.scientist.parents for c in seen]
    assert parents[:2] == [1, 3] and parents[2] == parents[3] and parents[4] == 1


def test_a_run_stored_under_old_keys_resumes_with_their_meaning(tmp_path, capsys):
    from arts.search.config import read_stored_config

    run_dir = tmp_path / "run"
    argv = ["search", str(make_task(tmp_path / "task")), "--method", "mutate", "--group", "2", "--evals", "1"]
    assert main([*argv, "--run-dir", str(run_dir), "-q"]) == 0
    text = (run_dir / "config.toml").read_text()
    old = (
        text.replace("memory_entries = 6", "memory = 4")
        .replace("plan_statement_chars = 1600", "statement_chars = 900")
        .replace("[ttt]\nenabled = false", "[ttt]\nenabled = true\nparents = 2")
        .replace("[ttt.grpo]\n", "[ttt.grpo]\nseed = 7\n")
    )
    assert old.count("\n") == text.count("\n") + 2
    (run_dir / "config.toml").write_text(old)
    cfg = read_stored_config(run_dir / "config.toml")
    assert (cfg.render.memory_entries, cfg.analysis.plan_statement_chars, cfg.scientist.parents) == (
        4,
        900,
        2,
    )
    assert cfg.seed == 0
    (run_dir / "config.toml").write_text(old.replace("enabled = true", "enabled = false"))
    assert (
        read_stored_config(run_dir / "config.toml").scientist.parents == 1
    )  # ttt.parents acted under TTT only
    assert main(["search", "--resume", str(run_dir), "-q"]) == 0


def test_evaluate_on_is_the_flag_and_executor_names_it(monkeypatch, capsys):
    seen = capture_runs(monkeypatch)
    main(["search", "toy", "--evaluate-on", "ray", "--executor.max_tokens", "64"])
    assert seen[0].evaluate_on == "ray" and seen[0].executor.max_tokens == 64
    with pytest.raises(SystemExit) as exit:
        main(["search", "toy", "--executor", "ray"])
    err = capsys.readouterr().err
    assert (
        exit.value.code == 2 and "--executor is now --evaluate-on" in err and "write --evaluate-on ray" in err
    )
    assert len(seen) == 1


def test_export_names_the_checkpoint_flag_when_given_the_old_one(tmp_path):
    argv = [sys.executable, "-m", "arts.search.cli", "export", str(tmp_path), "--out", str(tmp_path / "o")]
    run = subprocess.run([*argv, "--adapter", "best"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "--adapter is now --checkpoint" in run.stderr, run.stderr
    run = subprocess.run([*argv, "--checkpoint", "best"], capture_output=True, text=True, timeout=60)
    assert "--checkpoint" not in run.stderr and "unrecognized" not in run.stderr, run.stderr


def test_round_caps_and_the_group_bound_are_named(monkeypatch, capsys):
    from arts.search.config import DRAWS_PER_CANDIDATE
    from arts.search.meter import ANSWER_ROUND_CAP, OPTIMIZE_ROUND_CAP, BudgetConfig

    assert (BudgetConfig().round_cap("optimize"), BudgetConfig().round_cap("answer")) == (100, 8)
    assert (OPTIMIZE_ROUND_CAP, ANSWER_ROUND_CAP) == (100, 8) and BudgetConfig(rounds=3).round_cap(
        "answer"
    ) == 3
    seen = capture_runs(monkeypatch)
    assert main(["search", "toy", "-k", "2", "--group", str(2 * DRAWS_PER_CANDIDATE + 1)]) == 2
    assert "raise scientist.candidates or lower group" in capsys.readouterr().err
    main(["search", "toy", "-k", "2", "--group", str(2 * DRAWS_PER_CANDIDATE)])
    assert seen[-1].group == 8


def test_ttt_watch_reaches_the_run_from_the_command_line(monkeypatch):
    seen = capture_runs(monkeypatch)
    main(["search", "toy", "--ttt", "--set", "ttt.watch=increase STEPS"])
    main(["search", "toy", "--ttt", "--ttt.watch", "decrease TOL"])
    assert [c.ttt.watch for c in seen] == ["increase STEPS", "decrease TOL"]
