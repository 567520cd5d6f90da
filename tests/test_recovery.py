"""The recovery benchmark's scenarios fail as their files say, and a scenario run routes its failure and
searches on (`search.bench.recovery`, `scripts/recovery_bench.py`)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from arts.search.bench.recovery import append_row, load_scenarios, make_task, read_rows, run_scenario, summary
from arts.search.render import tried_edits
from arts.search.store import Store
from arts.tasks.base import load_task
from arts.tasks.evaluate import run_evaluation

ROOT = Path(__file__).resolve().parents[1]


def test_every_scenario_fails_as_constructed(tmp_path):
    """Without jitter the failed program is invalid or scores below the seed; with it, the program computes
    what the seed does (its failure is the measurement's)."""
    scenarios = load_scenarios()
    assert len(scenarios) >= 12
    assert {s.level for s in scenarios} >= {
        "repair",
        "fix_protocol",
        "refine_local",
        "refine_structural",
        "pivot",
    }
    for s in scenarios:
        task = load_task(make_task(s.model_copy(update={"jitter": 0.0}), tmp_path / "tasks"))
        seed = task.seed_files()
        failed = {**seed, "solution.py": s.failed_program(seed["solution.py"])}
        before = run_evaluation(task, seed, tmp_path / f"{s.name}-seed")
        after = run_evaluation(task, failed, tmp_path / f"{s.name}-failed")
        assert before.valid, (s.name, before.reason)
        if s.jitter:
            assert after.valid and after.score == before.score, s.name
        else:
            worse = task.normalise(after.score) < task.normalise(before.score) if after.valid else True
            assert worse, (s.name, before.score, after.score)


def test_a_tuned_parent_is_a_local_optimum_that_only_the_remedy_beats(tmp_path):
    """Where a scenario tunes its parent, no step of one or two along any integer knob beats it, and the
    right route's program (`remedy`) does: recovery from there measures the route, not luck."""
    tuned = [s for s in load_scenarios() if s.parent]
    assert {s.level for s in tuned} >= {"repair", "refine_local", "refine_structural", "pivot"}
    parents: dict[str, float] = {}
    for s in tuned:
        task = load_task(make_task(s, tmp_path / "tasks"))
        seed = task.seed_files()
        program = seed["solution.py"]
        if program not in parents:
            parents[program] = task.normalise(run_evaluation(task, seed, tmp_path / f"{s.name}-p").score)
            knobs = re.findall(r"^([A-Z_]+) = (\d+)\b", program, re.M)
            assert knobs, s.name
            for name, value in knobs:
                for step in (-2, -1, 1, 2):
                    if int(value) + step < 1:
                        continue
                    moved = program.replace(f"{name} = {value}", f"{name} = {int(value) + step}", 1)
                    res = run_evaluation(
                        task, {**seed, "solution.py": moved}, tmp_path / f"{s.name}-{name}{step}"
                    )
                    assert task.normalise(res.score) <= parents[program], (s.name, name, step, res.score)
        fixed = run_evaluation(
            task, {**seed, "solution.py": s.remedy_program(program)}, tmp_path / f"{s.name}-r"
        )
        assert fixed.valid and task.normalise(fixed.score) > parents[program], (s.name, fixed.score)


def test_a_bad_edit_names_the_scenario_and_the_text():
    s = load_scenarios(names=["lf-overshoot"])[0].model_copy(update={"edits": [("LR = 9", "LR = 1")]})
    with pytest.raises(ValueError, match="lf-overshoot: 'LR = 9' is in the seed 0 times"):
        s.failed_program("LR = 0.05\n")
    with pytest.raises(ValueError, match="unknown scenario"):
        load_scenarios(names=["no-such"])


@pytest.mark.parametrize("method", ["arts", "arts-no-attribution"])
def test_a_scenario_run_routes_its_failure_and_searches_on(tmp_path, rules, method):
    s = load_scenarios(names=["lf-overshoot"])[0]
    row = run_scenario(s, method, 0, 2, tmp_path)
    assert row["failed"] and row["evals"] >= 1 and row["parent"] is not None
    with Store.open_readonly(tmp_path / "runs" / f"lf-overshoot--{method}--s0") as store:
        state = store.load_state()
    failed = next(n for n in state.nodes.values() if n.round == 1)
    routed = [
        e.payload for e in state.events.values() if e.kind == "routing" and e.payload["node"] == failed.id
    ]
    if method == "arts":  # the scripted critic backs a major method flaw, the blown-up curve says a step too
        assert (
            row["route"] == routed[0]["decision"]["action"] == "refine_local"
        )  # far; the next round follows it up
        assert any(n.follows == failed.id for n in state.nodes.values())
    else:
        assert row["route"] == "none" and not row["right"]
    append_row(tmp_path / "rows.csv", row)
    assert read_rows(tmp_path / "rows.csv")[0]["scenario"] == "lf-overshoot"


def test_a_run_from_a_tuned_parent_starts_there_and_fails_as_stated(tmp_path, rules):
    """The run's root is the scenario's parent (the tuned program), and round 1 its failed child."""
    s = load_scenarios(names=["lo-sm-median-import"])[0]
    row = run_scenario(s, "arts", 0, 0, tmp_path)
    assert row["failed"] and abs(-row["parent"] - 0.1843) < 1e-4
    with Store.open_readonly(tmp_path / "runs" / f"{s.name}--arts--s0") as store:
        state = store.load_state()
    root = next(n for n in state.nodes.values() if n.parent is None)
    assert "WINDOW = 9" in root.files["solution.py"] and "PASSES = 9" in root.files["solution.py"]
    failed = next(n for n in state.nodes.values() if n.round == 1)
    assert failed.score is None and "median" in failed.files["solution.py"]


@pytest.mark.parametrize(
    ("name", "fix"),
    [("lo-sm-median-import", "from statistics import median"), ("lo-sm-trim-name", "len(kept)")],
)
def test_a_repair_edits_the_failed_program_and_recovers_past_the_parent(tmp_path, rules, name, fix):
    """The crash (a median without its import, a misspelt name) routes to a repair; the repair starts from
    the failed program, not the parent, and its quick fix beats the tuned parent, which no knob step does."""
    s = load_scenarios(names=[name])[0]
    row = run_scenario(s, "arts", 0, 2, tmp_path)
    assert row["route"] == "repair" and row["recovered"] is True
    with Store.open_readonly(tmp_path / "runs" / f"{s.name}--arts--s0") as store:
        state = store.load_state()
    failed = next(n for n in state.nodes.values() if n.round == 1)
    repair = next(n for n in state.nodes.values() if n.follows == failed.id)
    assert repair.parent == failed.parent and repair.status == "valid"
    assert fix in repair.files["solution.py"]
    assert repair.transcript[0]["op"] == "quick_fix"


def test_a_refinement_of_a_worse_program_edits_that_program_under_its_parent(tmp_path, rules):
    """The median over 101 samples is valid and worse: refined, its own program is edited (the median
    stays; a knob of it moves), while the node's parent in the tree is the tuned parent."""
    s = load_scenarios(names=["lo-sm-median-wide"])[0]
    row = run_scenario(s, "arts", 0, 2, tmp_path)
    assert row["route"].startswith("refine")
    with Store.open_readonly(tmp_path / "runs" / f"{s.name}--arts--s0") as store:
        state = store.load_state()
    failed = next(n for n in state.nodes.values() if n.round == 1)
    refined = next(n for n in state.nodes.values() if n.follows == failed.id)
    assert refined.parent == failed.parent and "median(" in refined.files["solution.py"]
    assert refined.files["solution.py"] != failed.files["solution.py"]


def test_the_summary_gives_intervals_and_the_differences_to_arts():
    rows = [
        {"scenario": f"s{i}", "level": "repair", "method": m, "seed": k, "failed": "True",
         "route": "repair" if m == "arts" else "none", "right": str(m == "arts"),
         "recovered": str(m == "arts" or k == 0)}
        for i in range(3) for m in ("arts", "arts-reflection") for k in range(3)
    ]  # fmt: skip
    text = "\n".join(summary(rows))
    assert "| arts | 9 | 1.000 [1.000, 1.000] | 1.000 [1.000, 1.000] |" in text
    assert "| arts − arts-reflection | 0.667" in text


def test_the_script_lists_the_scenarios():
    out = subprocess.run([sys.executable, "scripts/recovery_bench.py", "--list"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    assert "lf-bug-name  repair" in out and out.count("\n") >= 12
    tuned = subprocess.run([sys.executable, "scripts/recovery_bench.py", "--list", "--scenarios", "lo-*"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert tuned.count("lo-sm-") == tuned.count("\n") >= 12  # a pattern: the scenarios from the local optimum


def test_a_second_process_takes_the_later_seeds(tmp_path):
    """Seeds from --from-seed on: with it at --seeds, nothing is left to run (without it, 24 runs would)."""
    out = subprocess.run([sys.executable, "scripts/recovery_bench.py", "--out", str(tmp_path), "--seeds", "2",
                          "--from-seed", "2", "--methods", "arts", "--scenarios", "lo-*"],
                         cwd=ROOT, capture_output=True, text=True, check=True, timeout=120).stdout  # fmt: skip
    assert "12 scenarios x 1 methods x 2 seeds, 0 runs already finished, 0 to run" in out


def test_with_no_evaluations_a_run_measures_the_route_only(tmp_path, rules):
    row = run_scenario(load_scenarios(names=["sm-length"])[0], "arts", 0, 0, tmp_path)
    assert row["route"] != "none" and row["recovered"] == "" and row["evals"] == 0


def test_the_summary_splits_the_held_out_scenarios_from_the_rest():
    rows = [
        {"scenario": name, "level": "repair", "method": "arts", "seed": k, "failed": "True",
         "route": "repair" if right else "pivot", "right": str(right), "recovered": ""}
        for name, right in (("ho-lf-bug-grad", False), ("lf-bug-name", True)) for k in range(2)
    ]  # fmt: skip
    text = "\n".join(summary(rows))
    assert "on the held-out scenarios: arts 0.000 [0.000, 0.000]" in text
    assert "on the other scenarios: arts 1.000 [1.000, 1.000]" in text


def test_a_local_refinement_steps_back_along_the_constant_the_failed_edit_moved(tmp_path, rules):
    """lf-overshoot (LR 0.05 -> 0.5 diverges): the refinement is a line search, not a model's edit, and
    halfway back on a log scale (0.16), else a quarter of the way (0.089), beats the parent."""
    s = load_scenarios(names=["lf-overshoot"])[0]
    row = run_scenario(s, "arts", 0, 2, tmp_path)
    with Store.open_readonly(tmp_path / "runs" / "lf-overshoot--arts--s0") as store:
        state = store.load_state()
    failed = next(n for n in state.nodes.values() if n.round == 1)
    stepped = [n for n in state.nodes.values() if n.follows == failed.id]
    assert stepped and all(n.parent == failed.parent for n in stepped)
    values = [n.transcript[0]["action"]["value"] for n in stepped]
    assert values == [0.16, 0.089][: len(values)]
    assert all(n.transcript[0]["op"] == "smaller_step" for n in stepped)
    assert "- LR = 0.089 on node" in tried_edits(state, {"LR"}, lambda s: None if s is None else -s)
    assert row["recovered"] and stepped[-1].score > state.nodes[failed.parent].score
    (done,) = [e.payload for e in state.events.values() if e.kind == "follow_up"]
    assert done["result"] == stepped[-1].id and all(n.round == done["ran"] for n in stepped)


def test_a_line_search_that_finds_nothing_turns_the_local_route_into_a_pivot(tmp_path, rules):
    """lo-sm-ema adds ALPHA = 0.2 and scores worse: a new knob set once, so the route is local and its line
    search (ALPHA 0.02, then 2) is the evidence; neither beats the tuned parent, so the route becomes a
    pivot (a second routing event says why), and the refined hypothesis and its origin are archived."""
    s = load_scenarios(names=["lo-sm-ema"])[0]
    row = run_scenario(s, "arts", 0, 3, tmp_path)
    assert (row["first"], row["route"], row["right"]) == ("refine_local", "pivot", True)
    with Store.open_readonly(tmp_path / "runs" / "lo-sm-ema--arts--s0") as store:
        state = store.load_state()
    failed = next(n for n in state.nodes.values() if n.round == 1)
    stepped = [n for n in state.nodes.values() if n.follows == failed.id]
    assert [n.transcript[0]["action"]["value"] for n in stepped] == [0.02, 2.0]
    first, last = [
        e.payload for e in state.events.values() if e.kind == "routing" and e.payload["node"] == failed.id
    ]
    assert first["decision"]["action"] == "refine_local" and "verified" not in first
    assert last["verified"]["constant"] == "ALPHA" and last["verified"]["paid"] is False
    assert [v for v, _ in last["verified"]["tried"]] == [0.02, 2.0]
    tested = [
        h for h in state.hypotheses.values() if failed.id in h.nodes or set(h.nodes) & {n.id for n in stepped}
    ]
    assert tested and all(h.archived for h in tested)
    later = [
        n for n in state.nodes.values() if n.id > stepped[-1].id
    ]  # the next experiment is another idea's
    assert all(n.hypothesis not in {h.text for h in tested} for n in later)


def test_a_line_search_that_pays_keeps_the_local_route(tmp_path, rules):
    """lo-sm-clip-tight adds CEILING = 0.2, below the curve's peaks: the line search tries 0.02 (worse),
    then 2 (rmse 0.1352), which beats the tuned parent (0.1843): the route stays local and recovered."""
    s = load_scenarios(names=["lo-sm-clip-tight"])[0]
    row = run_scenario(s, "arts", 0, 2, tmp_path)
    assert (row["first"], row["route"], row["recovered"]) == ("refine_local", "refine_local", True)
    assert abs(-row["best"] - 0.1352) < 1e-3


def test_a_table_written_before_a_field_was_added_is_rewritten_with_it(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text("scenario,level,method\nlo-sm-ema,pivot,arts\n")
    append_row(path, {"scenario": "lo-sm-midrange", "level": "pivot", "method": "arts", "first": "pivot"})
    rows = read_rows(path)
    assert [r["scenario"] for r in rows] == ["lo-sm-ema", "lo-sm-midrange"]
    assert rows[0]["first"] == "" and rows[1]["first"] == "pivot"


def test_the_settled_route_is_the_first_unless_a_line_search_gave_its_verdict():
    """A stall's later attribution of a plateau holding the failed node is another decision; a line
    search's verdict (a routing event with `verified`) replaces the first route."""
    from arts.search.bench.recovery import settled_route
    from arts.search.state import Event, SearchState

    def routing(i, node, action, **extra):
        return Event(id=i, kind="routing", payload={"node": node, "decision": {"action": action}, **extra})

    stalled = SearchState(
        events={1: routing(1, 2, "pivot"), 2: routing(2, 2, "refine_local", plateau=[2, 3])}
    )
    assert settled_route(stalled, 2) == ("pivot", "pivot")
    verified = {3: routing(3, 2, "pivot", verified={"by": "line search"})}
    refuted = SearchState(events={1: routing(1, 2, "refine_local"), **verified})
    assert settled_route(refuted, 2) == ("refine_local", "pivot")
    assert settled_route(refuted, 9) == ("none", "none")
    stall_then_verdict = SearchState(
        events={1: routing(1, 2, "repair"), **verified}
    )  # the stall's refinement's
    assert settled_route(stall_then_verdict, 2) == ("repair", "repair")
