"""Returns as typed edits: the ordering grammar of set_return, built from a real program's signature,
edits that compile and return permutations, and the executor, directed hypotheses and the
random-mutation baseline acting over the same grammar (on the weighted-completion built-in); and the
value menu of an arithmetic return (on the bin-packing built-in)."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys

import pytest
from pydantic import ValidationError

from arts.policy.edits.apply import EditError, SetReturn, apply_edit, return_menus
from arts.policy.edits.mutation import random_edit
from arts.policy.edits.orderings import builds_list, ordering_menu, return_pattern
from arts.policy.edits.schema import edit_schema, unwrap
from arts.policy.edits.targets import function_nodes, parse, return_functions
from arts.tasks.base import BUILTIN_DIR
from tests.doubles import ScriptedBackend, SwapRules, run_with_rules

SEED = (BUILTIN_DIR / "weighted-completion" / "solution.py").read_text()
FIRST_FIT = (BUILTIN_DIR / "bin-packing-weibull" / "solution.py").read_text()
SMITH = "sorted(range(len(p)), key=lambda i: p[i] / w[i])"


def _grammar(text: str = SEED) -> str:
    tree = parse(text)
    return return_pattern(tree, function_nodes(tree)["order"])


def test_a_return_that_builds_a_list_is_a_set_return_target():
    assert builds_list(function_nodes(parse(SEED))["order"]) is not None
    assert return_functions(SEED) == [("order", ["p", "w"])]  # so `rewrite order` is a directed move
    text = "def f(x):\n    return [1, 2]\n"  # a literal list uses no parameter: not an ordering
    assert builds_list(function_nodes(parse(text))["f"]) is None


@pytest.mark.parametrize(
    "expr",
    [
        SMITH,
        "sorted(range(len(p)), key=lambda i: w[i] / p[i], reverse=True)",
        "list(np.argsort(p / w))",
        "list(np.argsort(-w)[::-1])",
        "list(range(len(p)))[::-1]",
        "sorted(range(len(w)), key=lambda i: np.log(p[i]) - 2 * w[i])",
    ],
)
def test_the_grammar_admits_orderings_over_the_parameters(expr):
    assert re.match(_grammar(), expr)


@pytest.mark.parametrize(
    "expr",
    [
        "p / w",
        "np.argsort(p / w)",
        "sorted(range(len(q)), key=lambda i: q[i])",
        "sorted(p)",
        "[0, 1, 2]",
        "list(np.argsort(3))",
        "list(range(len(p)))",  # the seed itself, which a small model copies
    ],
)
def test_the_grammar_refuses_what_is_not_an_ordering_of_real_names_or_the_given_order(expr):
    assert not re.match(_grammar(), expr)


def test_without_numpy_there_is_no_argsort_and_a_parameter_named_i_moves_the_index():
    grammar = _grammar("def order(i, w):\n    return list(range(len(i)))\n")
    assert re.match(grammar, "sorted(range(len(i)), key=lambda j: i[j] * w[j])")
    assert not re.match(grammar, "list(np.argsort(i))")


def test_the_schema_offers_the_ordering_grammar_and_it_compiles_for_the_decoder():
    schema = edit_schema({"solution.py": SEED}, {"set_return"})
    action = unwrap(schema.model_validate({"function": "order", "op": "set_return", "expression": SMITH}))
    assert action.expression == SMITH
    with pytest.raises(ValidationError):
        schema.model_validate({"function": "order", "op": "set_return", "expression": "p / w"})
    xgr = pytest.importorskip("xgrammar")
    xgr.Grammar.from_json_schema(
        json.dumps(schema.model_json_schema()), any_whitespace=False, strict_mode=True
    )


def test_an_ordering_return_is_not_replaced_by_arithmetic():
    with pytest.raises(EditError, match="returns a list"):
        apply_edit({"solution.py": SEED}, SetReturn(function="order", expression="p / w"))


RUN_ALL = """
import importlib, sys
import numpy as np
rng = np.random.default_rng(0)
p, w = rng.integers(1, 100, 50), rng.integers(1, 20, 50)
for name in sys.argv[1:]:
    got = np.asarray(importlib.import_module(name).order(p, w))
    assert got.dtype.kind == "i" and sorted(got.tolist()) == list(range(50)), name
print("ok", len(sys.argv) - 1)
"""


def test_every_random_ordering_applies_compiles_and_returns_a_permutation(tmp_path):
    """Orderings drawn from the grammar (the mutation baseline's) and Smith's rule, each applied to the
    seed and run in a child process: every one returns a permutation of the jobs."""
    grammar, exprs = _grammar(), [SMITH, *ordering_menu(["p", "w"])]
    assert all(re.match(grammar, e) for e in exprs)  # the menu is inside the grammar
    for s in range(30):
        action = random_edit({"solution.py": SEED}, random.Random(s))
        assert action.op == "set_return" and re.match(grammar, action.expression), action
        exprs.append(action.expression)
    for k, expr in enumerate(exprs):
        out = apply_edit({"solution.py": SEED}, SetReturn(function="order", expression=expr))
        (tmp_path / f"s{k}.py").write_text(out["solution.py"])
    run = subprocess.run(
        [sys.executable, "-c", RUN_ALL, *(f"s{k}" for k in range(len(exprs)))],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert run.returncode == 0 and f"ok {len(exprs)}" in run.stdout, run.stderr[-1500:]
    assert len({e.split("(")[0] for e in exprs}) >= 2  # sorted, list: the forms are all drawn


class OrderRules(SwapRules):
    """The harness's rule-following backend, writing Smith's rule for a `rewrite order` hypothesis."""

    def edit(self, js: dict) -> dict | None:
        spec = next(
            (d for d in [js, *js.get("$defs", {}).values()] if d.get("title") == "SetReturn_order"), None
        )
        if spec is not None:  # Smith's rule while the menu holds it, else the menu's first ordering
            menu = spec["properties"]["expression"].get("enum", [SMITH])
            return {
                "function": "order",
                "op": "set_return",
                "expression": SMITH if SMITH in menu else menu[0],
            }
        return super().edit(js)


def test_arts_with_a_scripted_model_rewrites_the_seeds_order(tmp_path, monkeypatch):
    from arts.search.config import SearchConfig
    from arts.search.store import Store

    backend = OrderRules()
    monkeypatch.setattr("arts.search.run.make_backend", lambda mc, sink, seed: backend)
    summary = run_with_rules(
        SearchConfig(task="weighted-completion", group=2, budget={"evals": 2}), tmp_path / "run"
    )
    with Store.open(tmp_path / "run", create=False) as store:
        nodes = [n for n in store.load_state().nodes.values() if n.parent is not None]
    assert nodes and all(n.hypothesis.startswith("rewrite order") for n in nodes)
    assert nodes[0].status == "valid" and f"return {SMITH}" in nodes[0].files["solution.py"]
    assert summary["best"]["score"] == pytest.approx(0.38128193744331884)  # the optimum, Smith's rule


def test_mutate_through_the_arts_command_rewrites_the_order(tmp_path):
    from arts.search.cli.main import main
    from arts.search.store import Store

    run = tmp_path / "run"
    argv = ["search", "weighted-completion", "--method", "mutate", "--evals", "4", "--group", "3", "--seed", "0",
            "--run-dir", str(run), "-q"]  # fmt: skip
    assert main(argv) == 0
    with Store.open(run, create=False) as store:
        state = store.load_state()
    first = min((n for n in state.nodes.values() if n.parent is not None), key=lambda n: n.id)
    assert first.transcript[0]["action"]["op"] == "set_return"  # the seed's one kind of move
    assert json.loads((run / "summary.json").read_text())["best"]["score"] < 1.0  # beats the given order


def test_with_value_menus_a_list_return_answers_from_its_fresh_orderings():
    """The small profile's set_return on a list-building return is an enum of orderings; those already
    evaluated leave it, and a function with none left has no branch."""
    files = {"solution.py": SEED}
    menus = return_menus(files)
    assert SMITH in menus["order"] and "list(range(len(p)))[::-1]" in menus["order"]
    assert len(menus["order"]) == len(set(menus["order"])) == 11  # reversed identity + 5 keys, both ways
    tried = apply_edit(files, SetReturn(function="order", expression=SMITH))
    fresh = return_menus(files, keep=lambda edited: edited != tried)
    assert SMITH not in fresh["order"] and len(fresh["order"]) == 10
    schema = edit_schema(files, {"set_return"}, rewrites=fresh)
    js = schema.model_json_schema()
    assert js["properties"]["expression"]["enum"] == fresh["order"]
    with pytest.raises(ValidationError):
        schema.model_validate({"function": "order", "op": "set_return", "expression": SMITH})
    with pytest.raises(EditError, match="no target"):
        edit_schema(files, {"set_return"}, rewrites={"order": []})
    smith = apply_edit(files, SetReturn(function="order", expression=SMITH))  # a program returning one
    assert return_menus(smith)["order"] == [e for e in menus["order"] if e != SMITH]


def test_with_value_menus_an_arithmetic_return_answers_from_concrete_expressions():
    """bin-packing's `priority` returns `-np.arange(...)`: its menu holds expressions of the set_return
    grammar over its parameters, each of which applies, compiles and returns an array (uses `bins`);
    none divides by a difference (zero at an exact fit); the schema is their enum."""
    files = {"solution.py": FIRST_FIT}
    menu = return_menus(files)["priority"]
    tree = parse(FIRST_FIT)
    grammar = return_pattern(tree, function_nodes(tree)["priority"])
    assert "-bins" in menu and "item - bins" in menu and len(menu) == len(set(menu)) >= 10
    for expr in menu:
        assert re.fullmatch(grammar, expr), expr
        assert "bins" in expr and "/ (" not in expr
        edited = apply_edit(files, SetReturn(function="priority", expression=expr))["solution.py"]
        compile(edited, "solution.py", "exec")
    schema = edit_schema(files, {"set_return"}, rewrites={"priority": menu})
    assert schema.model_json_schema()["properties"]["expression"]["enum"] == menu
    free = edit_schema(files, {"set_return"}).model_json_schema()["properties"]["expression"]
    assert "pattern" in free and "enum" not in free  # without menus: the grammar, as before


def test_the_bin_packing_menu_holds_best_fit_which_beats_the_seed(tmp_path, capsys):
    """The menu is not only well-formed: its `-bins` (best fit) scores below the first-fit seed on the
    task's own evaluator, through `arts eval --files`."""
    from arts.search.cli.main import main

    edited = apply_edit({"solution.py": FIRST_FIT}, SetReturn(function="priority", expression="-bins"))
    (tmp_path / "solution.py").write_text(edited["solution.py"])
    assert main(["eval", "bin-packing-weibull", "--files", str(tmp_path), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["valid"] and result["score"] < 4.5449 - 0.3  # 4.146: best fit against 4.545


@pytest.mark.parametrize(("seed", "function"), [(SEED, "order"), (FIRST_FIT, "priority")])
def test_the_executor_never_answers_an_evaluated_return_again(seed, function):
    """A model that always takes the first entry of the menu still walks through distinct returns:
    each evaluated one leaves the next step's enum."""
    from arts.policy.executor import Executor, ExecutorConfig
    from arts.tasks.base import EvalResult

    class First(ScriptedBackend):
        def generate(self, prompts, n=1, sampling=None, schema=None, adapter=None, purpose=""):
            entry = schema.model_json_schema()["properties"]["expression"]["enum"][0]
            self.answers = [{"function": function, "op": "set_return", "expression": entry}]
            return super().generate(prompts, n, sampling, schema, adapter, purpose)

    programs = []

    def validate(files):
        programs.append(files["solution.py"])
        return EvalResult(valid=False, reason="worse than the seed")

    cfg = ExecutorConfig(ops=["set_return"], max_actions=4, max_evals=4)
    Executor(First([]), cfg).run(f"rewrite {function}", {"solution.py": seed}, ["solution.py"], validate)
    assert len(programs) == 4 and len(set(programs)) == 4


@pytest.mark.parametrize(("seed", "function"), [(SEED, "order"), (FIRST_FIT, "priority")])
def test_rewrite_leaves_the_directed_targets_once_every_return_ran(seed, function):
    from arts.search.methods.targets import targets
    from arts.search.state import Node, SearchState

    state = SearchState()
    state.nodes[0] = Node(id=0, status="seed", files={"solution.py": seed}, score=1.0, raw_score=1.0)
    assert function in targets(state, lambda files: None)
    assert targets(state, lambda files: "ran" if files["solution.py"] != seed else None) is None
