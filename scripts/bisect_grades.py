"""The grades program of scripts/make_bisect.py: percentages, letter grades, mean and median of a class.

See scripts/bisect_shop.py for the shape every program follows.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script, `scripts.` still imports

from scripts.bisect_world import Edit, Fault, Program  # noqa: E402

GRADES = Program(
    name="grades",
    files={
        "scale.py": """PASS_MARK = 50
LETTERS = [(90, "A"), (80, "B"), (70, "C"), (60, "D")]


def percent(points, out_of):
    if out_of == 0:
        return 0.0
    return 100 * points / out_of


def letter(score):
    for floor, name in LETTERS:
        if score >= floor:
            return name
    return "F"


def passed(score):
    return score >= PASS_MARK


def rescale(value, low, high):
    return round((value - low) / (high - low) * 100, 1)
""",
        "stats.py": """def mean(values):
    if not values:
        return 0.0
    return sum(values) / len(values)


def median(values):
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2 == 1:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2


def top(values, k):
    return sorted(values, reverse=True)[:k]
""",
        "report.py": """from scale import letter, passed, percent, rescale
from stats import mean, median, top


def scores(marks, out_of):
    return [percent(points, out_of) for points in marks]


def summary(marks, out_of):
    values = scores(marks, out_of)
    return {"mean": round(mean(values), 1), "median": median(values), "best": top(values, 2)}


def class_mean(marks, out_of):
    return mean(scores(marks, out_of))


def pass_count(marks, out_of):
    values = scores(marks, out_of)
    return sum(1 for value in values if passed(value))


def grades(marks, out_of):
    return [letter(value) for value in scores(marks, out_of)]


def normalised(marks, out_of):
    values = scores(marks, out_of)
    low, high = min(values), max(values)
    return [rescale(value, low, high) for value in values]


def curve(marks, out_of, bonus):
    values = scores(marks, out_of)
    return [min(100.0, value + bonus) for value in values]
""",
        "test_report.py": """import report

MARKS = [18, 35, 27, 40, 9, 20, 32]


def test_summary():
    got = report.summary(MARKS, 40)
    want = {"mean": 64.6, "median": 67.5, "best": [100.0, 87.5]}
    assert got == want, f"report.summary(MARKS, 40) returned {got!r}, expected {want!r}"


def test_class_mean_of_nothing():
    got = report.class_mean([], 40)
    assert got == 0.0, f"report.class_mean([], 40) returned {got!r}, expected 0.0"


def test_zero_out_of():
    got = report.scores([3, 4], 0)
    assert got == [0.0, 0.0], f"report.scores([3, 4], 0) returned {got!r}, expected [0.0, 0.0]"


def test_pass_count():
    got = report.pass_count(MARKS, 40)
    assert got == 5, f"report.pass_count(MARKS, 40) returned {got!r}, expected 5"


def test_grades():
    got = report.grades(MARKS, 40)
    want = ["F", "B", "D", "A", "F", "F", "B"]
    assert got == want, f"report.grades(MARKS, 40) returned {got!r}, expected {want!r}"


def test_normalised():
    got = report.normalised([10, 25, 40], 40)
    assert got == [0.0, 50.0, 100.0], f"report.normalised([10, 25, 40], 40) returned {got!r}"


def test_curve():
    got = report.curve([38, 20], 40, 10)
    assert got == [100.0, 60.0], f"report.curve([38, 20], 40, 10) returned {got!r}, expected [100.0, 60.0]"
""",
    },
    test_file="test_report.py",
    faults=[
        Fault(
            "stats.py",
            "        return ordered[mid]\n",
            "        return ordered[mid - 1]\n",
            "off_by_one",
            "test_summary",
            "median: index from the lower middle",
        ),
        Fault("stats.py", "[:k]", "[: k + 1]", "off_by_one", "test_summary", "top: keep the k best"),
        Fault(
            "stats.py",
            "sum(values) / len(values)",
            "sum(values) // len(values)",
            "wrong_operator",
            "test_summary",
            "mean without float noise",
        ),
        Fault(
            "stats.py",
            "    if not values:\n        return 0.0\n",
            "",
            "removed_guard",
            "test_class_mean_of_nothing",
            "mean: callers never pass an empty list",
        ),
        Fault(
            "report.py",
            "round(mean(values), 1)",
            "round(mean(values), 2)",
            "wrong_constant",
            "test_summary",
            "summary: report the mean to two places",
        ),
        Fault(
            "scale.py",
            "PASS_MARK = 50",
            "PASS_MARK = 55",
            "wrong_constant",
            "test_pass_count",
            "raise the pass mark",
        ),
        Fault(
            "scale.py",
            "return score >= PASS_MARK",
            "return score > PASS_MARK",
            "off_by_one",
            "test_pass_count",
            "passed: strictly above the mark",
        ),
        Fault(
            "scale.py",
            "if score >= floor:",
            "if score > floor:",
            "off_by_one",
            "test_grades",
            "letter: compare against the floor",
        ),
        Fault("scale.py", '(60, "D")', '(70, "D")', "wrong_constant", "test_grades", "tighten the D band"),
        Fault(
            "scale.py",
            "    if out_of == 0:\n        return 0.0\n",
            "",
            "removed_guard",
            "test_zero_out_of",
            "percent: out_of is never zero",
        ),
        Fault(
            "report.py",
            "rescale(value, low, high)",
            "rescale(value, high, low)",
            "swapped_arguments",
            "test_normalised",
            "normalised: pass the range to rescale",
        ),
        Fault(
            "scale.py",
            "(value - low) / (high - low)",
            "(value - low) / (high + low)",
            "wrong_operator",
            "test_normalised",
            "rescale over the whole range",
        ),
        Fault(
            "report.py",
            "min(100.0, value + bonus)",
            "max(100.0, value + bonus)",
            "wrong_operator",
            "test_curve",
            "curve: cap at 100",
        ),
    ],
    rewrites=[
        Edit(
            "stats.py", "    if not values:", "    if len(values) == 0:", "spell out the empty check in mean"
        ),
        Edit(
            "stats.py",
            "    return sorted(values, reverse=True)[:k]",
            "    ordered = sorted(values)\n    return ordered[::-1][:k]",
            "top: sort once",
        ),
        Edit(
            "scale.py",
            "    return 100 * points / out_of",
            "    return points / out_of * 100",
            "percent: reorder the arithmetic",
        ),
        Edit(
            "report.py",
            "    return sum(1 for value in values if passed(value))",
            "    return len([value for value in values if passed(value)])",
            "pass_count: count a list",
        ),
        Edit(
            "report.py",
            "    low, high = min(values), max(values)",
            "    low = min(values)\n    high = max(values)",
            "normalised: one assignment per line",
        ),
        Edit(
            "scale.py",
            "",
            '\n\ndef band(score):\n    return letter(score) + ("+" if score % 10 >= 7 else "")\n',
            "add band() for the transcript",
        ),
        Edit(
            "stats.py", "", "\n\ndef spread(values):\n    return max(values) - min(values)\n", "add spread()"
        ),
    ],
    renames=[
        ("stats.py", "median", "ordered", "ranked"),
        ("stats.py", "median", "mid", "middle"),
        ("report.py", "summary", "values", "percents"),
        ("report.py", "pass_count", "value", "score"),
        ("report.py", "normalised", "low", "lowest"),
        ("scale.py", "letter", "floor", "bound"),
        ("scale.py", "percent", "points", "got"),
    ],
    docs={
        ("stats.py", "median"): "Middle value; the mean of the two middle ones for an even count.",
        ("stats.py", "mean"): "Arithmetic mean, 0.0 for no values.",
        ("report.py", "summary"): "Mean, median and the two best percentages.",
        ("report.py", "normalised"): "Percentages rescaled so the lowest is 0 and the highest 100.",
        ("scale.py", "letter"): "Letter grade of a percentage.",
        ("scale.py", "percent"): "Points as a percentage of out_of.",
    },
)
