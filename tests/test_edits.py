"""Typed edit actions: targets, per-call schemas, application checks and value menus."""

from __future__ import annotations

import ast
import json
import typing

import pydantic
import pytest
from pydantic import ValidationError

from arts.policy.edits.actions import ReadFile, WriteFile
from arts.policy.edits.apply import (
    EditError,
    ReplaceFunction,
    ReplaceLines,
    SetConstant,
    SetReturn,
    apply_edit,
    constant_menus,
)
from arts.policy.edits.schema import OPS, edit_schema, unwrap
from arts.policy.edits.targets import anchor, anchors, list_targets
from tests.doubles import FILES, SAMPLE


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _enum(model: type, field: str) -> list:
    return list(typing.get_args(model.model_fields[field].annotation))


def _members(schema: type) -> dict[str, list[type]]:
    """op → action models of an edit_schema result (bare or wrapped)."""
    union = (
        typing.get_args(schema.model_fields["action"].annotation)
        if "action" in schema.model_fields
        else [schema]
    )
    out: dict[str, list[type]] = {}
    for model in union:
        out.setdefault(_enum(model, "op")[0], []).append(model)
    return out


def test_list_targets_finds_upper_case_constants_and_top_level_functions():
    targets = list_targets(SAMPLE)
    assert targets.constants == {"RADIUS": "0.1", "COUNT": "5", "NAME": '"grid"', "one": "1"}  # one's return
    assert list(targets.functions) == ["place", "score", "one"]
    assert targets.functions["place"].startswith("xs = []\nfor i in range(n):\n    xs.append")
    assert targets.functions["one"] == "return 1"


def test_list_targets_of_unparsable_source_is_empty():
    targets = list_targets("def broken(:\n")
    assert targets.constants == {} and targets.functions == {}


def test_schema_enums_hold_exactly_the_files_names_and_lines():
    members = _members(edit_schema(FILES, set(OPS) - {"read_file"}))
    assert set(members) == {"set_constant", "set_return", "replace_function", "replace_lines", "write_file"}
    (function_model,), (lines_model,), (write_model,) = (
        members[k] for k in ("replace_function", "replace_lines", "write_file")
    )
    # one set_return branch per function ending in a one-line return (all three here)
    assert [_enum(m, "function") for m in members["set_return"]] == [["place"], ["score"], ["one"]]
    assert [_enum(m, "name") for m in members["set_constant"]] == [["COUNT", "one"], ["RADIUS"], ["NAME"]]
    assert _enum(function_model, "name") == ["place", "score", "one"]
    expected = [anchor(n, line) for n, line in enumerate(_lines(SAMPLE), 1) if line.strip()]
    assert _enum(lines_model, "start") == expected and _enum(lines_model, "end") == expected
    assert _enum(lines_model, "file") == ["solution.py"] and _enum(write_model, "file") == ["solution.py"]


def test_schema_types_constant_values_so_numbers_stay_numbers():
    schema = edit_schema(FILES, {"set_constant"})
    parse = schema.model_validate_json
    assert unwrap(parse('{"action": {"name": "RADIUS", "op": "set_constant", "value": 0.25}}')).value == 0.25
    assert unwrap(parse('{"action": {"name": "COUNT", "op": "set_constant", "value": 7}}')).value == 7
    assert (
        unwrap(parse('{"action": {"name": "NAME", "op": "set_constant", "value": "\'ring\'"}}')).value
        == "'ring'"
    )
    for bad in (
        '{"name": "COUNT", "op": "set_constant", "value": "C5"}',
        '{"name": "NAME", "op": "set_constant"}',
    ):
        with pytest.raises(ValidationError):
            parse(f'{{"action": {bad}}}')


def test_schema_rejects_names_that_do_not_exist():
    schema = edit_schema({"a.py": "MODE = 'fast'\n"}, {"set_constant"})
    assert schema.model_validate({"op": "set_constant", "name": "MODE", "value": "'slow'"})
    with pytest.raises(ValidationError):
        schema.model_validate({"op": "set_constant", "name": "lower", "value": "'slow'"})
    with pytest.raises(ValidationError):
        schema.model_validate({"op": "set_constant", "name": "MODE", "value": "1" * 41})


def test_schema_with_several_branches_is_a_root_object():
    schema = edit_schema(FILES, {"set_constant", "replace_function"})
    js = schema.model_json_schema()
    assert js["type"] == "object" and js["required"] == ["action"]
    parsed = schema.model_validate_json(
        '{"action": {"op": "replace_function", "name": "one", "body": "return 2"}}'
    )
    assert isinstance(unwrap(parsed), ReplaceFunction)
    json.dumps(js)  # serialisable for a grammar compiler


def test_schema_anchors_are_bounded_and_windowed():
    text = "\n".join(f"X{i} = {i}" for i in range(200)) + "\n"
    assert len(anchors(text, limit=40)) == 40
    schema = edit_schema({"a.py": text}, {"replace_lines"}, window=(10, 20))
    assert _enum(schema, "start") == [anchor(n, f"X{n - 1} = {n - 1}") for n in range(10, 21)]


def test_schema_drops_ops_without_targets_and_raises_when_none_is_left():
    schema = edit_schema({"a.py": "x = 1\n"}, {"set_constant", "replace_lines"})
    assert _enum(schema, "op") == ["replace_lines"] and list(schema.model_fields)[0] == "start"
    with pytest.raises(EditError):
        edit_schema({"a.py": "x = 1\n"}, {"set_constant", "replace_function"})
    assert _enum(edit_schema({"a.py": ""}, {"write_file"}), "file") == ["a.py"]
    assert "read_file" in _members(edit_schema({"a.py": "x = 1\n", "b.py": ""}, {"read_file", "write_file"}))


def test_set_constant_applies():
    out = apply_edit(FILES, SetConstant(name="RADIUS", value="0.25"))["solution.py"]
    assert "RADIUS = 0.25\n" in out and out.replace("0.25", "0.1", 1) == SAMPLE
    out = apply_edit(FILES, SetConstant(name="COUNT", value="7"))["solution.py"]
    assert "COUNT: int = 7\n" in out


def test_the_number_a_function_only_returns_is_a_constant_set_in_place():
    files = {
        "solution.py": 'def answer():\n    """Doc."""\n    return -0.25\n\n\ndef two(x):\n    y = x\n    return 2\n'
    }
    assert list_targets(files["solution.py"]).constants == {"answer": "-0.25"}  # two does more than return
    out = apply_edit(files, SetConstant(name="answer", value="0.5"))["solution.py"]
    assert out == files["solution.py"].replace("return -0.25", "return 0.5")


def test_replace_function_keeps_signature_and_docstring_and_normalises_indentation():
    # The model often writes the first line flush and the rest indented, as after `def ...:`.
    body = "xs = [0.1 * i for i in range(n)]\n    return xs"
    out = apply_edit(FILES, ReplaceFunction(name="place", body=body))["solution.py"]
    assert (
        '    """Place n circles on a line."""\n    xs = [0.1 * i for i in range(n)]\n    return xs\n' in out
    )
    assert "for i in range(n):\n" not in out
    ast.parse(out)


def test_replace_function_on_a_one_line_def():
    out = apply_edit(FILES, ReplaceFunction(name="one", body="x = 2\nreturn x"))["solution.py"]
    assert out.endswith("def one():\n    x = 2\n    return x\n")


def test_replace_lines_applies_with_the_start_lines_indentation():
    lines = _lines(SAMPLE)
    n = lines.index("        xs.append(0.5 + i * 0.2)") + 1
    a = anchor(n, lines[n - 1])
    out = apply_edit(
        FILES, ReplaceLines(file="solution.py", start=a, end=a, text="xs.append(i)\nxs.append(-i)")
    )
    assert "        xs.append(i)\n        xs.append(-i)\n    return xs" in out["solution.py"]


def test_replace_lines_rejects_stale_or_reversed_anchors():
    lines = _lines(SAMPLE)
    with pytest.raises(EditError, match="not a line"):
        apply_edit(
            FILES,
            ReplaceLines(file="solution.py", start="3 | import numpy", end="3 | import numpy", text="x"),
        )
    first, last = anchor(3, lines[2]), anchor(5, lines[4])
    with pytest.raises(EditError, match="before"):
        apply_edit(FILES, ReplaceLines(file="solution.py", start=last, end=first, text="x = 1"))


def test_write_file_applies_and_ends_with_a_newline():
    out = apply_edit({}, WriteFile(file="new.py", content="print(1)"))
    assert out == {"new.py": "print(1)\n"}


def test_syntax_breaking_edit_raises_with_the_parse_error():
    with pytest.raises(EditError, match=r"does not parse after the edit: line \d+: .*"):
        apply_edit(FILES, ReplaceFunction(name="score", body="return (xs"))
    with pytest.raises(EditError, match="not a Python expression"):
        apply_edit(FILES, SetConstant(name="RADIUS", value="0.1 +"))


def test_no_op_edit_is_rejected():
    with pytest.raises(EditError, match="no change"):
        apply_edit(FILES, SetConstant(name="RADIUS", value="0.1"))
    with pytest.raises(EditError, match="no change"):
        apply_edit(FILES, WriteFile(file="solution.py", content=SAMPLE))


def test_unknown_names_and_read_file_are_not_edits():
    with pytest.raises(EditError, match="no constant"):
        apply_edit(FILES, SetConstant(name="MISSING", value="1"))
    with pytest.raises(EditError, match="not an edit"):
        apply_edit(FILES, ReadFile(file="solution.py"))


def test_apply_does_not_mutate_its_input():
    before = dict(FILES)
    apply_edit(FILES, SetConstant(name="RADIUS", value="0.3"))
    assert before == FILES


def test_replace_function_drops_a_repeated_signature_and_rejects_an_empty_body():
    for body in ("def score(xs):\n    return 2.0", "def score(xs): def score(xs): return 2.0"):
        out = apply_edit(FILES, ReplaceFunction(name="score", body=body))["solution.py"]
        assert "def score(xs):\n    return 2.0\n" in out
    with pytest.raises(EditError, match="empty"):
        apply_edit(FILES, ReplaceFunction(name="score", body="def score(xs):"))


def test_every_schema_compiles_to_a_grammar():
    xgr = pytest.importorskip("xgrammar")
    for ops in ({"set_constant"}, set(OPS)):
        schema = edit_schema({**FILES, "b.py": "X = 1\n"}, ops)
        xgr.Grammar.from_json_schema(
            json.dumps(schema.model_json_schema()), any_whitespace=False, strict_mode=True
        )


def test_set_return_grammar_admits_only_visible_names_and_arithmetic():
    files = {
        "s.py": "import numpy as np\n\nK = 2\n\n\ndef priority(item, bins):\n    return bins[::-1]  # reversed\n"
    }
    (model,) = _members(edit_schema(files, {"set_return"}))["set_return"]
    ok = ["item - bins", "-bins", "np.log(bins) * K", "(bins - item) / 2.5", "bins * bins - item"]
    for expr in ok:
        out = apply_edit(files, model(function="priority", op="set_return", expression=expr))["s.py"]
        assert out.endswith(f"    return {expr}\n")  # the old trailing comment goes with the old expression
    for expr in [
        "foo",
        "bins.sum()",
        "import os",
        "bins; x",
        "__import__('os')",
        "bins - item - item - item - item",
    ]:
        with pytest.raises(pydantic.ValidationError):
            model(function="priority", op="set_return", expression=expr)


def test_set_return_keeps_the_shape_of_what_the_function_returns():
    typed = (
        "import numpy as np\n\n\ndef priority(item: int, bins: np.ndarray) -> np.ndarray:\n    return -bins\n"
    )
    assert (
        "bins * item"
        in apply_edit({"s.py": typed}, SetReturn(function="priority", expression="bins * item"))["s.py"]
    )
    with pytest.raises(EditError, match="must use bins"):  # a scalar where an array is expected
        apply_edit({"s.py": typed}, SetReturn(function="priority", expression="item * 2"))
    with pytest.raises(EditError, match="return a constant"):
        apply_edit({"s.py": "def f(x):\n    return x + 1\n"}, SetReturn(function="f", expression="1.315"))
    pair = "def pack(n):\n    return n, n\n"
    with pytest.raises(
        EditError, match="use replace_function"
    ):  # a tuple is not an expression of the grammar
        apply_edit({"s.py": pair}, SetReturn(function="pack", expression="n"))
    with pytest.raises(EditError, match="no target"):  # so set_return is not offered for it
        edit_schema({"s.py": pair}, {"set_return"})
    built = "DEGREE = 1\n\n\ndef build_model():\n    return make_pipeline(DEGREE)\n"
    with pytest.raises(EditError, match="no target"):  # an object-building call is no arithmetic
        edit_schema({"s.py": built}, {"set_return"})
    arange = "import numpy as np\n\n\ndef f(bins):\n    return np.arange(len(bins))\n"
    assert "set_return" in json.dumps(edit_schema({"s.py": arange}, {"set_return"}).model_json_schema())


def test_an_edit_of_docstrings_or_comments_only_is_no_change():
    with pytest.raises(EditError, match="no change to the code"):
        apply_edit(
            FILES,
            ReplaceLines(
                start=anchor(12, _lines(SAMPLE)[11]),
                end=anchor(12, _lines(SAMPLE)[11]),
                file="solution.py",
                text='    """Place circles."""',
            ),
        )


def test_value_menus_move_every_value_and_keep_its_type():
    from arts.policy.edits.apply import value_menu

    assert sorted(value_menu(0.01)) == [0.0025, 0.005, 0.008, 0.009, 0.011, 0.0125, 0.02, 0.04]
    assert sorted(value_menu(8)) == [2, 4, 6, 7, 9, 10, 16, 32] and value_menu(1) == [2, 3, 4]
    assert value_menu(0) == [-1, 1, -2, 2] and 0.0 not in value_menu(0.0)
    for v in (3, -3, 0.3, -0.7, 1e-5):
        menu = value_menu(v)
        assert v not in menu and all(type(x) is type(v) for x in menu)


def test_value_menus_list_their_steps_coarse_to_fine_the_extremes_last():
    """The order a compass search tries its steps: each side of the value opens with x2 or x0.5, then
    x1.25 or x0.8, then x1.1 or x0.9, then x4 or x0.25; the executor's enum keeps this order."""
    from arts.policy.edits.apply import value_menu

    menu = value_menu(0.01)
    assert [v for v in menu if v > 0.01] == [0.02, 0.0125, 0.011, 0.04]
    assert [v for v in menu if v < 0.01] == [0.005, 0.008, 0.009, 0.0025]
    js = edit_schema(
        {"s.py": "MARGIN = 0.01\n"}, {"set_constant"}, menus=constant_menus({"s.py": "MARGIN = 0.01\n"})
    )
    assert js.model_json_schema()["properties"]["value"]["enum"] == menu


def test_directed_hypotheses_name_a_direction_and_a_real_target_under_the_grammar():
    """The pattern as the decoder enforces it: xgrammar's grammar, not only pydantic's check."""
    xgr = pytest.importorskip("xgrammar")
    from arts.policy.proposal_schema import candidate_item, directed_pattern

    moves = {"BATCH": ("increase", "decrease"), "LR": ("decrease",), "priority": ("rewrite",)}
    item = candidate_item([1], pattern=directed_pattern(moves))
    grammar = xgr.Grammar.from_json_schema(
        json.dumps(item.model_json_schema()), any_whitespace=False, strict_mode=True
    )
    for hypothesis, ok in [
        ("increase BATCH", True),
        ("decrease LR to 0.001 for stabler steps", True),
        ("rewrite priority as best fit", True),
        ("increase BATCHES", False),  # xgrammar 0.2.9 took this with `(...)?` in the pattern
        ("increase LR", False),  # every value above LR's has run
        ("increase HIDDEN", False),  # not a target of the program
        ("change BATCH to a better value", False),
        ("increase BATCH " + "x" * 61, False),
    ]:
        answer = {
            "parent": 1,
            "hypothesis": hypothesis,
            "axis": "ab",
            "region": "constants",
            "probability": 0.5,
        }
        text = json.dumps(answer, separators=(", ", ": "))
        assert xgr.testing._is_grammar_accept_string(grammar, text) is ok, hypothesis
        assert (item.model_validate_json(text) is not None) if ok else True


def test_number_pattern_of_set_return_keeps_its_decimal_point_under_the_grammar():
    xgr = pytest.importorskip("xgrammar")
    (model,) = _members(edit_schema({"s.py": "def f(a):\n    return a\n"}, {"set_return"}))["set_return"]
    grammar = xgr.Grammar.from_json_schema(
        json.dumps(model.model_json_schema()), any_whitespace=False, strict_mode=True
    )

    def accepts(expr: str) -> bool:
        answer = {"function": "f", "op": "set_return", "expression": expr}  # the grammar's key order
        return xgr.testing._is_grammar_accept_string(grammar, json.dumps(answer, separators=(", ", ": ")))

    assert accepts("a * 2.5") and accepts("a * 25") and not accepts("a * 2555")


LISTS = "SIZES = (64, 32)\nWEIGHTS = [0.5, -1.0, 2]\nNAMES = ['a', 'b']\n\n\ndef f(x):\n    return x * WEIGHTS[0]\n"


def test_numbers_of_a_literal_list_or_tuple_are_targets_of_their_own():
    from arts.policy.edits.moves import directed_target
    from arts.policy.edits.mutation import random_edit
    from arts.search.methods.targets import targets
    from arts.search.state import Node, SearchState

    consts = list_targets(LISTS).constants
    assert {"SIZES#1", "SIZES#2", "WEIGHTS#3"} <= set(consts) and "NAMES#1" not in consts
    menus = constant_menus({"s.py": LISTS})
    assert 128 in menus["SIZES#1"] and -2.0 in menus["WEIGHTS#2"]
    schema = edit_schema({"s.py": LISTS}, {"set_constant"}, menus=menus)
    action = unwrap(schema.model_validate({"action": {"op": "set_constant", "name": "SIZES#2", "value": 64}}))
    assert apply_edit({"s.py": LISTS}, action)["s.py"].startswith("SIZES = (64, 64)\n")
    state = SearchState()
    state.nodes[0] = Node(id=0, status="seed", files={"s.py": LISTS}, score=1.0, raw_score=1.0)
    moves = targets(state, lambda files: None)
    assert moves["WEIGHTS#2"] == ("increase", "decrease")
    assert directed_target("increase WEIGHTS#2 to -0.5") == ("increase", "WEIGHTS#2")
    edited = {
        getattr(random_edit({"s.py": LISTS}, __import__("random").Random(s)), "name", "") for s in range(40)
    }
    assert edited & {"SIZES#1", "SIZES#2", "WEIGHTS#1", "WEIGHTS#2", "WEIGHTS#3"}  # mutate moves them too


def test_under_value_menus_a_list_is_moved_by_its_numbers_not_rewritten_as_text():
    """The 135M default, offered both, rewrote `POINTS` as free text (`0.2`, `); set_constant(`): 10 of 14
    experiments invalid on a three-point quadrature task. A hypothesis naming POINTS#2 names only it."""
    from arts.policy.executor import mentioned

    menus = constant_menus({"s.py": LISTS})
    js = json.dumps(edit_schema({"s.py": LISTS}, {"set_constant"}, menus=menus).model_json_schema())
    assert '"SIZES#1"' in js and '"SIZES"' not in js and '"WEIGHTS"' not in js and '"NAMES"' in js
    assert '"SIZES"' in json.dumps(edit_schema({"s.py": LISTS}, {"set_constant"}).model_json_schema())
    assert mentioned("increase WEIGHTS#2 to -0.5", {"s.py": LISTS}) == {"WEIGHTS#2"}
    assert "WEIGHTS" in mentioned("scale WEIGHTS by two", {"s.py": LISTS})
