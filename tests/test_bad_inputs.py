"""Bad inputs through the `arts` command, as a careless user or a lying evaluator gives them: each gives a
clear message naming the problem and the fix, a non-zero exit, no traceback, and loses nothing (no run
folder overwritten, nothing left behind that blocks a rerun, no hidden file left in a run folder)."""

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from arts.search.cli.main import main

TASK = """name = "bad-input"
statement = "statement.md"
kind = "optimize"
editable = ["solution.py"]
material = ["evaluate.py"]
[metric]
name = "score"
direction = "maximize"
[evaluate]
command = ["python", "evaluate.py"]
timeout_s = 5
memory_mb = 512
"""
ANSWER_TASK = """name = "bad-answer"
statement = "statement.md"
kind = "answer"
editable = ["answer.json"]
hidden = ["grader/"]
[metric]
name = "score"
direction = "maximize"
[test]
command = ["python", "grader/test.py"]
"""
GOOD_EVALUATOR = "import json\njson.dump({'score': 1.0, 'valid': True}, open('result.json', 'w'))\n"


def task_dir(root: Path, toml: str | bytes = TASK, statement: bytes = b"A task.\n") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "task.toml").write_text(toml) if isinstance(toml, str) else (root / "task.toml").write_bytes(toml)
    (root / "statement.md").write_bytes(statement)
    (root / "evaluate.py").write_text(GOOD_EVALUATOR)
    (root / "solution.py").write_text("X = 1\n")
    return root


def run_dir(tmp: Path) -> Path:
    """A finished one-evaluation run (method mutate: no model)."""
    run = tmp / "run"
    if not (run / "arts.db").exists():
        argv = [
            "search",
            str(task_dir(tmp / "t")),
            "--method",
            "mutate",
            "--evals",
            "1",
            "--run-dir",
            str(run),
        ]
        assert main([*argv, "-q"]) == 0
    return run


def _resume_not_sqlite(tmp: Path) -> list[str]:
    run = tmp / "run"
    run.mkdir()
    (run / "config.toml").write_text(f'task = "{task_dir(tmp / "t")}"\nmethod = "mutate"\n')
    (run / "arts.db").write_bytes(b"this is not a database at all, but a text file" * 20)
    return ["search", "--resume", str(run)]


def _resume_bad_config(tmp: Path) -> list[str]:
    run = tmp / "run"
    run.mkdir()
    (run / "config.toml").write_text("task = [unclosed\n")
    return ["search", "--resume", str(run)]


def _resume_with(*extra: str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["search", "--resume", str(run_dir(tmp)), *extra, "-q"]


def _search(*extra: str) -> Callable[[Path], list[str]]:
    """A search on a fresh task with `extra` flags, into tmp/new-run (which must not be left behind)."""
    return lambda tmp: ["search", str(task_dir(tmp / "t")), "--run-dir", str(tmp / "new-run"), "-q", *extra]


def _config(content: bytes) -> Callable[[Path], list[str]]:
    def make(tmp: Path) -> list[str]:
        (tmp / "c.toml").write_bytes(content)
        return ["search", "--config", str(tmp / "c.toml"), str(task_dir(tmp / "t")), "--run-dir", "new-run"]

    return make


def _run_dir_is_file(tmp: Path) -> list[str]:
    (tmp / "afile").write_text("x")
    return [
        "search",
        str(task_dir(tmp / "t")),
        "--method",
        "mutate",
        "--evals",
        "1",
        "--run-dir",
        str(tmp / "afile"),
    ]


def _check(toml: str | bytes, statement: bytes = b"A task.\n") -> Callable[[Path], list[str]]:
    return lambda tmp: ["tasks", "check", str(task_dir(tmp / "t", toml, statement))]


def _toml(old: str, new: str, base: str = TASK) -> Callable[[Path], list[str]]:
    assert old in base, old
    return _check(base.replace(old, new, 1))


def _linked(rel: str, target: str, toml: str = TASK) -> Callable[[Path], list[str]]:
    """A task folder in which `rel` is a symbolic link to `target` (outside the folder)."""

    def make(tmp: Path) -> list[str]:
        root = task_dir(tmp / "t", toml)
        (tmp / "outside").mkdir(exist_ok=True)
        (tmp / "outside" / "secret.txt").write_text("42\n")
        link = root / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.unlink(missing_ok=True)
        link.symlink_to(target.replace("OUT", str(tmp / "outside")))
        return ["tasks", "check", str(root)]

    return make


def _eval_files(make_files: Callable[[Path], Path]) -> Callable[[Path], list[str]]:
    return lambda tmp: ["eval", str(task_dir(tmp / "t")), "--files", str(make_files(tmp))]


def _on_run(cmd: str, *extra: str) -> Callable[[Path], list[str]]:
    return lambda tmp: [cmd, str(tmp / "no-run"), *extra]


def _empty_dir(tmp: Path) -> Path:
    (tmp / "empty").mkdir()
    return tmp / "empty"


def _answer(tmp: Path) -> Path:
    (tmp / "files").mkdir()
    (tmp / "files" / "answer.json").write_text("{}")
    return tmp / "files"


def _a_file(tmp: Path) -> Path:
    (tmp / "afile").write_text("X = 2\n")
    return tmp / "afile"


MATERIAL_LIST = 'material = ["evaluate.py"]'
CLI: dict[str, tuple[Callable[[Path], list[str]], str]] = {
    # the config file
    "config file missing": (lambda tmp: ["search", "--config", str(tmp / "nope.toml"), "x"], "nope.toml: no such file"),
    "config file not UTF-8": (_config(b"seed = 1\n# \xff\xfe\n"), "not UTF-8"),
    "config file not TOML": (_config(b"seed = = 1\n"), "c.toml: not valid TOML"),
    "config file: unknown key": (_config(b"sead = 1\n"), "field 'sead': unknown field"),
    "config file: wrong type": (_config(b"seed = \"one\"\n"), "field 'seed'"),
    "config file: negative budget": (_config(b"[budget]\nevals = -3\n"), "field 'budget.evals'"),
    "config file: unknown method": (_config(b'method = "bogus"\n'), "known: "),
    "config file is a directory": (lambda tmp: ["search", "--config", str(tmp), "x"], "--config"),
    # run folders
    "run dir is a file": (_run_dir_is_file, "is a file"),
    "resume: arts.db not SQLite": (_resume_not_sqlite, "is not an arts run store"),
    "resume: config.toml broken": (_resume_bad_config, "config.toml: not a readable config"),
    "resume: no run there": (lambda tmp: ["search", "--resume", str(tmp / "empty")], "holds no run"),
    "resume: a file": (lambda tmp: ["search", "--resume", str(_a_file(tmp))], "holds no run"),
    "resume + another task": (_resume_with("circle-packing-26"), "the task 'circle-packing-26' given here would be ignored"),
    "resume + --evals": (_resume_with("--evals", "9"), "budget.evals given here would be ignored"),
    "resume + --rounds": (_resume_with("--rounds", "9"), "budget.rounds given here would be ignored"),
    "resume + --method": (_resume_with("--method", "greedy"), "method given here would be ignored"),
    "resume + --set": (_resume_with("--set", "seed=3"), "seed given here would be ignored"),
    "resume + --config": (lambda tmp: _resume_with("--config", str(_a_file(tmp)))(tmp), "--config given here"),
    "resume + --run-dir": (_resume_with("--run-dir", "elsewhere"), "--run-dir given here"),
    "start on a finished run": (
        lambda tmp: ["search", str(task_dir(tmp / "t")), "--method", "mutate", "--run-dir", str(run_dir(tmp))],
        "already holds a run; continue it with --resume",
    ),
    "no task and no resume": (lambda tmp: ["search", "--evals", "3"], "give a task"),
    # backends and other names
    "--backend bogus": (_search("--backend", "bogus"), "known: openai, transformers, vllm"),
    "--backend empty": (_search("--backend", ""), "known: openai, transformers, vllm"),
    "--executor-backend bogus": (_search("--executor-backend", "bogus"), "known: openai, transformers, vllm"),
    "--backend module:attr missing": (_search("--backend", "no_such_module:Backend"), "cannot import backend"),
    "--method bogus": (_search("--method", "bogus"), "known: "),
    "--method empty": (_search("--method", ""), "known: "),
    "--profile bogus": (_search("--profile", "bogus"), "invalid choice: 'bogus'"),
    "--evaluate-on bogus": (_search("--evaluate-on", "bogus"), "invalid choice: 'bogus'"),
    "--dtype bogus": (_search("--dtype", "bogus"), "invalid choice: 'bogus'"),
    "--model missing": (_search("--model", "/nonexistent/model"), "neither a local directory"),
    "--report-to bogus": (_search("--report-to", "bogus", "--method", "mutate"), "give one of tensorboard"),
    "openai backend without --base-url": (_search("--backend", "openai"), "--base-url"),
    "renamed --executor": (_search("--executor", "local"), "--executor is now --evaluate-on"),
    # numbers: one line per field, no pydantic dump
    "--evals -1": (_search("--evals", "-1"), "field 'budget.evals': input should be greater than or equal to 1"),
    "--evals 0": (_search("--evals", "0"), "field 'budget.evals'"),
    "--evals abc": (_search("--evals", "abc"), "field 'budget.evals': input should be a valid integer"),
    "--rounds -2": (_search("--rounds", "-2"), "field 'budget.rounds'"),
    "--group 0": (_search("--group", "0"), "field 'group'"),
    "-k 0": (_search("-k", "0"), "field 'scientist.candidates'"),
    "--seed abc": (_search("--seed", "abc"), "field 'seed'"),
    "--wall -5": (_search("--wall", "-5"), "field 'budget.wall_s'"),
    "--tokens -1": (_search("--tokens", "-1"), "field 'budget.tokens'"),
    "--lr -1": (_search("--lr", "-1"), "field 'ttt.grpo.lr'"),
    "--lora-rank 0": (_search("--lora-rank", "0"), "field 'ttt.grpo.lora_rank'"),
    "two bad fields": (_search("--evals", "-1", "--group", "0"), "2 problem(s)"),
    # --set
    "--set without =": (_search("--set", "budgetevals"), "write it as field.path=value"),
    "--set unknown path": (_search("--set", "nope.x=1"), "field 'nope': unknown field"),
    "--set unknown leaf": (_search("--set", "budget.evalz=3"), "field 'budget.evalz': unknown field"),
    "--set bad value": (_search("--set", "budget.evals=abc"), "field 'budget.evals'"),
    "--set negative": (_search("--set", "budget.evals=-4"), "greater than or equal to 1"),
    "--set float for int": (_search("--set", "seed=1.5"), "field 'seed'"),
    "--set a table": (_search("--set", "budget=3"), "field 'budget': a table of fields, not 3"),
    "--set empty path": (_search("--set", "=3"), "write it as field.path=value"),
    "--set bad choice": (_search("--set", "profile=huge"), "unknown profile 'huge'; choose one of"),
    # serve
    "serve --port 70000": (lambda tmp: ["serve", "--port", "70000"], "give a number from 1 to 65535"),
    "serve --port -1": (lambda tmp: ["serve", "--port", "-1"], "give a number from 1 to 65535"),
    "serve --port 0": (lambda tmp: ["serve", "--port", "0"], "give a number from 1 to 65535"),
    "serve --port 65536": (lambda tmp: ["serve", "--port", "65536"], "give a number from 1 to 65535"),
    "serve --port abc": (lambda tmp: ["serve", "--port", "abc"], "give a number from 1 to 65535"),
    "serve --port empty": (lambda tmp: ["serve", "--port", ""], "give a number from 1 to 65535"),
    "serve --backend bogus": (lambda tmp: ["serve", "--backend", "bogus"], "known: openai, transformers, vllm"),
    # eval
    "unknown task name": (lambda tmp: ["eval", "no-such-task"], "neither a built-in task nor a directory"),
    "eval --files nonexistent": (_eval_files(lambda tmp: tmp / "nonexistent"), "no such directory"),
    "eval --files a file": (_eval_files(_a_file), "is a file"),
    "eval --files empty folder": (_eval_files(_empty_dir), "holds none of the editable files"),
    "eval a seedless task without --files": (lambda tmp: ["eval", "incident-rca"], "give the program with --files"),
    "eval an answer task without --test": (
        lambda tmp: ["eval", "incident-rca", "--files", str(_answer(tmp))],
        "use --test to grade",
    ),
    "eval --test without [test]": (lambda tmp: ["eval", str(task_dir(tmp / "t")), "--test"], "no [test] section"),
    # commands on runs
    "report on no run": (_on_run("report"), "no-run"),
    "status on no run": (_on_run("status"), "no-run"),
    "runs on no folder": (_on_run("runs"), "no-run"),
    "export on no run": (_on_run("export", "--out", "x"), "no-run"),
    "rollouts export on no run": (lambda tmp: ["rollouts", "export", str(tmp / "no-run"), "--out", "x"], "no-run"),
    "credit on no run": (_on_run("credit"), "no-run"),
    "train from no run": (lambda tmp: ["train", "--from", str(tmp / "no-run"), "--out", "x"], "no-run"),
    "export --checkpoint bogus": (
        lambda tmp: ["export", str(run_dir(tmp)), "--out", str(tmp / "x"), "--checkpoint", "bogus"],
        "no adapters/<k>/ checkpoints",
    ),
    "tasks show bogus": (lambda tmp: ["tasks", "show", "bogus"], "neither a built-in task nor a directory"),
    "tasks check nonexistent": (lambda tmp: ["tasks", "check", str(tmp / "nope")], "no such task directory"),
    "tasks check a folder without task.toml": (lambda tmp: ["tasks", "check", str(_empty_dir(tmp))], "task.toml: missing"),
}  # fmt: skip

TASK_TOML: dict[str, tuple[Callable[[Path], list[str]], str]] = {
    "timeout_s = 1e300": (_toml("timeout_s = 5", "timeout_s = 1e300"), "evaluate.timeout_s"),
    "timeout_s = inf": (_toml("timeout_s = 5", "timeout_s = inf"), "evaluate.timeout_s"),
    'timeout_s = "60"': (_toml("timeout_s = 5", 'timeout_s = "60"'), "write the number without quotes"),
    "timeout_s = true": (_toml("timeout_s = 5", "timeout_s = true"), "evaluate.timeout_s"),
    "timeout_s = -1": (_toml("timeout_s = 5", "timeout_s = -1"), "greater than 0"),
    "timeout_s = 0": (_toml("timeout_s = 5", "timeout_s = 0"), "evaluate.timeout_s"),
    "memory_mb = 10^12": (_toml("memory_mb = 512", "memory_mb = 1000000000000"), "evaluate.memory_mb"),
    'memory_mb = "512"': (_toml("memory_mb = 512", 'memory_mb = "512"'), "write the number without quotes"),
    "memory_mb = 0": (_toml("memory_mb = 512", "memory_mb = 0"), "evaluate.memory_mb"),
    "memory_mb = 1.5": (_toml("memory_mb = 512", "memory_mb = 1.5"), "evaluate.memory_mb"),
    "disk_mb = 0": (_toml("memory_mb = 512", "memory_mb = 512\ndisk_mb = 0"), "evaluate.disk_mb"),
    "max_procs = 0": (_toml("memory_mb = 512", "memory_mb = 512\nmax_procs = 0"), "evaluate.max_procs"),
    "threads = 5000": (_toml("memory_mb = 512", "memory_mb = 512\nthreads = 5000"), "evaluate.threads"),
    "baseline = nan": (_toml('direction = "maximize"', 'direction = "maximize"\nbaseline = nan'), "not a finite number"),
    "baseline = inf": (_toml('direction = "maximize"', 'direction = "maximize"\nbaseline = inf'), "metric.baseline"),
    "best_known = -nan": (_toml('direction = "maximize"', 'direction = "maximize"\nbest_known = -nan'), "metric.best_known"),
    'baseline = "0.9"': (_toml('direction = "maximize"', 'direction = "maximize"\nbaseline = "0.9"'), "without quotes"),
    "direction = up": (_toml('direction = "maximize"', 'direction = "up"'), "metric.direction"),
    "unknown top-level key": (_toml("kind =", "kinds = 1\nkind ="), "field 'kinds': unknown field"),
    "unknown key in [metric]": (_toml('direction = "maximize"', 'direction = "maximize"\nbest = 1.0'), "field 'metric.best': unknown field"),
    "unknown key in [evaluate]": (_toml("memory_mb = 512", "memory_mb = 512\nmemory = 5"), "field 'evaluate.memory': unknown field"),
    "unknown section": (_check(TASK + "[grader]\ncommand = []\n"), "field 'grader': unknown field"),
    "name missing": (_toml('name = "bad-input"\n', ""), "field 'name': required field is missing"),
    "name with capitals": (_toml('name = "bad-input"', 'name = "Bad Input"'), "is not a task name"),
    "kind bogus": (_toml('kind = "optimize"', 'kind = "bogus"'), "field 'kind'"),
    "kind missing": (_toml('kind = "optimize"\n', ""), "field 'kind': required field is missing"),
    "wrong kind: answer with [evaluate]": (_toml('kind = "optimize"', 'kind = "answer"'), "'answer' task"),
    "answer task without [test]": (_check(ANSWER_TASK.split("[test]")[0]), "needs a [test] section"),
    "[answer] in an optimize task": (_check(TASK + '[answer]\nschema = "s.json"\n'), "belongs to an 'answer' task"),
    "optimize without [evaluate]": (_check(TASK.split("[evaluate]")[0]), "needs an [evaluate] section"),
    "optimize without [metric]": (_check(TASK.replace('[metric]\nname = "score"\ndirection = "maximize"\n', "")), "needs a [metric] section"),
    "editable empty": (_toml('editable = ["solution.py"]', "editable = []"), "field 'editable'"),
    "editable a string": (_toml('editable = ["solution.py"]', 'editable = "solution.py"'), "field 'editable'"),
    "editable absolute": (_toml('editable = ["solution.py"]', 'editable = ["/etc/passwd"]'), "must be a path relative"),
    "editable with ..": (_toml('editable = ["solution.py"]', 'editable = ["../x.py"]'), "without '..'"),
    "editable file missing": (_toml('editable = ["solution.py"]', 'editable = ["missing.py"]'), "seedless = true"),
    'seedless = "yes"': (_toml('kind = "optimize"', 'kind = "optimize"\nseedless = "yes"'), "field 'seedless'"),
    "editable also material": (_toml('editable = ["solution.py"]', 'editable = ["evaluate.py"]'), "list each file once"),
    "material file missing": (_toml(MATERIAL_LIST, 'material = ["evaluate.py", "data.csv"]'), "'data.csv' not found"),
    "material folder missing": (_toml(MATERIAL_LIST, 'material = ["evaluate.py", "data/"]'), "'data/' not found"),
    "hidden entry missing": (_toml(MATERIAL_LIST, MATERIAL_LIST + '\nhidden = ["grader/"]'), "field 'hidden'"),
    "statement file missing": (_toml('statement = "statement.md"', 'statement = "README.md"'), "field 'statement'"),
    "statement not UTF-8": (_check(TASK, b"\xff\xfe caf\xe9"), "field 'statement'"),
    "command empty": (_toml('command = ["python", "evaluate.py"]', "command = []"), "evaluate.command"),
    "command a string": (_toml('command = ["python", "evaluate.py"]', 'command = "python evaluate.py"'), "evaluate.command"),
    "command script missing": (_toml('command = ["python", "evaluate.py"]', 'command = ["python", "eval.py"]'), "'eval.py' not found"),
    "evaluate runs a hidden file": (
        _check(TASK.replace(MATERIAL_LIST, MATERIAL_LIST + '\nhidden = ["evaluate2.py"]').replace('"evaluate.py"]\ntimeout', '"evaluate2.py"]\ntimeout')),
        "field 'hidden'",
    ),
    "task.toml not UTF-8": (_check(TASK.encode() + b"# \xff\n"), "task.toml: not UTF-8"),
    "task.toml not TOML": (_check(TASK + "kind = \n"), "task.toml: not valid TOML"),
    "task.toml empty": (_check(""), "required field is missing"),
    "material link to a file outside": (_linked("evaluate.py", "OUT/secret.txt"), "outside the task directory"),
    "material link to /etc/passwd": (_linked("evaluate.py", "/etc/passwd"), "is a link to /etc/passwd"),
    "link inside a material folder": (
        _linked("data/secret.txt", "OUT/secret.txt", TASK.replace(MATERIAL_LIST, 'material = ["evaluate.py", "data/"]')),
        "'data/secret.txt' is a link",
    ),
    "material folder is a link outside": (
        _linked("data", "OUT", TASK.replace(MATERIAL_LIST, 'material = ["evaluate.py", "data/"]')),
        "'data' is a link",
    ),
    "hidden link outside": (
        _linked("grader/truth.txt", "OUT/secret.txt", TASK.replace(MATERIAL_LIST, MATERIAL_LIST + '\nhidden = ["grader/"]')),
        "field 'hidden'",
    ),
    "statement link outside": (_linked("statement.md", "OUT/secret.txt"), "field 'statement'"),
    "editable link outside": (_linked("solution.py", "OUT/secret.txt"), "field 'editable'"),
}  # fmt: skip


HOUSEKEEPING = {"arts.log", "lock", "arts.db-wal", "arts.db-shm"}
"""What a command may add to a run folder that already existed: its log, its lock, SQLite's side files."""


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under root: (size, modification time) of files, (0, 0) of folders."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            st = os.lstat(p)
            out[str(p.relative_to(root))] = (0, 0) if p.is_dir() else (st.st_size, st.st_mtime_ns)
    return out


def _assert_nothing_lost(before: dict, after: dict) -> None:
    changed = [p for p in before if after.get(p) != before[p]]
    added = [p for p in after if p not in before]
    assert not changed, f"changed or removed: {changed[:5]}"
    assert all(Path(p).name in HOUSEKEEPING and str(Path(p).parent) in before for p in added), added


def _assert_clear(err: str, expected: str) -> None:
    assert "Traceback" not in err and err.strip(), err
    assert "errors.pydantic.dev" not in err and "input_type=" not in err, err
    assert all(len(line) < 400 for line in err.splitlines()), err
    assert expected in err, err


@pytest.mark.parametrize("name", [*CLI, *TASK_TOML])
def test_bad_input_gives_a_clear_message_and_loses_nothing(name, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make, expected = CLI.get(name) or TASK_TOML[name]
    argv = make(tmp_path)
    capsys.readouterr()
    before = _snapshot(tmp_path)
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse's own usage errors are clear lines too
        rc = e.code
    err = capsys.readouterr().err
    assert rc not in (0, None), f"{name}: accepted silently"
    _assert_clear(err, expected)
    assert name in CLI or "task.toml" in err, err  # a task.toml problem names the file
    _assert_nothing_lost(before, _snapshot(tmp_path))


def test_a_failed_start_leaves_no_folder_that_blocks_a_rerun(tmp_path, capsys):
    argv = ["search", str(task_dir(tmp_path / "t")), "--run-dir", str(tmp_path / "r"), "-q", "--evals", "1"]
    assert main([*argv, "--backend", "bogus"]) == 2
    assert not (tmp_path / "r").exists()
    assert main([*argv, "--method", "mutate"]) == 0  # the same --run-dir, now right


def test_every_task_check_problem_names_the_file(tmp_path, capsys):
    rc = main(
        ["tasks", "check", str(task_dir(tmp_path / "t", TASK.replace("memory_mb = 512", "memory_mb = -1")))]
    )
    assert rc != 0 and "task.toml" in capsys.readouterr().err


def test_a_link_inside_the_task_folder_is_fine(tmp_path, capsys):
    root = task_dir(tmp_path / "t", TASK.replace(MATERIAL_LIST, 'material = ["evaluate.py", "notes.md"]'))
    (root / "notes.md").symlink_to(root / "statement.md")
    assert main(["tasks", "check", "--no-run", str(root)]) == 0, capsys.readouterr().err


def test_search_where_every_node_is_invalid_exits_non_zero(tmp_path, capsys):
    task = task_dir(tmp_path / "t")
    (task / "evaluate.py").write_text(
        "import json\njson.dump({'score': None, 'valid': False, 'message': 'never'}, open('result.json', 'w'))\n"
    )
    argv = [
        "search",
        str(task),
        "--method",
        "mutate",
        "--evals",
        "2",
        "--run-dir",
        str(tmp_path / "run"),
        "-q",
    ]
    assert main(argv) == 1
    assert "every one of the" in capsys.readouterr().err


# ---- evaluators that print garbage or lie: the node is invalid, with a reason that says why ----

WRITE = "import json, sys\nopen('result.json', 'w').write({!r})\n"
LIARS: dict[str, tuple[str, str]] = {
    "prints garbage, writes nothing": (
        "print('score: 0.99 \\x00\\x1b[2J garbage')\n",
        "no result.json written",
    ),
    "result.json not JSON": (WRITE.format("score=1"), "malformed result.json"),
    "result.json a list": (WRITE.format("[1.0, true]"), "the top level must be an object"),
    "result.json empty": (WRITE.format(""), "malformed result.json"),
    "missing valid": (WRITE.format('{"score": 1.0}'), "'valid' must be true or false"),
    "valid a string": (WRITE.format('{"score": 1.0, "valid": "yes"}'), "'valid' must be true or false"),
    "missing score but valid": (WRITE.format('{"valid": true}'), "valid=true but score is null"),
    "score NaN": (WRITE.format('{"score": NaN, "valid": true}'), "non-finite score"),
    "score Infinity": (WRITE.format('{"score": Infinity, "valid": true}'), "non-finite score"),
    "score -Infinity": (WRITE.format('{"score": -Infinity, "valid": true}'), "non-finite score"),
    "score beyond float": (WRITE.format('{"score": 1' + "0" * 400 + ', "valid": true}'), "non-finite score"),
    "score a string": (WRITE.format('{"score": "0.99", "valid": true}'), "'score' must be a number"),
    "score a bool": (WRITE.format('{"score": true, "valid": true}'), "'score' must be a number"),
    "score an object": (WRITE.format('{"score": {"value": 1}, "valid": true}'), "'score' must be a number"),
    "metrics a list": (WRITE.format('{"score": 1, "valid": true, "metrics": [1]}'), "'metrics' an object"),
    "message a number": (WRITE.format('{"score": 1, "valid": true, "message": 5}'), "'message' a string"),
    "result.json over 1 MiB": (
        "open('result.json', 'w').write(' ' * (2 << 20) + '{}')\n",
        "larger than 1 MiB",
    ),
    "result.json a folder": ("import os\nos.mkdir('result.json')\n", "result.json"),
    "exits 3": (
        "import sys\nprint('boom: bad input', file=sys.stderr)\nsys.exit(3)\n",
        "exit status 3: boom: bad input",
    ),
    "crash with a 1 MB last line": ("raise ValueError('x' * 1_000_000)\n", "exit status 1"),
    "kills itself": ("import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n", "SIGTERM"),
    "says invalid": (
        WRITE.format('{"score": null, "valid": false, "message": "diverged"}'),
        "evaluator: diverged",
    ),
}


@pytest.mark.parametrize("name", list(LIARS))
def test_an_evaluator_that_lies_gives_an_invalid_node_with_a_reason(name, tmp_path, capsys):
    root = task_dir(tmp_path / "t")
    (root / "evaluate.py").write_text(LIARS[name][0])
    rc = main(["eval", str(root), "--json"])
    out = capsys.readouterr()
    result = json.loads(out.out)
    assert rc == 1 and not result["valid"] and result["score"] is None, result
    assert LIARS[name][1] in result["reason"] and len(result["reason"]) < 600, result["reason"]
    assert "Traceback" not in out.err


MEMORY_HOG = "import numpy as np\nBIG = np.ones((1 << 30) // 8 * 6)\n\ndef build_model():\n    return None\n"
LONG_CRASH = "def build_model():\n    raise ValueError('x' * 2_000_000)\n"


@pytest.mark.parametrize(
    "model, words",
    [(MEMORY_HOG, "memory"), (LONG_CRASH, "ValueError: xxxx")],
    ids=["memory-killed candidate", "candidate crash with a 2 MB line"],
)
def test_a_failing_candidate_gets_a_bounded_reason_that_says_why(model, words, tmp_path, capsys):
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "model.py").write_text(model)
    rc = main(["eval", "friedman-regression", "--files", str(tmp_path / "files"), "--json"])
    result = json.loads(capsys.readouterr().out)
    assert rc == 1 and not result["valid"], result
    assert words in result["reason"] and len(result["reason"]) < 600, result["reason"]
    assert "larger than" not in result["reason"]


# ---- kills: a run killed at any moment resumes and loses nothing ----

SLOW_EVALUATOR = (
    "import json, time\ntime.sleep(0.4)\njson.dump({'score': 1.0, 'valid': True}, open('result.json', 'w'))\n"
)
SLOW_GRADER = (
    "import json, os, time\nopen('truth.txt').read() if os.path.exists('truth.txt') else None\n"
    "time.sleep(float(open('grader/delay.txt').read()))\n"
    "json.dump({'score': 2.0, 'valid': True}, open('result.json', 'w'))\n"
)


def _arts(*argv: str) -> subprocess.Popen:
    code = "import sys; from arts.search.cli.main import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.Popen([sys.executable, "-c", code, *argv], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip


def _wait_for(check: Callable[[], bool], timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def _nodes(run: Path) -> list[str]:
    return sorted(p.name for p in (run / "nodes").glob("*")) if (run / "nodes").is_dir() else []


@pytest.mark.slow
def test_a_run_killed_mid_search_resumes_and_keeps_its_nodes(tmp_path, capsys):
    root = task_dir(tmp_path / "t")
    (root / "evaluate.py").write_text(SLOW_EVALUATOR)
    run = tmp_path / "run"
    proc = _arts("search", str(root), "--method", "mutate", "--evals", "6", "--run-dir", str(run), "-q")
    _wait_for(lambda: len(_nodes(run)) >= 3)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    kept = _nodes(run)[:-1]  # the last may be the experiment in flight
    again = ["search", str(root), "--method", "mutate", "--run-dir", str(run)]
    assert main(again) == 2 and "--resume" in capsys.readouterr().err  # a fresh start refuses, loses nothing
    assert main(["search", "--resume", str(run), "-q"]) == 0
    assert set(kept) <= set(_nodes(run))
    assert "best 1 (node 1" in capsys.readouterr().out


@pytest.mark.slow
def test_a_kill_during_the_final_test_leaves_no_hidden_file_in_the_run(tmp_path, capsys):
    root = task_dir(tmp_path / "t", TASK.replace(MATERIAL_LIST, MATERIAL_LIST + '\nhidden = ["grader/"]'))
    (root / "task.toml").write_text(
        (root / "task.toml").read_text() + '[test]\ncommand = ["python", "grader/test.py"]\ntimeout_s = 60\n'
    )
    (root / "grader").mkdir()
    (root / "grader" / "test.py").write_text(SLOW_GRADER)
    (root / "grader" / "delay.txt").write_text("30")
    run = tmp_path / "run"
    proc = _arts("search", str(root), "--method", "mutate", "--evals", "1", "--run-dir", str(run), "-q")

    def grading() -> bool:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if b"grader/test.py" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    return True
            except OSError:
                pass
        return False

    _wait_for(grading)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    left = [str(p.relative_to(run)) for p in run.rglob("*")]
    assert not [p for p in left if "grader" in p or "test-work" in p or "delay" in p], left
    (root / "grader" / "delay.txt").write_text("0")
    assert main(["search", "--resume", str(run), "-q"]) == 0
    assert "test 2" in capsys.readouterr().out
    assert not [p for p in run.rglob("*") if "grader" in str(p) or "test-work" in str(p)]


if __name__ == "__main__":  # the figures: python tests/test_bad_inputs.py
    import io
    import tempfile
    from contextlib import redirect_stderr

    clear = tracebacks = silent = 0
    for name, (make, expected) in {**CLI, **TASK_TOML}.items():
        with tempfile.TemporaryDirectory() as d, redirect_stderr(io.StringIO()) as err:
            os.chdir(d)
            try:
                rc = main(make(Path(d)))
            except SystemExit as e:
                rc = e.code
            except Exception:
                tracebacks += 1
                continue
        text = err.getvalue()
        silent += rc in (0, None)
        ok = rc not in (0, None) and "Traceback" not in text and expected in text
        clear += ok
        if not ok:
            print(f"unclear: {name}: {text.strip()[:200]}")
    print(
        f"bad inputs {len(CLI) + len(TASK_TOML)} / clear {clear} / tracebacks {tracebacks} / silent {silent}"
    )
