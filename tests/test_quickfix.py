"""Quick fixes of a crash on an undefined name (`policy.edits.quickfix`), and a repair that tries them on
the failed program before any model call (`policy.executor`, `search.investigation.followups`)."""

from __future__ import annotations

from arts.policy.edits.quickfix import name_fixes
from arts.policy.executor import Executor, ExecutorConfig
from arts.tasks.base import EvalResult
from tests.doubles import ScriptedBackend

MEDIAN = '"""Denoise."""\n\nWINDOW = 3  # WINDOW\n\n\ndef smooth(s):\n    return [median(s[i : i + WINDOW]) for i in range(len(s))]\n'
CRASH = "evaluator: the candidate crashed (exit code 1): NameError: name 'median' is not defined"


def test_a_missing_import_is_added_after_the_docstring():
    [(label, fixed)] = name_fixes(MEDIAN, CRASH)
    assert label == "from statistics import median"
    assert fixed.splitlines()[:3] == ['"""Denoise."""', "from statistics import median", ""]


def test_pythons_suggestion_renames_the_name_and_leaves_strings_and_comments():
    text = 'STEPS = 30\nfor _ in range(STEP):\n    print("STEP")  # STEP\n'
    reason = "NameError: name 'STEP' is not defined. Did you mean: 'STEPS'?"
    [(label, fixed)] = name_fixes(text, reason)
    assert label == "rename STEP to STEPS"
    assert fixed == 'STEPS = 30\nfor _ in range(STEPS):\n    print("STEP")  # STEP\n'


def test_without_pythons_suggestion_the_programs_closest_name_is_offered():
    """An evaluator's one-line reason drops `Did you mean`: the program's own closest name stands in."""
    text = "def trimmed(w):\n    kept = sorted(w)[1:-1]\n    return sum(kept) / len(keep)\n"
    [(label, fixed)] = name_fixes(
        text, "evaluator: the candidate crashed (exit code 1): NameError: name 'keep' is not defined"
    )
    assert label == "rename keep to kept" and "len(kept)" in fixed


def test_no_fix_for_other_crashes_unknown_names_or_names_the_program_does_not_use():
    assert name_fixes(MEDIAN, "ValueError: math domain error") == []
    assert name_fixes(MEDIAN, "NameError: name 'frobnicate' is not defined") == []
    assert name_fixes(MEDIAN, "NameError: name 'sqrt' is not defined") == []  # not in this program
    assert name_fixes("x = (", CRASH) == []


def test_a_repair_tries_the_quick_fix_first_and_the_model_only_when_it_fails():
    seen = []

    def validate(files):
        seen.append(files["solution.py"])
        ok = "import median" in files["solution.py"]
        return EvalResult(valid=ok, score=1.0 if ok else None, reason="" if ok else CRASH)

    run = Executor(ScriptedBackend([]), ExecutorConfig()).run
    out = run("take the median", {"solution.py": MEDIAN}, ["solution.py"], validate, failure=CRASH)
    assert out.result.valid and out.actions == 0 and len(seen) == 1
    assert (
        out.transcript[0]["op"] == "quick_fix" and out.transcript[0]["fix"] == "from statistics import median"
    )
    # the same program without a crash reason: no quick fix, the model's action is what runs
    edit = {"op": "set_constant", "name": "WINDOW", "value": 5}
    backend = ScriptedBackend([edit])
    out = Executor(backend, ExecutorConfig(constants_first=False, value_menu=False, max_actions=1)).run(
        "take the median", {"solution.py": MEDIAN}, ["solution.py"], validate
    )
    assert out.actions == 1 and not out.result.valid and all(e["op"] != "quick_fix" for e in out.transcript)
