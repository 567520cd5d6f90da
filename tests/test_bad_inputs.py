"""Bad inputs through the `arts` command: each gives one clear line naming the file or field and the fix,
a non-zero exit, no traceback, and nothing lost (a run folder is never overwritten)."""

import sys
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


def task_dir(root: Path, toml: str = TASK, statement: bytes = b"A task.\n") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "task.toml").write_text(toml) if isinstance(toml, str) else (root / "task.toml").write_bytes(toml)
    (root / "statement.md").write_bytes(statement)
    (root / "evaluate.py").write_text(
        "import json\njson.dump({'score': 1.0, 'valid': True}, open('result.json', 'w'))\n"
    )
    (root / "solution.py").write_text("X = 1\n")
    return root


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


def _config(tmp: Path, content: bytes) -> list[str]:
    (tmp / "c.toml").write_bytes(content)
    return ["search", "--config", str(tmp / "c.toml"), str(task_dir(tmp / "t"))]


def _check(toml: str | bytes, statement: bytes = b"A task.\n") -> Callable[[Path], list[str]]:
    return lambda tmp: ["tasks", "check", str(task_dir(tmp / "t", toml, statement))]


BAD_INPUTS: dict[str, tuple[Callable[[Path], list[str]], str]] = {
    "config file missing": (
        lambda tmp: ["search", "--config", str(tmp / "nope.toml"), "x"],
        "nope.toml: no such file",
    ),
    "config file not UTF-8": (lambda tmp: _config(tmp, b"seed = 1\n# \xff\xfe\n"), "not UTF-8"),
    "config file not TOML": (lambda tmp: _config(tmp, b"seed = = 1\n"), "c.toml: not valid TOML"),
    "run dir is a file": (_run_dir_is_file, "is a file"),
    "resume: arts.db not SQLite": (_resume_not_sqlite, "is not an arts run store"),
    "resume: config.toml broken": (_resume_bad_config, "config.toml: not a readable config"),
    "resume: no run there": (lambda tmp: ["search", "--resume", str(tmp / "empty")], "holds no run"),
    "timeout_s = 1e300": (_check(TASK.replace("timeout_s = 5", "timeout_s = 1e300")), "evaluate.timeout_s"),
    "timeout_s = inf": (_check(TASK.replace("timeout_s = 5", "timeout_s = inf")), "evaluate.timeout_s"),
    "memory_mb = 10^12": (
        _check(TASK.replace("memory_mb = 512", "memory_mb = 1000000000000")),
        "evaluate.memory_mb",
    ),
    "task.toml not UTF-8": (_check(TASK.encode() + b"# \xff\n"), "task.toml: not UTF-8"),
    "task.toml not TOML": (_check(TASK + "kind = \n"), "task.toml: not valid TOML"),
    "statement not UTF-8": (_check(TASK, b"\xff\xfe caf\xe9"), "field 'statement'"),
    "editable file missing": (_check(TASK.replace("solution.py", "missing.py")), "seedless = true"),
    "unknown task name": (lambda tmp: ["eval", "no-such-task"], "neither a built-in task nor a directory"),
}


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_bad_input_gives_one_clear_line(name, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make, expected = BAD_INPUTS[name]
    argv = make(tmp_path)
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse's own usage errors are clear lines too
        rc = e.code
    err = capsys.readouterr().err
    assert rc not in (0, None), f"{name}: accepted silently"
    assert "Traceback" not in err and err.strip(), err
    assert expected in err, err


def test_every_task_check_problem_names_the_file(tmp_path, capsys):
    rc = main(
        ["tasks", "check", str(task_dir(tmp_path / "t", TASK.replace("memory_mb = 512", "memory_mb = -1")))]
    )
    assert rc != 0 and "task.toml" in capsys.readouterr().err


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


if __name__ == "__main__":  # the figures: python tests/test_bad_inputs.py
    import io
    import tempfile
    from contextlib import redirect_stderr

    clear = tracebacks = silent = 0
    for name, (make, expected) in BAD_INPUTS.items():
        with tempfile.TemporaryDirectory() as d, redirect_stderr(io.StringIO()) as err:
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
        f"bad inputs {len(BAD_INPUTS)} / clear {clear} / tracebacks {tracebacks} / silent {silent}",
        file=sys.stdout,
    )
