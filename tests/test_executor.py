"""The executor loop: harness tests with a scripted backend, and one run with the real embedded model.

`ScriptedBackend` only tests the loop (stopping, feedback, budgets, transcript). Whether the model can
edit is tested against the embedded SmolLM2-135M (`test_embedded_model_produces_an_applied_edit`).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from arts.policy.edits.prompt import window
from arts.policy.executor import Executor, ExecutorConfig
from arts.tasks.base import EvalResult
from tests.doubles import ScriptedBackend

PROGRAM = '''RADIUS = 0.1
COUNT = 5


def score():
    """The program's score."""
    return COUNT * RADIUS
'''


def set_constant(name: str, value: float) -> dict:
    return {"op": "set_constant", "name": name, "value": value}


class Recorder:
    """A validate callable: valid when RADIUS >= `threshold`; records the files it receives."""

    def __init__(self, threshold: float = 0.2):
        self.threshold = threshold
        self.seen: list[dict[str, str]] = []

    def __call__(self, files: dict[str, str]) -> EvalResult:
        self.seen.append(dict(files))
        radius = next(
            ast.literal_eval(n.value)
            for n in ast.parse(files["solution.py"]).body
            if n.targets[0].id == "RADIUS"
        )
        if radius < self.threshold:
            return EvalResult(
                valid=False, reason="radius too small", stderr_tail="Traceback\nValueError: overlap"
            )
        return EvalResult(valid=True, score=radius)


def _run(answers: list, config: ExecutorConfig | None = None, files=None, hypothesis: str = "Double RADIUS."):
    backend, validate = ScriptedBackend(answers), Recorder()
    files = files if files is not None else {"solution.py": PROGRAM}
    result = Executor(backend, config or ExecutorConfig(constants_first=False, value_menu=False)).run(
        hypothesis, files, ["solution.py"], validate
    )
    return result, backend, validate


def _user(call: dict) -> str:
    return call["prompts"][-1]["content"]


def test_stops_at_the_first_valid_validation():
    result, backend, validate = _run([set_constant("RADIUS", 0.2), set_constant("RADIUS", 0.3)])
    assert result.result.valid and result.result.score == 0.2
    assert result.actions == 1 and len(backend.calls) == 1 and result.reason == ""
    assert "RADIUS = 0.2\n" in result.files["solution.py"]


@pytest.mark.parametrize("revert", [True, False])
def test_validate_receives_the_edited_files_and_a_failed_edit_is_reverted(revert):
    answers = [set_constant("COUNT", 6), set_constant("RADIUS", 0.4)]
    cfg = ExecutorConfig(constants_first=False, revert_failed=revert, value_menu=False)
    result, _, validate = _run(answers, cfg, hypothesis="Change the constants.")
    assert [f["solution.py"].splitlines()[:2] for f in validate.seen] == [
        ["RADIUS = 0.1", "COUNT = 6"],
        ["RADIUS = 0.4", "COUNT = 5" if revert else "COUNT = 6"],
    ]
    assert result.result.valid


def test_a_rejected_edit_is_shown_back_and_costs_one_action():
    body = {"op": "replace_function", "name": "score", "body": "return (COUNT"}
    result, backend, validate = _run([body, set_constant("RADIUS", 0.2)], hypothesis="Try a change.")
    assert result.actions == 2 and len(validate.seen) == 1
    assert "Last error: the edit was rejected: solution.py does not parse" in _user(backend.calls[1])
    assert result.transcript[0]["applied"] is False and "does not parse" in result.transcript[0]["error"]


def test_an_invalid_evaluation_is_shown_back_with_its_stderr_tail():
    result, backend, _ = _run([set_constant("RADIUS", 0.15), set_constant("RADIUS", 0.25)])
    prompt = _user(backend.calls[1])
    assert "evaluation failed: radius too small" in prompt and "ValueError: overlap" in prompt
    assert "1 | RADIUS = 0.1\n" in prompt and "back as it was before that edit" in prompt
    assert result.result.valid and result.actions == 2


def test_an_unparsable_answer_is_shown_back():
    result, backend, _ = _run(
        ['{"action": {"op": "set_constant", "name": "NOPE"', set_constant("RADIUS", 0.5)]
    )
    assert result.transcript[0]["error"].startswith("the answer was not a valid action")
    assert "Last error: the answer was not a valid action" in _user(backend.calls[1])
    assert result.result.valid


def test_respects_max_actions_and_says_why_there_is_no_result():
    answers = [set_constant("RADIUS", v) for v in (0.11, 0.12, 0.13, 0.14)]
    result, backend, _ = _run(answers, ExecutorConfig(max_actions=3, max_evals=5, value_menu=False))
    assert result.actions == 3 and len(backend.calls) == 3
    assert not result.result.valid and "no valid result after 3 actions" in result.reason
    assert "radius too small" in result.reason
    assert "RADIUS = 0.13" in result.files["solution.py"]  # the last applied edit, with its validation


def test_failed_evaluations_stop_at_max_evals():
    answers = [set_constant("RADIUS", v) for v in (0.11, 0.12, 0.13, 0.14)]
    result, backend, validate = _run(answers, ExecutorConfig(max_actions=6, max_evals=2, value_menu=False))
    assert len(validate.seen) == 2 and result.actions == 2 and not result.result.valid
    assert "RADIUS = 0.12" in result.files["solution.py"]  # the node keeps the last program that ran


def test_a_program_evaluated_before_is_rejected_without_an_evaluation():
    answers = [set_constant("RADIUS", 0.15), set_constant("RADIUS", 0.15), set_constant("RADIUS", 0.3)]
    backend, validate = ScriptedBackend(answers), Recorder()
    earlier = {}

    def known(files):
        return earlier.get(files["solution.py"])

    earlier[PROGRAM.replace("RADIUS = 0.1", "RADIUS = 0.3")] = "node 4: score 0.3"
    result = Executor(backend, ExecutorConfig(max_actions=3, max_evals=3, value_menu=False)).run(
        "Double RADIUS.", {"solution.py": PROGRAM}, ["solution.py"], validate, known=known, tried="- x"
    )
    # 0.15 fails; 0.15 again is the same program (this run's own record); 0.3 is node 4's program
    assert len(validate.seen) == 1 and result.actions == 3 and result.result is not None
    assert "already evaluated (it failed)" in _user(backend.calls[2])
    assert "already evaluated (node 4: score 0.3)" in result.reason
    assert "Tried before:\n- x" in _user(backend.calls[0])


def test_nothing_applied_leaves_the_input_and_no_result():
    answers = [set_constant("RADIUS", 0.1)] * 2  # no change: rejected
    result, _, validate = _run(answers, ExecutorConfig(max_actions=2, value_menu=False))
    assert result.result is None and validate.seen == [] and result.files == {"solution.py": PROGRAM}
    assert "no change" in result.reason and result.applied == 0


def test_transcript_and_usage_are_recorded():
    result, backend, _ = _run(["not json", set_constant("RADIUS", 0.15), set_constant("RADIUS", 0.3)])
    assert [s["step"] for s in result.transcript] == [0, 1, 2]
    assert result.transcript[0]["action"] is None and result.transcript[0]["text"] == "not json"
    assert result.transcript[1]["action"] == {"op": "set_constant", "name": "RADIUS", "value": 0.15}
    assert result.transcript[1]["valid"] is False and result.transcript[2]["valid"] is True
    assert result.prompt_tokens == 300 and result.completion_tokens == 60 and result.applied == 2
    assert result.model_s >= 0 and result.eval_s >= 0
    assert all(c["purpose"] == "executor" and c["sampling"].max_tokens == 192 for c in backend.calls)


def test_targets_the_hypothesis_names_are_offered_first_then_everything():
    answers = [set_constant("COUNT", 6), set_constant("COUNT", 7), set_constant("RADIUS", 0.3)]
    result, backend, validate = _run(answers, ExecutorConfig(narrow_actions=1, value_menu=False))
    first, second = (call["schema"].model_json_schema() for call in backend.calls[:2])
    assert "COUNT" not in json.dumps(first) and "score" not in json.dumps(first)
    assert "COUNT" in json.dumps(second) and "replace_lines" in json.dumps(second)
    assert result.transcript[0]["error"].startswith("the answer was not a valid action")
    assert "Constants: RADIUS = 0.1\n" in _user(backend.calls[0])
    assert [f["solution.py"].splitlines()[:2] for f in validate.seen] == [
        ["RADIUS = 0.1", "COUNT = 7"],
        ["RADIUS = 0.3", "COUNT = 5"],
    ]


def test_prompt_is_short_and_names_the_hypothesis_and_targets():
    _, backend, _ = _run([set_constant("RADIUS", 0.2)], hypothesis="Make it larger.")
    system, user = backend.calls[0]["prompts"]
    assert system["content"].startswith("Implement the hypothesis exactly as given")
    assert "Hypothesis: Make it larger." in user["content"]
    assert "Constants: RADIUS = 0.1, COUNT = 5" in user["content"] and "Functions: score" in user["content"]
    assert len(user["content"]) < 1500


def test_seedless_task_starts_with_a_write_file_draft():
    draft = {"op": "write_file", "file": "solution.py", "content": "RADIUS = 0.3\n"}
    result, backend, _ = _run([draft], files={})
    schema = backend.calls[0]["schema"]
    assert schema.model_json_schema()["properties"]["op"]["const"] == "write_file"
    assert backend.calls[0]["sampling"].max_tokens == ExecutorConfig().draft_tokens
    assert result.files == {"solution.py": "RADIUS = 0.3\n"} and result.result.valid


def test_read_file_switches_the_shown_file_in_multi_file_tasks():
    files = {"solution.py": PROGRAM, "helpers.py": "SCALE = 2\n"}
    answers = [{"op": "read_file", "file": "helpers.py"}, set_constant("RADIUS", 0.2)]
    backend = ScriptedBackend(answers)
    result = Executor(backend, ExecutorConfig(constants_first=False, value_menu=False)).run(
        "Try a change.", files, ["solution.py", "helpers.py"], Recorder()
    )
    assert "File solution.py" in _user(backend.calls[0]) and "File helpers.py" in _user(backend.calls[1])
    assert result.result.valid and result.actions == 2 and result.files["helpers.py"] == "SCALE = 2\n"


def test_window_centres_long_files_on_what_the_hypothesis_names():
    text = "\n".join([f"A{i} = {i}" for i in range(300)] + ["def target():", "    return 1"])
    lo, hi = window(text, "Rewrite target to return 2", 400)
    assert lo <= 301 <= hi and hi - lo < 60
    assert window(PROGRAM, "anything", 2500) == (1, len(PROGRAM.split("\n")))


# --- the real embedded model -------------------------------------------------------------------------


def run_program(files: dict[str, str]) -> EvalResult:
    """A real validate: runs solution.py's score() in a child process, in a scratch directory."""
    code = "import runpy; print(float(runpy.run_path('solution.py')['score']()))"
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in files.items():
            (Path(tmp) / name).write_text(text)
        try:
            proc = subprocess.run(
                [sys.executable, "-c", code], cwd=tmp, capture_output=True, text=True, timeout=10
            )
        except subprocess.TimeoutExpired:
            return EvalResult(valid=False, reason="timeout after 10 s", wall_s=time.perf_counter() - t0)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        return EvalResult(
            valid=False, reason=f"exit code {proc.returncode}", stderr_tail=proc.stderr[-500:], wall_s=wall
        )
    return EvalResult(valid=True, score=float(proc.stdout.strip()), wall_s=wall)


@pytest.mark.slow
def test_embedded_model_produces_an_applied_edit(embedded_backend):
    executor = Executor(embedded_backend, ExecutorConfig(max_actions=4))
    result = executor.run(
        "Increase RADIUS to 0.2.",
        {"solution.py": PROGRAM},
        ["solution.py"],
        run_program,
        task_summary="Maximise score() = COUNT * RADIUS.",
    )
    assert result.applied >= 1, result.transcript
    assert result.files["solution.py"] != PROGRAM
    ast.parse(result.files["solution.py"])
    assert result.completion_tokens > 0 and result.model_s > 0


def test_constants_come_first_when_the_hypothesis_names_nothing():
    backend = ScriptedBackend([set_constant("RADIUS", 0.3)])
    result = Executor(backend, ExecutorConfig(value_menu=False)).run(
        "Make it better.", {"solution.py": PROGRAM}, ["solution.py"], Recorder()
    )
    schema = backend.calls[0]["schema"].model_json_schema()
    assert "replace_function" not in json.dumps(schema) and "set_constant" in json.dumps(schema)
    assert result.result is not None and result.result.valid


def test_value_menu_offers_numbers_around_the_current_value_only():
    backend = ScriptedBackend([set_constant("RADIUS", 0.3), set_constant("RADIUS", 0.4)])
    result = Executor(backend, ExecutorConfig(max_actions=2)).run(
        "Double RADIUS.", {"solution.py": PROGRAM}, ["solution.py"], Recorder()
    )
    schema = json.dumps(backend.calls[0]["schema"].model_json_schema())
    assert (
        "[0.05, 0.2, 0.08, 0.125, 0.09, 0.11, 0.025, 0.4]" in schema
    )  # RADIUS = 0.1 times 1/2 ... 4, coarse to fine
    assert result.transcript[0]["error"].startswith("the answer was not a valid action")  # 0.3: off the menu
    assert result.result.valid and "RADIUS = 0.4\n" in result.files["solution.py"]


def test_values_whose_program_already_ran_leave_the_menu():
    backend = ScriptedBackend([set_constant("RADIUS", 0.2)])
    ran = PROGRAM.replace("RADIUS = 0.1", "RADIUS = 0.4")
    Executor(backend, ExecutorConfig(max_actions=1)).run(
        "Double RADIUS.",
        {"solution.py": PROGRAM},
        ["solution.py"],
        Recorder(),
        known=lambda files: "node 2: score 0.4" if files["solution.py"] == ran else None,
    )
    assert "[0.05, 0.2, 0.08, 0.125, 0.09, 0.11, 0.025]" in json.dumps(
        backend.calls[0]["schema"].model_json_schema()
    )


def test_a_repeated_rejected_action_heats_sampling_and_the_third_repeat_gives_up():
    same = set_constant("RADIUS", 0.1)  # no change: rejected every time
    backend = ScriptedBackend([same] * 4)
    result = Executor(backend, ExecutorConfig(max_actions=6, value_menu=False)).run(
        "Double RADIUS.", {"solution.py": PROGRAM}, ["solution.py"], Recorder()
    )
    temperatures = [call["sampling"].temperature for call in backend.calls]
    assert temperatures == pytest.approx([0.7, 0.7, 1.1, 1.5])
    assert result.actions == 4 and "answered again after its rejection; gave up" in result.reason


@pytest.mark.parametrize(
    ("verb", "menu"), [("increase", "[0.2, 0.125, 0.11, 0.4]"), ("decrease", "[0.05, 0.08, 0.09, 0.025]")]
)
def test_a_directed_hypothesis_moves_its_constant_only_that_way(verb, menu):
    backend = ScriptedBackend([set_constant("RADIUS", 0.4 if verb == "increase" else 0.05)])
    Executor(backend, ExecutorConfig(max_actions=1, compass=False)).run(
        f"{verb} RADIUS to pack tighter", {"solution.py": PROGRAM}, ["solution.py"], Recorder(0.0)
    )
    assert menu in json.dumps(backend.calls[0]["schema"].model_json_schema())


def test_a_directed_hypothesis_takes_the_next_compass_step_coarse_to_fine():
    """With `compass` (the default), `increase RADIUS` offers one value: x2 first; once that program has
    run, x1.25, then x1.1, then x4; the model cannot pick a smaller step first."""
    steps = []
    ran: set[str] = set()
    for _ in range(5):
        backend = ScriptedBackend([set_constant("RADIUS", 0.2)])
        result = Executor(backend, ExecutorConfig(max_actions=1)).run(
            "increase RADIUS", {"solution.py": PROGRAM}, ["solution.py"], Recorder(0.0),
            known=lambda files: "ran" if files["solution.py"] in ran else None,
        )  # fmt: skip
        if not backend.calls:
            break
        spec = backend.calls[0]["schema"].model_json_schema()["properties"]["value"]
        (value,) = spec.get("enum") or [spec["const"]]  # one value: a const
        steps.append(value)
        ran.add(PROGRAM.replace("RADIUS = 0.1", f"RADIUS = {value}"))
    assert steps == [0.2, 0.125, 0.11, 0.4] and "every value above" in result.reason


@pytest.mark.parametrize(("level", "step"), [(0, 0.2), (1, 0.125), (2, 0.11)])
def test_the_compass_step_starts_at_the_level_the_harness_gives(level, step):
    """Level 1 once coarse moves from this parent have failed: `increase RADIUS` offers x1.25, not x2."""
    backend = ScriptedBackend([set_constant("RADIUS", step)])
    result = Executor(backend, ExecutorConfig(max_actions=1)).run(
        "increase RADIUS", {"solution.py": PROGRAM}, ["solution.py"], Recorder(0.0), level=level
    )
    spec = backend.calls[0]["schema"].model_json_schema()["properties"]["value"]
    assert (spec.get("enum") or [spec["const"]]) == [step]
    assert result.result.valid and f"RADIUS = {step}\n" in result.files["solution.py"]


def test_a_directed_hypothesis_with_no_value_left_that_way_ends_without_a_model_call():
    backend = ScriptedBackend([])
    ran = {PROGRAM.replace("RADIUS = 0.1", f"RADIUS = {v}") for v in (0.11, 0.125, 0.2, 0.4)}
    result = Executor(backend, ExecutorConfig()).run(
        "increase RADIUS",
        {"solution.py": PROGRAM},
        ["solution.py"],
        Recorder(),
        known=lambda files: "an earlier node" if files["solution.py"] in ran else None,
    )
    assert backend.calls == [] and result.result is None
    assert "every value above the current RADIUS in its menu has been evaluated" in result.reason


def test_programs_that_differ_only_in_spelling_comments_or_layout_share_a_key():
    from arts.policy.executor import program_key

    seed = {"model.py": "LR = 3e-3  # learning rate\nBATCH = 64\n"}
    assert program_key({"model.py": "LR = 0.003\n\nBATCH = 64\n"}) == program_key(seed)
    assert program_key({"model.py": "LR = 0.0031\nBATCH = 64\n"}) != program_key(seed)
    assert program_key({"notes.txt": "a  b"}) != program_key({"notes.txt": "a b"})  # text files: by text
    assert program_key({"model.py": "def f(:\n"}) != program_key({"model.py": "def f( :\n"})
