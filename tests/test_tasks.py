"""The task contract: each kind of mistake in task.toml gets an error naming the file, the field and the fix."""

from __future__ import annotations

import pytest

from arts.tasks.base import TaskError, builtin_names, load_task, resolve_task
from tests.doubles import TASK_TOML, write_task


def test_a_task_written_from_the_design_loads(tmp_path):
    task = load_task(write_task(tmp_path))
    assert task.name == "my-task" and task.seed_files() == {"solution.py": "x = 1\n"} and not task.seedless


@pytest.mark.parametrize(
    "change, field, words",
    [
        (('name = "my-task"', 'name = "My Task"'), "name", "lower-case"),
        (('direction = "maximize"', 'direction = "up"'), "metric.direction", "maximize"),
        (('kind = "optimize"', 'kind = "optimise"'), "kind", "optimize"),
        (('name = "score"', 'name = "score"\ncolour = "red"'), "metric.colour", "unknown field"),
        (('editable = ["solution.py"]', "editable = []"), "editable", "at least 1"),
        (('editable = ["solution.py"]', 'editable = ["../x.py"]'), "editable", "relative"),
        (('[evaluate]\ncommand = ["python", "evaluate.py"]\n', ""), "(top level)", "[evaluate]"),
        (('statement = "statement.md"', 'statement = "nope.md"'), "statement", "not found"),
        (('material = ["evaluate.py"]', 'material = ["evaluate.py", "data/"]'), "material", "not found"),
        (
            ('command = ["python", "evaluate.py"]', 'command = ["python", "grader/test.py"]'),
            "evaluate.command",
            "hidden",
        ),
    ],
)
def test_each_mistake_names_file_field_and_fix(tmp_path, change, field, words):
    write_task(tmp_path, TASK_TOML.replace(*change, 1))
    with pytest.raises(TaskError) as e:
        load_task(tmp_path)
    msg = str(e.value)
    assert str(tmp_path / "task.toml") in msg and f"field '{field}'" in msg and words in msg


def test_answer_task_needs_test_and_no_evaluate(tmp_path):
    toml = TASK_TOML.replace('kind = "optimize"', 'kind = "answer"')
    write_task(tmp_path, toml)
    with pytest.raises(TaskError, match="no \\[evaluate\\] section"):
        load_task(tmp_path)


def test_bad_toml_and_missing_file_are_explained(tmp_path):
    with pytest.raises(TaskError, match="missing; a task directory needs a task.toml"):
        load_task(tmp_path)
    (tmp_path / "task.toml").write_text("name = ")
    with pytest.raises(TaskError, match="not valid TOML"):
        load_task(tmp_path)


def test_unknown_task_lists_the_builtins():
    with pytest.raises(TaskError, match="circle-packing-26"):
        resolve_task("no-such-task")


def test_minimise_tasks_are_normalised_so_higher_is_better():
    task = resolve_task("bin-packing-weibull")
    assert task.normalise(4.0) > task.normalise(5.0)
    assert task.normalise(float("nan")) is None
    assert set(builtin_names()) == {
        "bin-packing-weibull", "breast-cancer-tree", "char-lm", "circle-packing-26", "digits-classifier",
        "friedman-regression", "incident-rca", "probe-jacobi", "probe-kepler", "probe-quadrature", "probe-ridge",
        "regression-bisect", "weighted-completion",
    }  # fmt: skip
