"""The test-at-each-commit probe (`tasks.history`) on a hand-made history, and its verdict in an
investigation: a finding of the tool's own, whose relation follows what it blames, and which narrows the
answer's menu whatever the hypothesis said. The search path on the built-in regression-bisect is in
tests/test_regression_bisect.py."""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import pytest

from arts.policy import answer_menus
from arts.policy.investigator import Investigator, Tools
from arts.search import diagnose
from arts.search.assembly import material_paths, material_texts
from arts.tasks import history
from tests.doubles import ScriptedBackend, make_case

TEST = "import calc\n\n\ndef test_add():\n    assert calc.add(2, 3) == 5\n"
STEPS = [  # (message, calc.py after the commit): the second one breaks test_add
    ("add a docstring", '"""Arithmetic."""\n\n\ndef add(a, b):\n    return a + b\n'),
    ("tidy add", '"""Arithmetic."""\n\n\ndef add(a, b):\n    return a - b\n'),
    ("a helper", '"""Arithmetic."""\n\n\ndef add(a, b):\n    return a - b\n\n\ndef one():\n    return 1\n'),
]
START = "def add(a, b):\n    return a + b\n"


def case_files(steps=STEPS, start=START, test=TEST) -> dict[str, str]:
    """A case folder `cases/h`: commits 01-03 as unified diffs, the program after them, the failed run."""
    files, before = {}, start
    for k, (message, after) in enumerate(steps, start=1):
        diff = difflib.unified_diff(before.splitlines(True), after.splitlines(True), "a/calc.py", "b/calc.py")
        files[f"cases/h/commits/{k:02d}.txt"] = f"commit {k:02d}\n\n    {message}\n\n{''.join(diff)}"
        before = after
    files["cases/h/src/calc.py"], files["cases/h/src/test_calc.py"] = before, test
    files["cases/h/test_output.txt"] = "$ python -m pytest test_calc.py\n\ntest_calc.py::test_add FAILED\n"
    return files


def bisect(tmp_path: Path, files: dict[str, str]) -> tuple[str, str | None]:
    task = make_case(tmp_path, {k.replace("cases/", "incidents/", 1): v for k, v in files.items()})
    paths = material_paths(task)
    assert history.history_folders(paths) == ["incidents/h"]
    return history.bisect(task, material_texts(task, paths), "incidents/h", tmp_path / "work")


def test_bisect_blames_the_commit_after_which_the_test_fails_and_its_verdict_names_no_other(tmp_path):
    output, blamed = bisect(tmp_path, case_files())
    assert blamed == "02"
    verdict = output.splitlines()[0]
    assert verdict == "commit 02 is the first after which test_add fails; it passed before"
    ids = {"01", "02", "03"}
    assert answer_menus.words(output) & ids == {"02"}  # a note quoting any line names 02 alone
    assert "passed at 2 of 4 states, then fails (AssertionError)" in output


def test_a_test_that_never_passes_or_comes_back_blames_nothing():
    h = history.History("cases/h", [("01", ""), ("02", ""), ("03", "")], {}, "src", "test_calc", "test_add")
    always, broken, flaky = (
        ["fails"] * 4,
        ["passes", "passes", "fails", "fails"],
        ["passes", "fails", "passes", "fails"],
    )
    assert history.report(h, always)[1] is None and "older than this history" in history.report(h, always)[0]
    assert history.report(h, broken)[1] == "02"
    assert history.report(h, flaky)[1] is None and "no single commit" in history.report(h, flaky)[0]
    assert history.report(h, ["passes"] * 4)[1] is None


def test_a_history_whose_diffs_do_not_undo_names_the_commit(tmp_path):
    files = case_files()
    files["cases/h/src/calc.py"] = files["cases/h/src/calc.py"].replace("def one", "def two")
    with pytest.raises(history.HistoryError, match="commit 03 does not undo on calc.py"):
        bisect(tmp_path, files)
    files.pop("cases/h/test_output.txt")
    task = make_case(tmp_path / "b", files)
    with pytest.raises(history.HistoryError, match="FAILED"):
        history.load(material_texts(task, material_paths(task)), "cases/h")


def test_a_program_that_hangs_is_stopped_and_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(history, "TIMEOUT_S", 1)
    hang = "import calc\n\n\ndef test_add():\n    while calc.add(2, 3) != 5:\n        pass\n"
    output, blamed = bisect(tmp_path, case_files(test=hang))
    assert blamed == "02" and "stopped (timeout)" in output


@pytest.mark.parametrize(
    ("hypothesis", "relation"), [("suspect h.02", "support"), ("suspect h.01", "oppose")]
)
def test_the_verdict_is_a_finding_of_the_tool_that_narrows_the_menu_whatever_it_opposes(
    tmp_path, hypothesis, relation
):
    """Small profile: the first step is the bisect, its verdict a finding of its own (relation by what it
    blames), the next step free; the commit menu keeps what the verdict names even where it opposes."""
    output = bisect(tmp_path, case_files())
    backend = ScriptedBackend(
        [
            {"op": "bisect", "folder": "cases/h"},
            {"op": "read", "file": "cases/h/commits/02.txt", "start": 1},
            {"op": "note", "observation": "1: commit 02", "relation": "neutral"},
            {"op": "grep", "pattern": "02", "file": "cases/h/src/calc.py"},
            {"commit": "02", "kind": "wrong_operator"},
        ]
    )
    ran: list[str] = []
    tools = Tools(
        files=["cases/h/commits/01.txt", "cases/h/commits/02.txt", "cases/h/src/calc.py"],
        read=lambda path, start: "1: commit 02",
        grep=lambda pattern, path: "5: return a - b",
        histories=["cases/h"],
        bisect=lambda folder: ran.append(folder) or output,
        words=["01", "02", "03"],
    )
    menu = {
        "type": "object",
        "required": ["commit", "kind"],
        "properties": {
            "commit": {"type": "string", "enum": ["01", "02", "03"]},
            "kind": {"type": "string", "enum": ["off_by_one", "wrong_operator"]},
        },
    }
    models = []
    result = Investigator(backend).run(
        hypothesis,
        None,
        lambda found: models.append(diagnose.noted_model(menu, found, "h")) or models[-1],
        tools,
    )
    assert ran == ["cases/h"]
    first = backend.calls[0]["schema"].model_json_schema()
    assert set(first["$defs"]) == {"BisectAction"}  # the overview first, and nothing else
    tool = result.findings[0]
    assert (tool.by, tool.relation, tool.text) == ("bisect", relation, output[0].splitlines()[0])
    second = str(backend.calls[1]["schema"].model_json_schema())
    assert "ReadAction" in second and "BisectAction" not in second  # free, since the tool noted; once
    commit = models[0].model_json_schema()["properties"]["commit"]
    assert commit.get("enum", [commit.get("const")]) == ["02"]
    assert result.answer == {"commit": "02", "kind": "wrong_operator"}


def test_tasks_check_says_when_a_history_cannot_be_replayed(tmp_path, capsys):
    from arts.search.cli.main import main

    files = {k.replace("cases/", "incidents/", 1): v for k, v in case_files().items()}
    files["incidents/h/src/calc.py"] += "# edited after the last commit\n"
    files["incidents/h/src/calc.py"] = files["incidents/h/src/calc.py"].replace("def one", "def two")
    task = make_case(tmp_path, files)
    schema = {"type": "object", "properties": {"commit": {"type": "string", "enum": ["01", "02", "03"]}}}
    (task.root / "answer_schema.json").write_text(json.dumps({"type": "object", "properties": {"incidents": {
        "type": "object", "properties": {"h": schema, "i1": schema}}}}))  # fmt: skip
    toml = (
        (task.root / "task.toml")
        .read_text()
        .replace('material = ["incidents/"]', 'material = ["incidents/", "answer_schema.json"]')
    )
    (task.root / "task.toml").write_text(
        toml + '[answer]\nfile = "answer.json"\nschema = "answer_schema.json"\n'
    )
    assert main(["tasks", "check", str(task.root)]) == 0
    out = capsys.readouterr().out
    assert "bisect incidents/h: cannot replay: incidents/h: commit 03 does not undo on calc.py" in out
