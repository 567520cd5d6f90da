"""Proposals whose candidates copy each other or the prompt's example: the copies are not drawn, and a
proposal made only of the example is asked again without one (`hypotheses.copies`)."""

from __future__ import annotations

import json
import re

import pytest

from arts.policy.candidates import Candidate
from arts.search.config import SearchConfig
from arts.search.investigation.hypotheses import copies
from arts.search.store import Store
from tests.doubles import RuleBackend, Scripted, make_task, run_with_rules


def _cand(h: str, parent: int = 0) -> Candidate:
    return Candidate(parent=parent, hypothesis=h, axis="x", region="r", probability=0.25)


def test_copies_of_another_candidate_or_of_the_example_are_marked():
    ex = "change X from 10 to a better value"
    cands = [_cand(ex), _cand("Change X from 10 to a better value."), _cand("halve X"), _cand("halve X", 1)]
    assert copies(cands, ex) == [False, True, False, False]  # another parent is another experiment
    assert copies([_cand(ex), _cand(ex)], ex) == [True, True]  # nothing but the example: ask again
    assert copies([_cand("a"), _cand("a")], None) == [False, True]


class Copier(RuleBackend):
    """Writes the prompt's example into every candidate whenever the prompt shows one."""

    def __init__(self):
        super().__init__()
        self.examples: list[str | None] = []

    def generate(self, prompts, n=1, sampling=None, schema=None, adapter=None, purpose=""):
        out = super().generate(prompts, n, sampling, schema, adapter, purpose)
        if purpose == "propose":
            m = re.search(r'e\.g\. "([^"]+)"', prompts[-1]["content"])
            self.examples.append(m.group(1) if m else None)
            for comp in out[0] if m else []:  # every list the call sampled
                answer = json.loads(comp.text)
                for cand in answer["candidates"]:
                    cand["hypothesis"] = m.group(1)
                comp.text, comp.parsed = json.dumps(answer), schema.model_validate(answer)
        return out


def test_a_proposal_that_only_copies_the_example_is_asked_again_without_it(tmp_path, monkeypatch):
    backend = Copier()
    monkeypatch.setattr("arts.search.run.make_backend", lambda mc, sink, seed: backend)
    cfg = SearchConfig(task=str(make_task(tmp_path / "task")), group=2, budget={"evals": 2})
    cfg.scientist.directed, cfg.analysis.plan_axes = False, True  # as the capable profile sets them
    run_with_rules(cfg, tmp_path / "run")
    assert backend.examples[:2] == [backend.examples[0], None] and backend.examples[0]
    with Store.open(tmp_path / "run", create=False) as store:
        state = store.load_state()
    assert any(e.kind == "indistinct" for e in state.events.values())
    drawn = [n.hypothesis for n in state.nodes.values() if n.parent is not None]
    assert drawn and backend.examples[0] not in drawn  # the round ran the second proposal's candidates


def test_directed_candidates_are_labelled_from_a_vocabulary(tmp_path, rules):
    """Axis: the target the hypothesis moves; region: the kind of move. The grammar offers only those, and
    a candidate naming another target of its share is relabelled after the one it moves."""
    from arts.policy.proposal_schema import KINDS, labelled, proposal_schema

    schema = proposal_schema(
        [1], 2, None, ["^increase X$", "^tune alpha$"], [{"X": ("increase",)}, {"alpha": ("tune",)}]
    )
    items = [
        m.model_json_schema()["properties"] for m in schema.model_fields["candidates"].annotation.__args__
    ]
    assert [(p["axis"]["const"], p["region"]["const"]) for p in items] == [
        ("X", "constants"),
        ("alpha", "keywords"),
    ]
    c = labelled(_cand("swap Ridge#2 for a forest"))
    assert (c.axis, c.region) == ("Ridge#2", KINDS["swap"]) and labelled(_cand("free text")).axis == "x"

    cfg = SearchConfig(task=str(make_task(tmp_path / "task")), group=2, budget={"evals": 4})
    run_with_rules(cfg, tmp_path / "run")
    with Store.open(tmp_path / "run", create=False) as store:
        state = store.load_state()
    labels = {(h.axis, h.region) for h in state.hypotheses.values()}
    assert labels and labels <= {("x", "constant"), ("x", "probe"), ("value", "return")}, labels  # normalised


def test_a_candidate_may_name_the_hypothesis_it_refines_and_the_executor_is_told(tmp_path, rules):
    """capable-style free proposals show working hypotheses as h<id>; a candidate naming one gets it as
    its lineage, and its node's executor instructions say what it refines and how that scored."""
    # 10 evaluations: with 6, seed 0's draws (by the stated probabilities) never took the naming candidate
    cfg = SearchConfig(task=str(make_task(tmp_path / "task")), group=2, budget={"evals": 10})
    cfg.scientist.directed, cfg.scientist.refines = False, 3
    run_with_rules(cfg, tmp_path / "run")
    with Store.open(tmp_path / "run", create=False) as store:
        state = store.load_state()
    children = [h for h in state.hypotheses.values() if h.parent is not None]
    assert children, "no candidate named a hypothesis it refines"
    told = [n for n in state.nodes.values() if n.instructions.startswith("This refines h")]
    assert told and any("best" in n.instructions for n in told)
    prompts = [p for p in rules.prompts if "## Hypotheses a candidate may refine" in p]
    sections = [p.split("## Hypotheses a candidate may refine")[1].split("\n\n")[0] for p in prompts]
    assert prompts and all(s.count("\n- h") <= 3 for s in sections)  # at most `refines` shown


def test_free_candidates_label_from_the_plans_axes_and_the_kinds_of_change(tmp_path, rules):
    """A free proposal's axis is one of the plan's axes (or `other`) and its region a kind of change:
    the grammar refuses a free string, and hypotheses of a capable-style run share the plan's words."""
    from arts.policy.proposal_schema import FREE_REGIONS, OTHER, proposal_schema

    item = proposal_schema([1], 2, plan_axes=["model size", "lr"]).model_fields["candidates"].annotation
    props = item.__args__[0].model_json_schema()["properties"]
    assert props["axis"]["enum"] == ["model size", "lr", OTHER] and props["region"]["enum"] == list(
        FREE_REGIONS
    )
    answer = {"parent": 1, "hypothesis": "halve the step size", "axis": "lr", "region": "constants"}
    item.__args__[0].model_validate(answer | {"probability": 0.5})
    with pytest.raises(ValueError):
        item.__args__[0].model_validate(answer | {"axis": "MARGINADUONADUOA", "probability": 0.5})
    without = proposal_schema([1], 2).model_fields["candidates"].annotation.__args__[0]
    assert without.model_json_schema()["properties"]["axis"]["type"] == "string"  # no plan: free

    cfg = SearchConfig(task=str(make_task(tmp_path / "task")), group=2, budget={"evals": 4})
    cfg.scientist.directed, cfg.analysis.plan_axes = False, True  # as the capable profile sets them
    run_with_rules(cfg, tmp_path / "run")
    with Store.open(tmp_path / "run", create=False) as store:
        state = store.load_state()
    assert state.meta["plan"]["axes"] == ["x value", "precision"]
    assert all("axis: which axis of the plan it varies" in p for p in rules.prompts)
    labels = {(h.axis, h.region) for h in state.hypotheses.values()}
    assert labels and {a for a, _ in labels} <= {"x value", "precision", OTHER}, labels


def test_the_refines_field_is_optional_and_compiles_for_the_decoder():
    from arts.policy.proposal_schema import proposal_schema

    schema = proposal_schema([1], 2, None, None, None, [7, 9])
    item = schema.model_fields["candidates"].annotation.__args__[0]
    assert (
        item.model_validate(
            {
                "parent": 1,
                "hypothesis": "halve the step size",
                "axis": "ab",
                "region": "algorithm",
                "probability": 0.5,
            }
        ).refines
        is None
    )
    xgr = pytest.importorskip("xgrammar")
    xgr.Grammar.from_json_schema(
        json.dumps(schema.model_json_schema()), any_whitespace=False, strict_mode=True
    )


def test_written_axis_first_a_directed_candidates_axis_is_the_target_it_moves():
    """`scientist.axis_first`: the axis names one target of the candidate's share and the hypothesis moves
    that target only (an axis naming another target, as the embedded model wrote unbound, is refused),
    and the grammar compiles for the decoder."""
    from pydantic import ValidationError

    from arts.policy.proposal_schema import directed_pattern, proposal_schema

    shares = [{"TOL": ("increase", "decrease"), "STEPS": ("increase",)}, {"STEPS": ("increase",)}]
    schema = proposal_schema([1, 2], 2, None, [directed_pattern(m) for m in shares], shares, axis_first=True)

    def one(axis: str, hypothesis: str) -> dict:
        return {
            "parent": 1,
            "axis": axis,
            "hypothesis": hypothesis,
            "region": "constants",
            "probability": 0.5,
        }

    ok = schema.model_validate(
        {"candidates": [one("TOL", "decrease TOL by half"), one("STEPS", "increase STEPS")]}
    )
    assert [c.axis for c in ok.candidates] == ["TOL", "STEPS"]
    for first in (one("TOL", "increase STEPS"), one("STEPS", "decrease STEPS"), one("STEPS", "decrease TOL")):
        with pytest.raises(ValidationError):
            schema.model_validate({"candidates": [first, one("STEPS", "increase STEPS")]})
    xgr = pytest.importorskip("xgrammar")
    xgr.Grammar.from_json_schema(
        json.dumps(schema.model_json_schema()), any_whitespace=False, strict_mode=True
    )


def test_a_truncated_directed_proposal_keeps_its_complete_candidates_and_their_labels():
    """A directed answer cut off at max_tokens is salvaged against every target and kind of its moves
    (a probe's region is no kind of a free candidate), then labelled by the move it names."""
    from arts.policy.scientist import Scientist, ScientistConfig

    good = {
        "parent": 1,
        "hypothesis": "probe X for its slope",
        "axis": "X",
        "region": "probes",
        "probability": 0.6,
    }
    text = json.dumps({"candidates": [good]})[:-2] + ', {"parent": 1, "hypo'
    scientist = Scientist(Scripted({"propose": text}), ScientistConfig(candidates=2))
    prop = scientist.propose(
        "state", [1], tail=False, targets={"X": ("increase", "probe"), "value": ("rewrite",)}
    )
    assert prop.completion.parsed is None  # the grammar's answer did not parse: salvaged
    assert [(c.hypothesis, c.axis, c.region) for c in prop.candidates] == [
        ("probe X for its slope", "X", "probes")
    ]


class SameLists(RuleBackend):
    """Every one of a call's n lists is the same answer (a model that always says the same)."""

    def generate(self, prompts, n=1, sampling=None, schema=None, adapter=None, purpose=""):
        one = super().generate(prompts, 1, sampling, schema, adapter, purpose)[0][0]
        self.n_asked = getattr(self, "n_asked", []) + ([n] if purpose == "propose" else [])
        return [[one] * n]


def _group_run(tmp_path, monkeypatch, backend, **scientist):
    monkeypatch.setattr("arts.search.run.make_backend", lambda mc, sink, seed: backend)
    cfg = SearchConfig(task=str(make_task(tmp_path / "task")), group=3, budget={"evals": 6}, seed=1)
    cfg.scientist = cfg.scientist.model_copy(update=scientist)
    run_with_rules(cfg, tmp_path / "run")
    with Store.open(tmp_path / "run", create=False) as store:
        return store.load_state()


def test_each_action_of_a_group_is_drawn_from_its_own_list(tmp_path, monkeypatch):
    """`arts search`: one proposal call samples N lists; each rollout is one draw from its list, stored with
    that list's candidates (what it was drawn among) and index."""
    backend = RuleBackend()
    state = _group_run(tmp_path, monkeypatch, backend)
    rounds = {r.round for r in state.rollouts.values()}
    for k in rounds:
        group = [r for r in state.rollouts.values() if r.round == k]
        assert 1 <= len(group) <= 3  # the last round may stop short, at the budget
        lists = [tuple(c["hypothesis"] for c in r.candidates) for r in group]
        assert len(set(lists)) == len(group)  # one action drawn from each list
        for r, shown in zip(group, lists):
            assert shown[r.drawn] in r.action and len(shown) == 4  # K candidates in each list


def test_an_action_two_lists_drew_runs_once_and_both_draws_share_its_outcome(tmp_path, monkeypatch):
    """Identical lists: the same action is often drawn twice. It is evaluated once; every draw of it points
    at that node, so GRPO counts it as often as it was drawn, with the reward the action earned."""
    backend = SameLists()
    state = _group_run(tmp_path, monkeypatch, backend)
    assert set(backend.n_asked) == {3}
    by_action: dict[tuple[int, str], list] = {}
    for r in state.rollouts.values():
        by_action.setdefault((r.round, r.action), []).append(r)
    repeated = [rs for rs in by_action.values() if len(rs) > 1]
    assert repeated, "with identical lists some action is drawn twice"
    for rs in repeated:
        assert len({r.node for r in rs}) == 1 and rs[0].node is not None
        assert len({r.reward for r in rs}) == 1
    made = [n for n in state.nodes.values() if n.rollout is not None]
    assert len({n.id for n in made}) == len({(k, a) for k, a in by_action})  # one node per distinct action


def test_one_list_draws_the_group_from_a_single_list(tmp_path, monkeypatch):
    backend = SameLists()
    state = _group_run(tmp_path, monkeypatch, backend, one_list=True)
    assert set(backend.n_asked) == {1}
    for k in {r.round for r in state.rollouts.values()}:
        group = [r for r in state.rollouts.values() if r.round == k]
        assert len({r.drawn for r in group}) == len(group)  # without replacement from the one list


def test_a_search_with_the_embedded_model_says_what_it_is_good_for_and_what_the_budget_buys(
    tmp_path, monkeypatch, capsys
):
    from arts.search.cli.main import main

    monkeypatch.setattr("arts.search.run.make_backend", lambda mc, sink, seed: RuleBackend())
    task = make_task(tmp_path / "task")
    assert (
        main(["search", str(task), "--evals", "4", "--group", "2", "--run-dir", str(tmp_path / "run")]) == 0
    )
    out = capsys.readouterr().out
    assert "note: the embedded 135M model proposes small directed edits" in out
    assert "this budget buys about 2 rounds of 2 experiments (4 evaluations)" in out
    main(["search", str(task), "--method", "mutate", "--evals", "2", "--run-dir", str(tmp_path / "run2")])
    assert "embedded 135M" not in capsys.readouterr().out
