"""Failure attribution: the routing table, the verdict clamp, critic corrections, stall detection and the
distinctness of pivots (pure logic), and the orchestration over a scripted analyst (harness only)."""

from __future__ import annotations

import json
from itertools import product
from typing import get_args

import pytest

from arts.policy.analysis import AnalysisConfig, Analyst
from arts.policy.analysis_answers import Category, Cause, Critique, Judgement, Severity
from arts.policy.base import Completion
from arts.search.investigation.attribution import (
    ROUTES,
    AttributionConfig,
    attribute,
    distinct,
    rank,
    route,
    stalled,
    trajectory,
)
from arts.search.investigation.meaning import overlap

CFG = AttributionConfig()
EXPECTED = {
    ("implementation", "minor"): "repair",
    ("implementation", "major"): "repair",
    ("implementation", "fatal"): "repair",
    ("design", "minor"): "fix_protocol",
    ("design", "major"): "fix_protocol",
    ("design", "fatal"): "fix_protocol",
    ("method", "minor"): "refine_local",
    ("method", "major"): "refine_structural",
    ("method", "fatal"): "pivot",
}
PAIRS = list(product(get_args(Category), get_args(Severity)))


def cause(category: str = "method", severity: str = "fatal", text: str = "the idea cannot work") -> Cause:
    return Cause(
        evidence="score 0.41 vs parent 0.90",
        cause=text,
        category=category,
        severity=severity,
        fix="try again",
    )


def judged(valid: bool, confidence: float) -> Judgement:
    return Judgement(reason="ran to the end", valid_measurement=valid, confidence=confidence)


def top(category: str, severity: str):
    return rank([cause(category, severity)], [])[0]


@pytest.mark.parametrize("pair", PAIRS)
def test_routing_table_case_by_case(pair):
    assert ROUTES[pair] == EXPECTED[pair]
    decision = route(top(*pair), None, CFG)
    assert decision.action == decision.routed == EXPECTED[pair] and not decision.clamped


def test_table_is_complete_and_pivots_only_on_a_fatal_method_flaw():
    assert set(ROUTES) == set(PAIRS)
    assert [pair for pair, action in ROUTES.items() if action == "pivot"] == [("method", "fatal")]


@pytest.mark.parametrize(
    ("confidence", "clamped"), [(0.59, False), (0.5999, False), (0.6, True), (0.61, True), (1.0, True)]
)
def test_clamp_at_the_confidence_threshold(confidence, clamped):
    decision = route(top("method", "fatal"), judged(True, confidence), CFG)
    assert decision.routed == "pivot" and decision.clamped is clamped
    assert decision.action == ("refine_structural" if clamped else "pivot")


def test_an_invalid_measurement_never_clamps():
    for confidence in (0.0, 0.6, 1.0):
        decision = route(top("method", "fatal"), judged(False, confidence), CFG)
        assert decision.action == "pivot" and not decision.clamped


@pytest.mark.parametrize("pair", [p for p in PAIRS if p != ("method", "fatal")])
def test_clamp_leaves_non_discarding_actions_alone(pair):
    decision = route(top(*pair), judged(True, 1.0), CFG)
    assert decision.action == EXPECTED[pair] and not decision.clamped


def test_clamp_threshold_comes_from_the_config():
    strict = AttributionConfig(clamp_confidence=0.9)
    assert route(top("method", "fatal"), judged(True, 0.8), strict).action == "pivot"


def test_critic_scores_order_the_causes_and_ties_go_to_severity_then_order():
    causes = [cause(text=f"cause {i}") for i in range(3)]
    critiques = [
        Critique(index=0, score=0.2, category="method", criticality=0.9),
        Critique(index=1, score=0.7, category="method", criticality=0.9),
        Critique(index=2, score=0.7, category="method", criticality=0.9),
    ]
    assert [r.index for r in rank(causes, critiques)] == [1, 2, 0]
    assert [r.index for r in rank(causes, [])] == [0, 1, 2]  # a failed critic: uniform scores
    labelled = [cause(severity=s) for s in ("minor", "fatal", "major")]
    assert [r.index for r in rank(labelled, [])] == [1, 2, 0]  # the analyst's severity, fatal first
    partial = [
        Critique(index=2, score=0.9, category="method", criticality=0.9),
        Critique(index=7, score=1.0, category="design", criticality=0.9),
    ]
    assert [r.index for r in rank(causes, partial)] == [2, 0, 1]  # an unknown index is ignored


def test_critic_category_correction_changes_the_route():
    causes = [cause("method", "fatal"), cause("design", "minor")]
    plain = route(rank(causes, [])[0], None, CFG)
    assert plain.action == "pivot"
    corrected = rank(causes, [Critique(index=0, score=0.8, category="implementation", criticality=0.9)])
    assert corrected[0].corrected and corrected[0].cause.category == "implementation"
    assert route(corrected[0], None, CFG).action == "repair"
    assert causes[0].category == "method"  # the analyst's cause itself is not changed


@pytest.mark.parametrize(
    ("curve", "expected"),
    [
        ([0, 1, 2, 3, 4, 5, 6, 7], False),  # rising
        ([0.0, 0.3, 0.2, 0.5, 0.4, 0.7, 0.6, 0.9], False),  # noisy but rising
        ([0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 1.0], False),  # a fresh step of the staircase
        ([1, 1, 1, 1, 1, 1], True),  # flat
        ([1.0, 1.02, 0.99, 1.01, 1.0, 0.98, 1.01, 1.0], True),  # noise around a level
        ([0, 0.5, 0.75, 0.875, 0.94, 0.97, 0.985, 0.992], True),  # gains decaying
        ([0.5, 0.9, 0.95, 0.951, 0.9512, 0.9515, 0.9516, 0.952], True),  # creeping up by noise
        ([0, 0, 0], False),  # shorter than the window: no evidence of a stall
        ([], False),
    ],
)
def test_stall_detection(curve, expected):
    assert stalled(trajectory(curve, CFG), CFG) is expected


def test_trajectory_numbers():
    t = trajectory([0, 1, 2, 3, 4, 5, 6, 7], CFG)
    assert t.slope == pytest.approx(1 / 7) and t.volatility == pytest.approx(0) and t.marginal_decay == 0
    t = trajectory([0, 0.5, 0.75, 0.875, 0.94, 0.97, 0.985, 0.992], CFG)
    assert t.marginal_decay == pytest.approx(1 - (0.992 - 0.94) / (0.94 - 0.5))  # windows share 0.94
    assert trajectory([5, 5, 5, 5], CFG).slope == 0


def test_distinctness_of_pivots():
    archived = ["Increase the learning rate of the optimizer", "replace the sort by a heap"]
    assert not distinct("increase learning rates for the optimizer", archived, CFG.distinct_threshold)
    assert distinct("add dropout between the hidden layers", archived, CFG.distinct_threshold)
    assert distinct("anything new", [], CFG.distinct_threshold)
    assert not distinct("the of and", archived, CFG.distinct_threshold)  # no content words at all
    assert overlap("Heap SORT", "sort heap") == 1.0
    assert overlap("set X to 0.5", "set X to 0.7") < 1.0  # numbers are words too


class Scripted:
    """Scripted answers per purpose, validated like a real backend (harness tests only)."""

    name = model_id = "scripted"

    def __init__(self, answers: dict[str, object]):
        self.answers, self.purposes = answers, []

    def generate(self, prompts, n=1, sampling=None, schema=None, adapter=None, purpose=""):
        self.purposes.append(purpose)
        text = json.dumps(self.answers[purpose])
        try:
            return [[Completion(text=text, parsed=schema.model_validate_json(text))]]
        except ValueError as e:
            return [[Completion(text=text, error=str(e)[:200])]]


CAUSES = {  # in the grammar's slots: the code, the evaluation, the idea
    "causes": [
        cause("implementation", "major", "a typo in the loss").model_dump(),
        cause("design", "minor", "the split leaks").model_dump(),
        cause("method", "fatal", "the idea cannot work").model_dump(),
    ]
}
CRITIC = {
    "scores": [
        {"index": 0, "score": 0.25, "category": "implementation", "criticality": 0.65},
        {"index": 1, "score": 0.0, "category": "design", "criticality": 0.375},
        {"index": 2, "score": 1.0, "category": "method", "criticality": 0.9},
    ]
}
JUDGE = {"reason": "weak but ran as intended", "valid_measurement": True, "confidence": 0.8}


def run(**answers):
    backend = Scripted({"causes": CAUSES, "critic": CRITIC, "judge": JUDGE, **answers})
    decision = attribute(Analyst(backend, AnalysisConfig()), "report", CFG, seed=1)
    return decision, backend


def test_attribute_runs_causes_critic_judge_and_clamps():
    decision, backend = run()
    assert backend.purposes == ["causes", "critic", "judge"]
    assert decision.routed == "pivot" and decision.action == "refine_structural" and decision.clamped
    assert decision.index == 2 and decision.score == 1.0 and len(decision.causes) == 3
    assert len(decision.critiques) == 3 and decision.judgement.confidence == 0.8 and not decision.errors
    json.dumps(decision.model_dump())  # plain data for the store


def test_attribute_without_a_critic_falls_back_to_uniform_scores():
    decision, _ = run(critic={"scores": []})  # ties: the analyst's severity decides (fatal first)
    assert decision.index == 2 and decision.score == 0.5 and "critic" in decision.errors


def test_attribute_without_a_judge_does_not_clamp():
    decision, _ = run(judge={"reason": "x"})
    assert decision.action == "pivot" and not decision.clamped and decision.judgement is None
    assert "judge" in decision.errors


def test_attribute_follows_the_critic_to_another_cause():
    critic = {"scores": [{**s, "score": 1.0 - s["score"]} for s in CRITIC["scores"]]}
    decision, _ = run(critic=critic)
    assert decision.index == 1 and decision.action == "fix_protocol"


@pytest.mark.parametrize(
    ("category", "criticality", "action"),
    [
        ("method", 0.1, "accept"), ("method", 0.3, "refine_local"), ("method", 0.6, "refine_structural"),
        ("method", 0.8, "pivot"), ("implementation", 0.1, "accept"), ("implementation", 0.3, "repair"),
        ("implementation", 1.0, "repair"), ("design", 0.2, "accept"), ("design", 0.9, "fix_protocol"),
    ],
)  # fmt: skip
def test_the_critics_criticality_gates_the_depth_not_the_analysts_severity(category, criticality, action):
    """SAGE's routing: the analyst labelled every cause minor; the critic's criticality decides."""
    top = rank(
        [cause(category, "minor")], [Critique(index=0, score=0.9, category=category, criticality=criticality)]
    )
    decision = route(top[0], None, CFG)
    assert decision.action == action and decision.criticality == criticality


def test_gates_rise_within_zero_and_one():
    with pytest.raises(ValueError, match="rising order"):
        AttributionConfig(gates=[0.5, 0.3, 0.8])
    with pytest.raises(ValueError, match="rising order"):
        AttributionConfig(gates=[0.2, 0.5, 1.5])


def test_without_a_critic_the_analysts_labels_route_and_no_critic_is_asked():
    backend = Scripted({"causes": CAUSES, "critic": CRITIC, "judge": JUDGE})
    cfg = CFG.model_copy(update={"critic": False})
    decision = attribute(Analyst(backend, AnalysisConfig()), "report", cfg, seed=1)
    assert backend.purposes == ["causes", "judge"] and not decision.errors
    assert decision.criticality is None and decision.routed == "pivot"  # method / fatal, the table's route


def test_a_single_cause_is_enough_with_k_1():
    backend = Scripted(
        {
            "causes": {"causes": CAUSES["causes"][:1]},
            "critic": {"scores": CRITIC["scores"][:1]},
            "judge": JUDGE,
        }
    )
    cfg = CFG.model_copy(update={"k": 1})
    decision = attribute(Analyst(backend, AnalysisConfig()), "report", cfg, seed=1)
    assert len(decision.causes) == 1 and decision.cause.cause == "a typo in the loss"


def test_attribute_without_causes_is_none():
    decision, backend = run(causes={"causes": CAUSES["causes"][:2]})
    assert decision is None and backend.purposes == ["causes"]


def test_no_gain_in_either_window_is_full_decay_as_sage_defaults_it():
    assert trajectory([1.0] * 8, CFG).marginal_decay == 1.0  # D = 1 without a positive gain
    assert trajectory([0, 0, 0, 0, 0.2, 0.4, 0.6], CFG).marginal_decay == 0.0  # no gain, then gains again


def test_a_stall_is_attributed_beside_a_failed_node():
    from arts.search.investigation.failures import todo
    from arts.search.state import Node, SearchState

    nodes = {1: Node(id=1, status="seed", score=0.5)}
    for i in range(2, 10):
        nodes[i] = Node(id=i, parent=1, status="valid", score=0.5)
    nodes[10] = Node(id=10, parent=1, status="invalid", reason="exit status 1")
    work = todo(SearchState(nodes=nodes), [nodes[10]], CFG)
    assert work.stall is not None and work.plateau and [n.id for n in work.nodes] == [work.stall.id, 10]


def test_the_harness_signals_what_it_measured_about_a_failure(tmp_path):
    """Facts the causes and the critic weigh (no model): an exception, the curve's last move, the size of a
    regression, a program that computes what its parent does, whether the measurement is exact; and the
    category and depth the decisive one points to."""
    from arts.search.investigation.signals import failure_report, measure
    from arts.search.state import Node, SearchState

    seed = {
        "solution.py": "def f(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total\n"
    }
    renamed = {"solution.py": seed["solution.py"].replace("total", "acc") + "# sums\n"}
    nodes = {
        1: Node(id=1, status="seed", score=-0.3707, raw_score=0.3707, files=seed),
        2: Node(
            id=2, parent=1, status="invalid", reason="exit status 1:\nNameError: name 'STEP' is not defined"
        ),
        3: Node(id=3, parent=1, status="valid", score=-0.37073, raw_score=0.37073, files=seed),
        4: Node(id=4, parent=1, status="valid", score=-0.576, raw_score=0.576, files=seed),
        5: Node(id=5, parent=1, status="valid", score=-0.45, raw_score=0.45, files=renamed),
    }
    state = SearchState(nodes=nodes)
    (tmp_path / "4").mkdir()
    (tmp_path / "4" / "curves.jsonl").write_text(
        "".join(f'{{"step": {i}, "train_loss": {9 - i}}}\n' for i in range(5))
    )
    crashed = measure(state, nodes[2], tmp_path / "2")
    assert crashed.lines()[0] == "the program failed: NameError: name 'STEP' is not defined"
    assert crashed.evidence() == ("implementation", "")
    tiny = measure(state, nodes[3], tmp_path / "3", deterministic=True)
    assert tiny.lines()[0].startswith("a negligible regression (0.01%") and tiny.evidence() == (
        None,
        "accept",
    )
    slow = measure(state, nodes[4], tmp_path / "4")
    assert slow.lines()[:2] == [
        "its training curve was still falling at the end (under-trained?)",
        "55% worse than its parent",
    ]
    assert slow.evidence() == ("method", "local")
    (tmp_path / "1").mkdir()  # a parent whose curve also still fell: the fall is no news
    (tmp_path / "1" / "curves.jsonl").write_text((tmp_path / "4" / "curves.jsonl").read_text())
    assert measure(state, nodes[4], tmp_path / "4").evidence() == (None, "")
    short = Node(id=6, parent=1, status="invalid", reason="smooth() returned 396 values for 400 samples")
    assert measure(state, short, tmp_path / "6").evidence() == ("implementation", "")  # a broken contract
    noisy = measure(state, nodes[5], tmp_path / "5")
    assert noisy.same_program and noisy.evidence() == ("design", "")
    assert measure(state, nodes[5], tmp_path / "5", deterministic=True).evidence() == (None, "")
    renamed_tiny = nodes[5].model_copy(update={"score": -0.37075, "raw_score": 0.37075})
    assert measure(state, renamed_tiny, tmp_path / "5").evidence() == (
        "design",
        "",
    )  # the noise, not a result
    assert failure_report(state, nodes[4], tmp_path / "4", slow).endswith(
        "a score may move when measured again"
    )


def test_a_decisive_signal_outweighs_the_critic_and_sets_the_depth():
    """The critic backs the method cause, the harness saw an exception: the code is repaired. A regression
    too small to act on is accepted whatever the cause; a curve still falling refines the method locally.
    Without a critic (the ablation) the analyst's labels route as before."""
    decision, _ = run()  # the scripted critic backs the method cause (index 2)
    assert decision.action == "refine_structural"
    backend = Scripted({"causes": CAUSES, "critic": CRITIC, "judge": JUDGE})
    repaired = attribute(
        Analyst(backend, AnalysisConfig()), "report", CFG, seed=1, evidence=("implementation", "")
    )
    assert repaired.action == "repair" and repaired.index == 0 and repaired.score == 1.25
    accepted = attribute(Analyst(backend, AnalysisConfig()), "report", CFG, seed=1, evidence=(None, "accept"))
    assert accepted.action == "accept"
    local = attribute(Analyst(backend, AnalysisConfig()), "report", CFG, seed=1, evidence=("method", "local"))
    assert local.action == "refine_local" and local.index == 2
    inert = attribute(Analyst(backend, AnalysisConfig()), "report", CFG, seed=1, evidence=("method", "pivot"))
    assert inert.action == "pivot" and not inert.clamped  # the judge's "valid" does not keep an inert knob
    plain = CFG.model_copy(update={"critic": False})
    table = attribute(
        Analyst(backend, AnalysisConfig()), "report", plain, seed=1, evidence=("implementation", "")
    )
    assert table.routed == "pivot"  # method / fatal, the analyst's own labels


def test_the_critic_cannot_relabel_the_cause_the_evidence_backs():
    """The embedded critic relabelled the method cause of a fit that blew up as a code bug: the evidence's
    cause keeps its category and its support, so the step is refined locally."""
    relabel = {"scores": [{**CRITIC["scores"][0], "score": 1.0}, CRITIC["scores"][1],
                          {**CRITIC["scores"][2], "score": 0.5, "category": "implementation"}]}  # fmt: skip
    backend = Scripted({"causes": CAUSES, "critic": relabel, "judge": JUDGE})
    decision = attribute(
        Analyst(backend, AnalysisConfig()), "report", CFG, seed=1, evidence=("method", "local")
    )
    assert decision.index == 2 and decision.cause.category == "method" and decision.action == "refine_local"


def test_the_diff_tells_a_step_along_knobs_from_a_change_of_code(tmp_path):
    """A numbers-only edit that hurt or blew up is refined on the same knobs; one that switched a term on
    from zero is the idea itself (left to the critic); an edit that changed the code and blew up without
    moving any number is suspected in the code first. On an exact evaluator a numbers-only edit that ran
    blames the method, and one that changed nothing is pivoted from (an inert knob)."""
    from arts.search.investigation.signals import measure
    from arts.search.state import Node, SearchState

    seed = "LR = 0.05\nREG = 0.0\n\n\ndef fit(b, g):\n    b -= LR * g  # descend\n    return b - REG * b\n"
    programs = {
        2: seed.replace("LR = 0.05", "LR = 0.01").replace("# descend", "# slower"),  # a step, hurt
        3: seed.replace("REG = 0.0", "REG = 0.5"),  # a new term switched on
        4: seed.replace("b -= LR", "b += LR"),  # code, blew up
        5: seed.replace("LR = 0.05", "LR = 0.5"),  # a step, blew up
        6: seed.replace("LR = 0.05", "LR = 0.1").replace("b -= LR", "b += LR"),  # a step and code, blew up
        7: seed.replace("LR = 0.05", "LR = 0.04"),  # a small step, hurt: its direction is the question
    }
    nodes = {1: Node(id=1, status="seed", score=-0.37, raw_score=0.37, files={"solution.py": seed})}
    for i, text in programs.items():
        blew = i in (4, 5, 6)
        nodes[i] = Node(id=i, parent=1, status="invalid" if blew else "valid", score=None if blew else -0.5,
                        raw_score=None if blew else 0.5, reason="the result is not finite (nan)" if blew else "",
                        files={"solution.py": text})  # fmt: skip
    state = SearchState(nodes=nodes)
    sig = {i: measure(state, nodes[i], tmp_path / str(i)) for i in programs}
    assert sig[2].edit == "numbers" and sig[2].steps == (("LR", 0.05, 0.01),)
    assert "the edit changed only numbers: LR 0.05 -> 0.01" in sig[2].lines()
    assert sig[2].evidence() == ("method", "local")
    assert sig[3].steps == (("REG", 0.0, 0.5),) and sig[3].evidence() == (None, "")
    assert sig[4].edit == "code" and sig[4].evidence() == ("implementation", "")
    assert sig[5].evidence() == ("method", "local")
    assert sig[6].edit == "code" and sig[6].evidence() == ("implementation", "")
    assert sig[7].steps == (("LR", 0.05, 0.04),) and sig[7].evidence() == (None, "")
    exact = {i: measure(state, nodes[i], tmp_path / str(i), deterministic=True) for i in (3, 7)}
    assert exact[3].evidence() == exact[7].evidence() == ("method", "")  # the step: never code or protocol
    inert = nodes[7].model_copy(update={"score": -0.37, "raw_score": 0.37})
    assert measure(state, inert, tmp_path / "7", deterministic=True).evidence() == ("method", "pivot")
    assert measure(state, inert, tmp_path / "7").evidence() == (None, "")  # measured again, it might move
    climbing = "".join(f'{{"step": {i}, "train_loss": {2 + i * i}}}\n' for i in range(5))  # 2 -> 18: < 10x
    valid = {i: nodes[i].model_copy(update={"status": "valid", "score": -18.0, "raw_score": 18.0, "reason": ""})
             for i in (4, 5)}  # fmt: skip
    for i in valid:
        (tmp_path / str(i)).mkdir()
        (tmp_path / str(i) / "curves.jsonl").write_text(climbing)
    code, step = (measure(state, valid[i], tmp_path / str(i)) for i in (4, 5))
    assert code.curve == "climbed" and "rose above where it started" in " ".join(code.lines())
    assert code.evidence() == ("implementation", "") and step.evidence() == ("method", "local")
    knob = "MOMENTUM = 0.9\n" + seed.replace("b -= LR * g", "b -= LR * g * MOMENTUM")  # code and a new knob
    new = {i: Node(id=i, parent=1, files={"solution.py": knob}, **fields) for i, fields in (
        (8, {"status": "valid", "score": -0.5, "raw_score": 0.5}),
        (9, {"status": "invalid", "reason": "the result is not finite (nan)"}))}  # fmt: skip
    hurt, blew = (measure(SearchState(nodes={**nodes, **new}), new[i], tmp_path / str(i)) for i in new)
    assert hurt.edit == "code" and hurt.introduced == (("MOMENTUM", 0.9),)
    assert hurt.evidence() == blew.evidence() == ("method", "local")  # its line search decides


def test_a_decisive_signal_routes_when_no_usable_cause_came_back():
    """The analyst's cause list came back cut off: a decisive signal still routes (its own cause, the one
    the report's signals name first); without one nothing is decided."""
    report = "report\nsignals:\n- a negligible regression (0.02% of the parent's score)\n- the evaluator ..."
    backend = Scripted({"causes": {"causes": []}, "critic": CRITIC, "judge": JUDGE})
    analyst = Analyst(backend, AnalysisConfig())
    accepted = attribute(analyst, report, CFG, seed=1, evidence=(None, "accept"))
    assert accepted.action == "accept" and accepted.cause.evidence.startswith("a negligible regression")
    assert "causes" in accepted.errors and accepted.causes == [accepted.cause]
    assert attribute(analyst, report, CFG, seed=1, evidence=("implementation", "")).action == "repair"
    assert attribute(analyst, report, CFG, seed=1, evidence=("method", "local")).action == "refine_local"
    assert attribute(analyst, report, CFG, seed=1, evidence=("method", "pivot")).action == "pivot"
    assert attribute(analyst, report, CFG, seed=1, evidence=(None, "")) is None
    plain = CFG.model_copy(update={"critic": False})  # the no-critic ablation routes on the model alone
    assert attribute(analyst, report, plain, seed=1, evidence=("implementation", "")) is None
