"""The built-in diagnosis task regression-bisect: its answer schema, its hidden grader, the calibration of its
generator (a traceback-and-recency heuristic scores about a third, a careful reader finds every breaking
commit) and its reproducibility.

The careful reader here undoes the commits' diffs from the final tree and reruns the failing test before each
commit: the first commit after which it fails is the break. The generator (scripts/make_bisect.py) and the
heuristic (scripts/bisect_heuristic.py) are run as the commands they are; `--truth-out` gives the truth of a
generated case.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from arts.search.assembly import material_paths, material_texts
from arts.search.cli.main import main
from arts.tasks import history
from arts.tasks.base import BUILTIN_DIR, Task, load_task, resolve_task
from arts.tasks.evaluate import run_evaluation

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
COMMITTED = BUILTIN_DIR / "regression-bisect"
KINDS = ("off_by_one", "wrong_constant", "swapped_arguments", "wrong_operator", "removed_guard")
"""The fault kinds, in the answer schema's order."""
CALIBRATION = 24
"""Cases generated for the calibration checks (`--seed 0`: seeds 1..24, none of the committed task's)."""


def generate(out: Path, *args: str) -> dict[str, dict[str, str]]:
    """`make_bisect.py --out out` with `args`: the task's truth, case -> commit and kind."""
    truth = out.parent / f"{out.name}-truth.json"
    cmd = [sys.executable, str(SCRIPTS / "make_bisect.py"), "--out", str(out), "--truth-out", str(truth)]
    subprocess.run([*cmd, *args], check=True, capture_output=True, timeout=300)
    return json.loads(truth.read_text())


def heuristic(task_dir: Path | None, out: Path) -> dict:
    """`bisect_heuristic.py`'s answer.json on a task folder (None: its default, the committed task)."""
    args = [] if task_dir is None else ["--task", str(task_dir)]
    cmd = [sys.executable, str(SCRIPTS / "bisect_heuristic.py"), *args, "--out", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def task() -> Task:
    return load_task(COMMITTED)


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory) -> tuple[Path, dict[str, dict[str, str]]]:
    """The committed task made anew from its default seed: (folder, truth)."""
    out = tmp_path_factory.mktemp("regenerated") / "task"
    return out, generate(out)


@pytest.fixture(scope="module")
def truth(regenerated) -> dict[str, dict[str, str]]:
    """The committed task's truth (the regenerated task is the committed one, byte for byte: tested below)."""
    return regenerated[1]


@pytest.fixture(scope="module")
def calibration(tmp_path_factory) -> tuple[Path, dict[str, dict[str, str]]]:
    """CALIBRATION generated cases: (task folder, truth)."""
    out = tmp_path_factory.mktemp("calibration") / "task"
    return out, generate(out, "--seed", "0", "--cases", str(CALIBRATION))


def _commits(case: Path) -> list[str]:
    return sorted(p.stem for p in (case / "commits").glob("*.txt"))


def _score(answer: dict, truth: dict) -> float:
    return 0.75 * (answer["commit"] == truth["commit"]) + 0.25 * (answer["kind"] == truth["kind"])


def _grade(task: Task, answer: dict | str | None, workdir: Path):
    text = answer if answer is None or isinstance(answer, str) else json.dumps(answer)
    return run_evaluation(task, {} if text is None else {"answer.json": text}, workdir, split="test")


# ---- the task and its answer contract ----


def test_task_loads_seedless_with_its_answer_schema(task: Task):
    assert task.config.kind == "answer" and task.config.evaluate is None and task.seedless
    assert task.config.answer.file == "answer.json" and "answer.json" in task.config.editable
    cases = task.answer_schema()["properties"]["cases"]
    assert cases["required"] == ["c1", "c2", "c3", "c4"]
    for case in cases["required"]:
        verdict = cases["properties"][case]["properties"]
        assert verdict["commit"]["enum"] == _commits(task.root / "cases" / case)
        assert verdict["kind"]["enum"] == list(KINDS)
    assert len(task.statement.split()) <= 320


def test_tasks_check_and_eval_take_it_by_name(truth, tmp_path: Path, capsys):
    assert main(["tasks", "check", "regression-bisect"]) == 0
    out = capsys.readouterr().out
    assert "regression-bisect (answer)" in out
    assert "c2: 12 files, menus 7/7 5/5, compare -, bisect cases/c2 (7 commits, test_summary)" in out
    (tmp_path / "answer.json").write_text(json.dumps({"cases": truth}))
    assert main(["eval", "regression-bisect", "--files", str(tmp_path), "--test", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["valid"] and out["score"] == 1.0 and out["metrics"]["bisect_score"] == 1.0


# ---- the hidden grader, run as the search runs it ----


def test_grader_scores_the_truth_one_and_a_wrong_answer_zero(task: Task, truth, tmp_path: Path):
    right = _grade(task, {"cases": truth}, tmp_path / "right")
    assert right.valid and right.score == 1.0 and right.metrics["c3_kind"] == 1.0
    assert "4/4 breaking commits and 4/4 fault kinds" in right.message
    wrong = {
        case: {
            "commit": next(c for c in _commits(task.root / "cases" / case) if c != t["commit"]),
            "kind": next(k for k in KINDS if k != t["kind"]),
        }
        for case, t in truth.items()
    }
    result = _grade(task, {"cases": wrong}, tmp_path / "wrong")
    assert result.valid and result.score == 0.0 and "0/4 breaking commits" in result.message
    kinds_only = {case: {"commit": wrong[case]["commit"], "kind": t["kind"]} for case, t in truth.items()}
    assert _grade(task, {"cases": kinds_only}, tmp_path / "kinds").score == 0.25
    assert not (tmp_path / "wrong" / "grader").exists()  # hidden files leave with the run


def _edited(truth: dict, edit) -> str:
    answer = {"cases": json.loads(json.dumps(truth))}
    edit(answer)
    return json.dumps(answer)


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda t: '{"cases": ', "not valid JSON"),
        (lambda t: _edited(t, lambda a: a["cases"].pop("c2")), "answer.json.cases: missing c2"),
        (lambda t: _edited(t, lambda a: a["cases"]["c1"].update(kind="typo")), "answer.json.cases.c1.kind: 'typo' is not one of"),
        (lambda t: _edited(t, lambda a: a["cases"]["c4"].update(commit="99")), "answer.json.cases.c4.commit: '99' is not one of"),
        (lambda t: _edited(t, lambda a: a["cases"]["c1"].update(commit=3)), "answer.json.cases.c1.commit: 3 is not one of"),
        (lambda t: _edited(t, lambda a: a["cases"]["c3"].pop("kind")), "answer.json.cases.c3: missing kind"),
        (lambda t: _edited(t, lambda a: a.update(notes="hi")), "unknown notes"),
        (lambda t: "[]", "answer.json: expected an object"),
        (lambda t: None, "answer.json is missing"),
    ],
)  # fmt: skip
def test_grader_calls_a_malformed_answer_invalid_and_says_why(task: Task, truth, tmp_path: Path, make, words):
    result = _grade(task, make(truth), tmp_path)
    assert not result.valid and result.score is None and words in result.message


def test_truth_file_reveals_nothing_and_the_material_holds_no_truth(task: Task):
    text = (task.hidden_root / "grader" / "truth.json").read_text()
    assert not any(k in text for k in KINDS) and not re.search(r'"0\d"', text)
    material = [str(p) for p in task.material_files()]
    assert material and not any("truth" in p or p.startswith("grader") for p in material)
    for rel in material:
        body = (task.root / rel).read_text()
        if rel != "answer_schema.json":  # the schema lists every kind on purpose
            assert not any(k in body for k in KINDS), rel
        assert "seed" not in body.lower() and "make_bisect" not in body, rel


# ---- the generator's calibration ----


def _undo(text: str, patch: str) -> str:
    """`text` (the file after the commit) with the commit's hunks undone."""
    lines = text.splitlines(True)
    hunks = re.split(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@\n", patch, flags=re.M)[1:]
    for start, count, body in reversed(list(zip(hunks[0::3], hunks[1::3], hunks[2::3]))):
        rows = body.splitlines(True)
        after = [r[1:] for r in rows if r[0] in " +"]
        before = [r[1:] for r in rows if r[0] in " -"]
        at = int(start) - (count != "0")
        assert lines[at : at + len(after)] == after, "the diff does not match the tree after it"
        lines[at : at + len(after)] = before
    return "".join(lines)


def _passes(tree: dict[str, str], test: str, workdir: Path) -> bool:
    workdir.mkdir(parents=True)
    for name, text in tree.items():
        (workdir / name).write_text(text)
    module = next(n.removesuffix(".py") for n in tree if n.startswith("test_"))
    run = [sys.executable, "-B", "-c", f"import {module}; {module}.{test}()"]
    return subprocess.run(run, cwd=workdir, capture_output=True, timeout=60).returncode == 0


def _states(case: Path) -> list[dict[str, str]]:
    """The program before the first commit, after the first, ..., after the last: the diffs undone from
    the final tree by `_undo`."""
    tree = {p.name: p.read_text() for p in (case / "src").iterdir()}
    states = [dict(tree)]
    for commit in reversed(sorted((case / "commits").glob("*.txt"))):
        patch = commit.read_text().split("\n\n", 2)[2]
        file = re.search(r"^\+\+\+ b/(\S+)$", patch, flags=re.M).group(1)
        tree[file] = _undo(tree[file], patch.split("\n", 2)[2])
        states.insert(0, dict(tree))
    return states


def _careful(case: Path, workdir: Path) -> str | None:
    """The commit after which the failing test first fails, found by undoing the diffs from the final tree;
    None where the history is not that (the test fails at the start, or passes again later)."""
    test = re.search(r"::(\w+) FAILED$", (case / "test_output.txt").read_text(), flags=re.M).group(1)
    states = _states(case)
    passing = [_passes(s, test, workdir / f"state{k}") for k, s in enumerate(states)]
    first_fail = passing.index(False) if False in passing else 0
    ok = first_fail > 0 and all(passing[:first_fail]) and not any(passing[first_fail:])
    return f"{first_fail:02d}" if ok else None


def test_heuristic_scores_about_a_third_while_a_careful_reader_finds_every_break(calibration, tmp_path: Path):
    folder, truth = calibration
    answer = heuristic(folder, tmp_path / "answer.json")["cases"]
    assert len(truth) == CALIBRATION
    scores = [_score(answer[c], t) for c, t in truth.items()]
    assert 0.15 <= statistics.mean(scores) <= 0.6
    careful = {c: _careful(folder / "cases" / c, tmp_path / c) for c in truth}
    assert careful == {c: t["commit"] for c, t in truth.items()}


def test_the_bisect_tool_undoes_each_history_as_the_careful_reader_does(calibration):
    """`tasks.history.states` (whatthepatch) against this file's own undo, on every generated case."""
    folder, truth = calibration
    for case in truth:
        root = folder / "cases" / case
        texts = {str(p.relative_to(folder)): p.read_text() for p in root.rglob("*") if p.is_file()}
        assert history.states(history.load(texts, f"cases/{case}")) == _states(root), case


def test_the_bisect_tool_blames_every_committed_case_s_breaking_commit(task: Task, truth, tmp_path: Path):
    texts = material_texts(task, material_paths(task))
    assert history.history_folders(list(texts)) == [f"cases/{c}" for c in sorted(truth)]
    for case, t in truth.items():
        output, blamed = history.bisect(task, texts, f"cases/{case}", tmp_path / case)
        assert blamed == t["commit"], output


def test_arts_search_bisects_each_case_once_and_answers_with_the_commits_the_test_blames(
    truth, tmp_path: Path, rules
):
    """Through `arts search` with a scripted model: every investigation replays its case's history first,
    the verdict is stored as the tool's note, a settled case leaves the scientist's menus while another is
    open (no node of a later round takes a case settled before it, so three rounds of two see all four),
    and the final answer names each case's breaking commit."""
    from arts.search import assembly
    from arts.search.store import Store

    run = tmp_path / "run"
    args = ["search", "regression-bisect", "--group", "2", "--rounds", "3", "--run-dir", str(run), "-q"]
    assert main(args) == 0
    with Store.open_readonly(run) as store:
        state = store.load_state()
    done = sorted((n for n in state.nodes.values() if assembly.part_of(n)), key=lambda n: n.id)
    assert {assembly.part_of(n) for n in done} == {"c1", "c2", "c3", "c4"}
    for n in done:
        assert n.transcript[1]["op"] == "bisect" and n.transcript[2]["by"] == "bisect"
        assert assembly.settled(n)
        assert assembly.part_of(n) not in {assembly.part_of(m) for m in done if m.round < n.round}
    answer = json.loads((run / "best" / "answer.json").read_text())["cases"]
    assert {c: a["commit"] for c, a in answer.items()} == {c: t["commit"] for c, t in truth.items()}
    assert json.loads((run / "summary.json").read_text())["best"]["test_score"] >= 0.75


def test_heuristic_scores_the_committed_task_strictly_between_zero_and_one(truth, tmp_path: Path, capsys):
    answer = heuristic(None, tmp_path / "answer.json")
    assert set(answer["cases"]) == {"c1", "c2", "c3", "c4"}
    expected = statistics.mean(_score(answer["cases"][c], t) for c, t in truth.items())
    assert 0 < expected < 1
    assert main(["eval", "regression-bisect", "--files", str(tmp_path), "--test", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["score"] == pytest.approx(expected)


# ---- reproducibility ----


def _files(folder: Path) -> dict[Path, bytes]:
    return {
        p.relative_to(folder): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_regenerating_from_the_committed_seed_reproduces_the_task_byte_for_byte(regenerated):
    made, committed = _files(regenerated[0]), _files(COMMITTED)
    assert sorted(made) == sorted(committed)
    assert [rel for rel in made if made[rel] != committed[rel]] == []


def test_a_seed_makes_one_task_and_another_seed_another(tmp_path: Path):
    made = {name: generate(tmp_path / name, "--seed", seed, "--cases", "2") for name, seed in
            (("a", "5"), ("b", "5"), ("c", "6"))}  # fmt: skip
    assert made["a"] == made["b"] and _files(tmp_path / "a") == _files(tmp_path / "b")
    assert _files(tmp_path / "a") != _files(tmp_path / "c")
    hidden = [(tmp_path / n / "make_hidden.py").read_text() for n in ("a", "c")]
    assert hidden[0] != hidden[1]  # each seed's truth goes into its own grader


def test_a_task_made_from_another_seed_grades_its_own_truth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The truth and its digest in make_hidden.py are both the new seed's: its build passes its own check."""
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # keep __pycache__ out of the task folder
    out = tmp_path / "task"
    truth = generate(out, "--seed", "5", "--cases", "2")
    spec = importlib.util.spec_from_file_location("make_hidden_seed5", out / "make_hidden.py")
    hidden = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hidden)
    hidden.build(out)  # a task outside the built-in folder keeps its hidden files in place
    assert {
        rel: hashlib.sha256((out / rel).read_bytes()).hexdigest() for rel in hidden.DIGESTS
    } == hidden.DIGESTS
    result = _grade(load_task(out), {"cases": truth}, tmp_path / "run")
    assert result.valid and result.score == 1.0


def test_the_truth_may_not_be_written_into_the_task_folder(tmp_path: Path):
    cmd = [sys.executable, str(SCRIPTS / "make_bisect.py"), "--out", str(tmp_path), "--truth-out",
           str(tmp_path / "truth.json")]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "would be task material" in out.stderr
    assert not (tmp_path / "truth.json").exists()


def test_the_bench_runs_the_diagnosis_suite(tmp_path: Path, capsys):
    out = tmp_path / "bench"
    assert main(["bench", "--tasks", "diagnosis", "--methods", "arts", "--seeds", "1", "--out", str(out),
                 "--report"]) == 0  # fmt: skip
    assert "tasks incident-rca, regression-bisect; methods arts" in (out / "summary.md").read_text()


def test_the_bench_scores_an_answer_task_by_its_grade():
    """An answer task shows the search no score: the bench normalises its runs by the hidden grade (0 no
    answer, 1 the truth), so the diagnosis suite has an IQM and differences like any other."""
    from arts.search.bench.report import normalise
    from arts.search.bench.results import RunResult

    task = resolve_task("regression-bisect")
    rows = [{"task": task.name, "method": "arts", "seed": s, "status": "finished", "best": None, "baseline": None,
             "test_score": grade} for s, grade in enumerate([0.25, 0.8125, None])]  # fmt: skip
    norms = normalise({task.name: task}, [RunResult(r) for r in rows])
    assert [r["normalised"] for r in rows[:2]] == [0.25, 0.8125] and math.isnan(rows[2]["normalised"])
    assert norms[task.name]["seed"] == 0.0 and norms[task.name]["reference"] == 1.0
