"""The random-mutation baseline: every draw applies, keeps a constant's type, and covers each kind of edit."""

from __future__ import annotations

import ast
import random

import pytest

from arts.policy.edits.apply import EditError, apply_edit, value_menu
from arts.policy.edits.mutation import random_edit
from arts.policy.edits.targets import list_targets
from tests.doubles import FILES, SAMPLE


@pytest.mark.parametrize("seed", range(100))
def test_random_edit_always_applies_and_keeps_ints_ints(seed):
    rng = random.Random(seed)
    action = random_edit(FILES, rng)
    out = apply_edit(FILES, action)["solution.py"]
    ast.parse(out)
    new, old = list_targets(out).constants, list_targets(SAMPLE).constants
    assert isinstance(ast.literal_eval(new["COUNT"]), int) and ast.literal_eval(new["COUNT"]) >= 1
    assert isinstance(ast.literal_eval(new["RADIUS"]), float)
    assert new["NAME"] == old["NAME"]


def test_random_edit_without_numbers_raises():
    with pytest.raises(EditError, match="no numeric constant, literal, operator or keyword argument"):
        random_edit({"a.py": "NAME = 'x'\n"}, random.Random(0))


def test_random_edit_covers_constants_literals_and_return_expressions():
    ops = {random_edit(FILES, random.Random(seed)).op for seed in range(40)}
    assert ops == {"set_constant", "replace_lines", "set_return"}


@pytest.mark.parametrize(
    ("line", "mutated"),
    [
        ("    return -np.arange(len(bins))", "    return (np.arange(len(bins)))"),
        ("    return a + b", "    return (a - b)"),
        ("    return a * b", "    return (a / b)"),
        ("    return a < b", "    return (a > b)"),
    ],
)
def test_random_edit_mutates_operators_of_a_program_without_numbers(line, mutated):
    files = {"s.py": f"import numpy as np\n\n\ndef f(a, b, bins):\n{line}\n"}
    rng = random.Random(0)
    action = next(a for a in (random_edit(files, rng) for _ in range(50)) if a.op == "replace_lines")
    assert apply_edit(files, action)["s.py"].splitlines()[-1] == mutated


def test_random_return_expressions_parse_and_use_visible_names():
    files = {"s.py": "import numpy as np\n\n\ndef priority(item, bins):\n    return -bins\n"}
    rng = random.Random(0)
    exprs = [a.expression for a in (random_edit(files, rng) for _ in range(60)) if a.op == "set_return"]
    assert len(exprs) > 15
    for e in exprs:
        names = {n.id for n in ast.walk(ast.parse(e, mode="eval")) if isinstance(n, ast.Name)}
        assert names <= {"item", "bins", "np"} and names  # a constant return is never drawn


def test_constants_move_to_entries_of_their_value_menu():
    rng = random.Random(0)
    edits = [random_edit({"s.py": "A = 0.01\n"}, rng) for _ in range(30)]
    assert {e.value for e in edits} <= set(value_menu(0.01))  # the executor's grammar offers the same menu
