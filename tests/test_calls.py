"""Keyword arguments of calls as typed edits: menus read from real signatures, the set_keyword grammar,
edits that compile and run, and the executor and the random-mutation baseline acting over the same menus."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest
from pydantic import ValidationError

from arts.policy.edits.apply import EditError, SetKeyword, apply_edit
from arts.policy.edits.keywords import call_sites, keyword_menus
from arts.policy.edits.menus import library_signature, param_menu
from arts.policy.edits.mutation import random_edit
from arts.policy.edits.schema import edit_schema, unwrap
from arts.policy.executor import Executor, ExecutorConfig
from arts.tasks.base import EvalResult
from tests.doubles import ScriptedBackend, run_with_rules

TREE = """from sklearn.tree import DecisionTreeRegressor


def build():
    return DecisionTreeRegressor(random_state=0)  # the seed
"""
ORDER = """import numpy as np


def order(x, reverse=False):
    return np.argsort(x, kind="stable")


def ranks(x):
    return order(x)
"""


def test_menus_come_from_the_estimators_declared_constraints():
    sig = library_signature("sklearn.tree.DecisionTreeRegressor")
    params = {p.name: p for p in sig.params}
    assert param_menu(params["max_depth"])[:4] == ["1", "2", "3", "4"]  # None by default: a grid
    assert set(param_menu(params["splitter"])) == {"'random'"}  # 'best' is the default
    assert "'absolute_error'" in param_menu(params["criterion"])
    assert param_menu(params["min_samples_split"]) == ["4", "3", "8"]  # >= 2, as declared
    seeds = param_menu(params["random_state"], current=0)
    assert "-1" not in seeds and "1" in seeds and seeds[-1] == "None"  # the default removes it
    assert param_menu(params["min_weight_fraction_leaf"]) == ["0.001", "0.01", "0.1"]  # within [0, 0.5]


def test_menus_of_numpy_functions_read_the_docstrings_options_and_skip_layout_parameters():
    (site, local) = call_sites(ORDER)
    assert site.name == "np.argsort" and set(site.menus) == {"kind"}  # axis, order: layout, not offered
    assert site.menus["kind"][:3] == ["'quicksort'", "'mergesort'", "'heapsort'"]
    assert local.name == "order" and local.menus == {"reverse": ["True"]}  # the program's own function
    (norm,) = call_sites("import numpy as np\n\n\ndef f(x):\n    return np.linalg.norm(x, axis=1)\n")
    assert set(norm.menus) == {"ord"}  # keepdims changes the result's shape: its programs crashed
    assert call_sites("import numpy as np\n\n\ndef f(n):\n    return np.arange(n)\n") == []  # sizes
    (grid,) = call_sites("import numpy as np\n\n\ndef f(n):\n    return np.arange(0, n, step=2)\n")
    assert "step" in grid.menus  # set by the program itself: it may move


def test_only_installed_libraries_are_imported_for_a_signature():
    text = "import subprocess\n\n\ndef go(x):\n    return subprocess.run(x, check=True)\n"
    assert call_sites(text) == []  # subprocess is not a package whose signatures are read
    assert library_signature("os.system") is None


def test_set_keyword_changes_adds_and_removes_keywords_and_keeps_comments():
    files = {"m.py": TREE}
    out = apply_edit(files, SetKeyword(call="DecisionTreeRegressor", keyword="max_depth", value="3"))
    assert "DecisionTreeRegressor(random_state=0, max_depth=3)  # the seed" in out["m.py"]
    out = apply_edit(files, SetKeyword(call="DecisionTreeRegressor", keyword="random_state", value="7"))
    assert "DecisionTreeRegressor(random_state=7)" in out["m.py"]
    out = apply_edit(files, SetKeyword(call="DecisionTreeRegressor", keyword="random_state", value="None"))
    assert "DecisionTreeRegressor()" in out["m.py"]
    with pytest.raises(EditError, match="takes no keyword 'depth'"):
        apply_edit(files, SetKeyword(call="DecisionTreeRegressor", keyword="depth", value="3"))
    with pytest.raises(EditError, match="no call 'Lasso'"):
        apply_edit(files, SetKeyword(call="Lasso", keyword="alpha", value="3"))


def test_a_positional_argument_is_not_offered_again_as_a_keyword():
    text = "import numpy as np\n\n\ndef grid():\n    return np.linspace(0, 1, 5)\n"
    (site,) = call_sites(text)
    assert "num" not in site.menus and site.menus["endpoint"] == ["False"]
    text = text.replace("np.linspace(0, 1, 5)", "np.linspace(0, 1)")
    assert "num" in call_sites(text)[0].menus  # now free: 50 scaled


def test_grammar_offers_each_keyword_its_own_menu_and_refuses_values_off_it():
    schema = edit_schema({"m.py": TREE}, {"set_keyword"})
    text = json.dumps(schema.model_json_schema())
    assert '"max_depth"' in text and '"DecisionTreeRegressor"' in text
    ok = {"call": "DecisionTreeRegressor", "op": "set_keyword", "keyword": "max_depth", "value": "4"}
    assert unwrap(schema.model_validate({"action": ok})).value == "4"
    for bad in ({**ok, "value": "5"}, {**ok, "value": "'absolute_error'"}, {**ok, "keyword": "depth"}):
        with pytest.raises(ValidationError):
            schema.model_validate({"action": bad})


def test_the_set_keyword_grammar_compiles_for_the_decoder():
    xgr = pytest.importorskip("xgrammar")
    schema = edit_schema({"m.py": TREE, "o.py": ORDER}, {"set_keyword", "set_constant", "replace_lines"})
    xgr.Grammar.from_json_schema(
        json.dumps(schema.model_json_schema()), any_whitespace=False, strict_mode=True
    )


def _fit(program: str) -> subprocess.CompletedProcess:
    code = (
        "import m; from sklearn.datasets import load_wine; X, y = load_wine(return_X_y=True); "
        "print(m.build().fit(X, y).score(X, y))"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=program
    )


@pytest.mark.parametrize("seed", range(3))
def test_every_menu_entry_of_an_estimator_builds_one_that_fits(tmp_path, seed):
    """Every keyword and value the grammar offers gives a program that compiles and runs (in a child
    process), not only one that parses; a few edits of each seed, stacked."""
    files, rng = {"m.py": TREE}, random.Random(seed)
    for _ in range(4):
        menus = keyword_menus(files)["DecisionTreeRegressor"]
        kw = rng.choice(sorted(menus))
        files = apply_edit(
            files, SetKeyword(call="DecisionTreeRegressor", keyword=kw, value=rng.choice(menus[kw]))
        )
    (tmp_path / "m.py").write_text(files["m.py"])
    run = _fit(str(tmp_path))
    assert run.returncode == 0, files["m.py"] + run.stderr[-800:]
    assert 0 <= float(run.stdout.strip()) <= 1


def test_random_mutation_draws_keyword_edits_from_the_same_menus():
    files = {"m.py": TREE}
    edits = [random_edit(files, random.Random(s)) for s in range(40)]
    keyword = [e for e in edits if e.op == "set_keyword"]
    assert len(keyword) >= 10  # no constant here: keywords and the literal 0 are what there is
    menus = keyword_menus(files)["DecisionTreeRegressor"]
    assert all(e.value in menus[e.keyword] for e in keyword)


def test_the_executor_offers_keyword_edits_first_on_a_program_without_constants():
    answer = {"call": "DecisionTreeRegressor", "op": "set_keyword", "keyword": "max_depth", "value": "3"}
    backend, seen = ScriptedBackend([answer]), []

    def validate(files: dict[str, str]) -> EvalResult:
        seen.append(files["m.py"])
        return EvalResult(valid=True, score=1.0)

    result = Executor(backend, ExecutorConfig()).run(
        "tune max_depth of the tree", {"m.py": TREE}, ["m.py"], validate
    )
    prompt = backend.calls[0]["prompts"][-1]["content"]
    assert "Calls:\nDecisionTreeRegressor: DecisionTreeRegressor(random_state=0) takes" in prompt
    schema = json.dumps(backend.calls[0]["schema"].model_json_schema())
    assert '"max_depth"' in schema and '"ccp_alpha"' not in schema  # narrowed to the keyword named
    assert result.result.valid and "max_depth=3" in seen[0]


# ---- the breast-cancer-tree built-in: a program that builds a library object, no constant ----


def test_arts_with_a_scripted_model_tunes_the_keywords_of_the_seeds_tree(tmp_path, rules):
    from arts.search.config import SearchConfig
    from arts.search.store import Store

    cfg = SearchConfig(task="breast-cancer-tree", group=2, budget={"evals": 3})
    summary = run_with_rules(cfg, tmp_path / "run")
    with Store.open(tmp_path / "run", create=False) as store:
        nodes = [n for n in store.load_state().nodes.values() if n.parent is not None]
    verbs = {n.hypothesis.split()[0] for n in nodes}
    assert nodes and verbs <= {"tune", "increase", "decrease"}  # the only moves there are
    assert verbs & {"increase", "decrease"}  # numeric keywords (min_samples_split, ...) move like constants
    edited = [n.files["model.py"] for n in nodes if n.status == "valid"]
    assert edited and all("DecisionTreeClassifier(random_state=0, " in text for text in edited)
    assert summary["valid_nodes"] >= 2  # the seed and at least one tuned tree


def test_mutate_through_the_arts_command_sets_keyword_arguments_and_swaps_calls(tmp_path):
    from arts.search.cli.main import main
    from arts.search.store import Store

    run = tmp_path / "run"
    argv = ["search", "breast-cancer-tree", "--method", "mutate", "--evals", "5", "--group", "4", "--seed", "1",
            "--run-dir", str(run), "-q"]  # fmt: skip
    assert main(argv) == 0
    with Store.open(run, create=False) as store:
        nodes = [n for n in store.load_state().nodes.values() if n.parent is not None]
    ops = [n.transcript[0]["action"]["op"] for n in nodes]
    assert {"set_keyword", "swap_call"} <= set(ops) and {"valid"} <= {n.status for n in nodes}


# ---- numeric keywords move like constants: a direction from the scientist, the compass's step ----

KNN = """from sklearn.neighbors import KNeighborsRegressor


def build():
    return KNeighborsRegressor(n_neighbors=3, weights="uniform")
"""


def test_the_scientist_is_offered_directions_for_a_numeric_keyword_and_tune_for_a_word():
    from arts.search.methods.targets import targets
    from arts.search.state import Node, SearchState

    state = SearchState(nodes={1: Node(id=1, files={"model.py": KNN}, status="seed", score=0.3)})
    moves = targets(state, lambda files: None)
    assert moves["n_neighbors"] == ("increase", "decrease") and moves["weights"] == ("tune",)


@pytest.mark.parametrize(
    ("hypothesis", "level", "value"),
    [("increase n_neighbors", 0, "6"), ("increase n_neighbors", 1, "4"), ("decrease n_neighbors", 0, "2")],
)
def test_a_directed_keyword_offers_the_compass_step_on_its_side(hypothesis, level, value):
    from arts.policy.edits.step_menus import step_menus

    sides = {"n_neighbors": 1 if hypothesis.startswith("increase") else -1}
    files = {"model.py": KNN}
    menus = step_menus(files, files, None, {}, sides, ["set_keyword"], True, compass=True, level=level)
    assert menus.keywords["KNeighborsRegressor"]["n_neighbors"] == [value]
    assert len(menus.keywords["KNeighborsRegressor"]["weights"]) >= 1  # other keywords keep their menus


def test_the_executor_moves_a_directed_keyword_that_way_and_the_edit_runs(tmp_path):
    answer = {"op": "set_keyword", "call": "KNeighborsRegressor", "keyword": "n_neighbors", "value": "6"}
    backend = ScriptedBackend([answer])
    result = Executor(backend, ExecutorConfig(max_actions=1)).run(
        "increase n_neighbors",
        {"model.py": KNN},
        ["model.py"],
        lambda files: EvalResult(valid=True, score=0.0),
    )
    schema = json.dumps(backend.calls[0]["schema"].model_json_schema())
    assert '"6"' in schema and '"1"' not in schema and '"2"' not in schema  # only the step up
    (tmp_path / "model.py").write_text(result.files["model.py"])
    code = "import model; print(model.build().get_params()['n_neighbors'])"
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0 and run.stdout.strip() == "6", run.stderr


def test_the_compass_level_counts_failed_keyword_moves():
    from arts.search import compass
    from arts.search.state import Node, SearchState

    state = SearchState(
        nodes={1: Node(id=1, files={"model.py": KNN}, status="seed", score=0.3, raw_score=0.3)}
    )
    for i, (keyword, value) in enumerate([("n_neighbors", "6"), ("p", "4"), ("p", "1")], start=2):
        action = {"op": "set_keyword", "call": "KNeighborsRegressor", "keyword": keyword, "value": value}
        t = {"action": action, "valid": True, "score": 0.1}
        state.nodes[i] = Node(
            id=i, parent=1, files={}, transcript=[t], status="valid", score=0.1, raw_score=0.1
        )
    assert (
        compass.level(state, state.nodes[1], lambda x: x) == 1
    )  # three failed x2 / x0.5 steps (p's default is 2)
