"""The investigation layer of the arts round (search.dual) through the real loop, with a scripted backend.

These are harness tests: the RuleBackend answers every call with a fixed, schema-valid object, so what is
checked is the bookkeeping (spaces, evidence, routing, clamp, pivot, ablations), not model quality.
"""

from __future__ import annotations

import json

import pytest

from arts.policy.edits.moves import directed_target
from arts.search.config import SearchConfig
from arts.search.store import Store
from tests.doubles import dual_cfg, run_with_rules


def _state(run_dir):
    with Store.open(run_dir, create=False) as store:
        return store.load_state()


def test_a_round_fills_both_spaces_with_evidence(tmp_path, rules):
    summary = run_with_rules(dual_cfg(tmp_path), tmp_path / "run")
    state = _state(tmp_path / "run")
    assert state.meta["plan"]["deliverable"] == "solution.py" and "plan" in rules.purposes
    hyps = list(state.hypotheses.values())
    assert hyps and all(h.nodes for h in hyps if h.status != "pending")
    assert {h.axis for h in hyps} <= {"x", "value"}  # the targets the hypotheses move (X, value())
    sources = {o.source for o in state.observations.values()}
    assert {"execution", "comparison"} <= sources
    linked = {(e.observation, e.hypothesis) for e in state.evidence.values()}
    assert linked and all(o in state.observations and h in state.hypotheses for o, h in linked)
    assert "compare" in rules.purposes
    assert summary["observations"]["count"] == len(state.observations)
    assert summary["observations"]["sources"] == {
        s: sum(o.source == s for o in state.observations.values()) for s in sources
    }
    assert summary["answer_node"] is not None
    html = (tmp_path / "run" / "report.html").read_text()
    assert "<h2>Hypotheses</h2>" in html and "<h2>Observations</h2>" in html


def test_a_repeated_execution_observation_is_confirmed_not_duplicated(tmp_path, rules):
    run_with_rules(dual_cfg(tmp_path, budget={"evals": 8}), tmp_path / "run")
    state = _state(tmp_path / "run")
    execution = [o for o in state.observations.values() if o.source == "execution"]
    texts = [o.text for o in execution]
    assert len(texts) == len(set(texts))
    assert any(o.times_seen > 1 and not o.provisional for o in execution)


def test_failures_are_attributed_and_routed_with_their_inputs(tmp_path, rules):
    rules.bad_edits, rules.cause = 2, ("implementation", "major")
    summary = run_with_rules(dual_cfg(tmp_path), tmp_path / "run")
    state = _state(tmp_path / "run")
    routes = [e.payload for e in state.events.values() if e.kind == "routing"]
    assert routes and routes[0]["decision"]["action"] == "repair"
    decision = routes[0]["decision"]
    assert decision["causes"] and decision["critiques"] and decision["judgement"]  # stored with its inputs
    assert summary["routing"]["repair"] >= 1
    assert any("repair the implementation" in i.text for i in state.insights.values())
    assert {"causes", "critic", "judge"} <= set(rules.purposes)


def test_a_fatal_method_flaw_pivots_and_later_candidates_avoid_its_direction(tmp_path, rules):
    rules.bad_edits, rules.cause, rules.judge = 2, ("method", "fatal"), (False, 0.9)
    cfg = dual_cfg(tmp_path, budget={"evals": 6, "rounds": 4}, scientist={"directed": False})  # one target
    summary = run_with_rules(cfg, tmp_path / "run")
    state = _state(tmp_path / "run")
    archived = [h for h in state.hypotheses.values() if h.archived]
    assert archived and summary["routing"].get("pivot", 0) >= 1
    # the scripted scientist keeps proposing both directions on X: the given-up one is refused
    assert any(e.kind == "indistinct" for e in state.events.values())  # both given up: asked again
    for h in archived:
        way = directed_target(h.text)
        again = [
            n
            for n in state.nodes.values()
            if n.round > h.updated_round and directed_target(n.hypothesis) == way
        ]
        assert way and not again
    first = min(archived, key=lambda h: h.updated_round)
    way = directed_target(first.text)
    other = [
        n
        for n in state.nodes.values()
        if n.round > first.updated_round and directed_target(n.hypothesis) != way
    ]
    assert other  # the other step on X still ran: a pivot gives up a direction, not the knob


def test_the_verdict_clamp_turns_a_pivot_into_a_refinement(tmp_path, rules):
    rules.bad_edits, rules.cause, rules.judge = 2, ("method", "fatal"), (True, 0.8)
    run_with_rules(dual_cfg(tmp_path), tmp_path / "run")
    state = _state(tmp_path / "run")
    decision = next(e.payload["decision"] for e in state.events.values() if e.kind == "routing")
    assert decision["action"] == "refine_structural" and decision["clamped"]
    assert not any(h.archived for h in state.hypotheses.values())
    assert any(h.parent is not None for h in state.hypotheses.values())  # the refinement's lineage


@pytest.mark.parametrize(
    ("component", "absent"),
    [("comparison", "compare"), ("attribution", "causes"), ("audit", "audit")],
)
def test_each_component_can_be_turned_off(tmp_path, rules, component, absent):
    rules.bad_edits = 2
    run_with_rules(dual_cfg(tmp_path, components={component: False}), tmp_path / "run")
    assert absent not in rules.purposes and "propose" in rules.purposes


def test_without_observations_memory_or_verbalized_sampling(tmp_path, rules):
    cfg = dual_cfg(tmp_path, components={"observations": False, "memory": False, "verbalized": False})
    run_with_rules(cfg, tmp_path / "run")
    state = _state(tmp_path / "run")
    assert not state.observations and not state.evidence
    assert not [i for i in state.insights.values() if i.kind == "memory"]
    draws = [e.payload["drawn"] for e in state.events.values() if e.kind == "draw"]
    assert draws and all(len({d[0] for d in drawn}) == 1 for drawn in draws)  # the top candidate only


def test_config_round_trips_the_new_sections(tmp_path):
    from arts.search.config import load_config

    cfg = load_config(None, {"components.comparison": False, "space.cooldown": 3, "attribution.k": 4})
    assert not cfg.components.comparison and cfg.space.cooldown == 3 and cfg.attribution.k == 4
    with pytest.raises(ValueError, match="extra"):
        load_config(None, {"components.nonsense": True})
    assert json.loads(cfg.model_dump_json())["space"]["cooldown"] == 3


def test_an_answer_task_is_investigated_and_its_deliverable_graded(tmp_path, rules):
    from arts.policy.answer_schema import schema_model
    from arts.search.bench.plan import Job
    from arts.search.bench.results import read_run
    from arts.tasks.base import resolve_task

    cfg = SearchConfig.model_validate({"task": "incident-rca", "group": 2, "budget": {"rounds": 2}})
    summary = run_with_rules(cfg, tmp_path / "run")
    state = _state(tmp_path / "run")
    answered = [n for n in state.nodes.values() if n.status == "valid" and n.parent is not None]
    assert answered and summary["evals"] == 0  # no score is ever seen during the search
    model = schema_model(resolve_task("incident-rca").answer_schema())
    model.model_validate_json(answered[0].files["answer.json"])
    assert summary["answer_node"] in {n.id for n in answered}
    assert summary["best"]["test_score"] is not None  # only the hidden grader scores the answer
    assert any(o.source == "execution" for o in state.observations.values()) and state.evidence
    assert (tmp_path / "run" / "best" / "answer.json").is_file()
    row = read_run(Job("incident-rca", "arts", 0, run_dir=tmp_path / "run"), "incident-rca").row
    experiments = [n for n in state.nodes.values() if n.parent is not None]
    assert (row["valid"], row["experiments"]) == (len(answered), len(experiments))  # the seed is none


def test_selection_spreads_over_regions_and_favours_open_evidence():
    from arts.policy.candidates import Candidate
    from arts.search.investigation.hypotheses import selection_weights
    from arts.search.state import Observation, SearchState

    state = SearchState(observations={1: Observation(id=1, text="X above 3 fails", source="execution")})
    cands = [
        Candidate(parent=1, hypothesis="a", probability=0.4, region="constants"),
        Candidate(
            parent=1, hypothesis="b", probability=0.4, region="Constant"
        ),  # the same region, written another way
        Candidate(parent=1, hypothesis="c", probability=0.2, region="control flow", cites=[1]),
    ]
    w = selection_weights(state, cands, SearchConfig().space.cite_boost, observations=True)
    assert w[0] == w[1] == pytest.approx(0.2) and w[2] == pytest.approx(0.3)


def test_the_report_grounds_model_text_against_the_store_and_the_code(tmp_path, rules):
    from arts.search.report.html import write_report
    from arts.search.state import Insight

    run_with_rules(dual_cfg(tmp_path), tmp_path / "run")
    with Store.open(tmp_path / "run", create=False) as store:
        # 93,700 is no value of this run; a small number could match an evaluation's duration.
        store.add(Insight(text="X at 1.0 gave 93,700 rows/s with a random forest", kind="audit"))
        state = store.load_state()
    html = write_report(tmp_path / "run", state).read_text()
    assert "X at 1.0 gave [unmeasured] rows/s with a random forest [not in code]" in html
