"""Decisions that act: each route of a failure attribution changes what the next round does (a repair re-runs
the hypothesis with the fix as instructions, a refinement runs its child, a protocol fix remeasures, a pivot
gives up a direction, the opposite step stays open, accept schedules nothing), a stall's decision reaches the
hypotheses of the plateau, and the ablation switches change the run as named. Harness tests: the scripted
RuleBackend answers every model call."""

from __future__ import annotations

import json

import pytest

from arts.policy.candidates import Candidate
from arts.search.investigation import hypotheses
from arts.search.investigation.probes import constants
from arts.search.state import Hypothesis, SearchState
from arts.search.store import Store
from tests import doubles
from tests.doubles import RuleBackend, dual_cfg, make_task
from tests.doubles import search_with_rules as run_with_rules  # each route through `arts search`


def _cfg(tmp_path, **kw):
    """dual_cfg without probes (they spend evaluations the scenarios here count on), unless set."""
    return dual_cfg(tmp_path, **{"space": {"probe_share": 0.0}, **kw})


def _state(run_dir):
    with Store.open(run_dir, create=False) as store:
        return store.load_state()


def _events(state, kind):
    return [e.payload for e in state.events.values() if e.kind == kind]


def recorded(rules) -> list[tuple[str, str]]:
    """(purpose, prompt text) of every call the scripted backend answers from now on."""
    calls, real = [], rules.generate

    def generate(prompts, n=1, sampling=None, schema=None, adapter=None, purpose=""):
        calls.append((purpose, json.dumps(prompts)))
        return real(prompts, n, sampling, schema, adapter, purpose)

    rules.generate = generate
    return calls


def test_a_repair_reruns_the_hypothesis_with_the_fix_as_the_executors_instructions(tmp_path, rules):
    rules.bad_edits, rules.cause = 2, ("implementation", "major")
    calls = recorded(rules)
    summary = run_with_rules(_cfg(tmp_path, budget={"evals": 8}), tmp_path / "run")
    state = _state(tmp_path / "run")
    (scheduled, *_) = [e for e in _events(state, "follow_up_scheduled") if e["decision"] == "repair"]
    assert scheduled["step"] == "repair"
    acted = summary["acted"]
    assert acted["decisions"] >= 1 and acted["scheduled"]["repair"] >= acted["followed_up"]["repair"] >= 1
    failed = state.nodes[scheduled["node"]]
    (done,) = [e for e in _events(state, "follow_up") if e["node"] == failed.id]
    node = state.nodes[done["result"]]
    assert node.follows == failed.id and node.parent == failed.parent and node.hypothesis == failed.hypothesis
    assert node.round == failed.round + 1 and "use a finite X" in node.instructions
    assert any(p == "executor" and "use a finite X" in text for p, text in calls)  # the executor was told
    h = next(h for h in state.hypotheses.values() if failed.id in h.nodes)
    assert node.id in h.nodes  # the repair is evidence on the same hypothesis


def test_a_refinement_runs_its_child_hypothesis_with_lineage_next_round(tmp_path, rules):
    rules.bad_edits, rules.cause = 2, ("method", "major")  # criticality 0.6: a structural refinement
    run_with_rules(_cfg(tmp_path, budget={"evals": 8}), tmp_path / "run")
    state = _state(tmp_path / "run")
    (scheduled, *_) = [e for e in _events(state, "follow_up_scheduled") if e["step"] == "refine"]
    assert scheduled["decision"] == "refine_structural"
    child = state.hypotheses[scheduled["hypothesis"]]
    parent = state.hypotheses[child.parent]
    assert scheduled["node"] in parent.nodes and parent.status == "set_aside"
    (done,) = [e for e in _events(state, "follow_up") if e["hypothesis"] == child.id]
    node = state.nodes[done["result"]]
    assert node.hypothesis == child.text and node.follows == scheduled["node"] and node.id in child.nodes
    assert child.status != "pending"  # drawn into the working set, no longer a note


def test_a_protocol_fix_on_a_scored_node_remeasures_it(tmp_path, rules):
    rules.cause = ("design", "major")
    # every valid node is attributed (a stall at once), so a scored node's measurement is the one doubted
    cfg = _cfg(tmp_path, budget={"evals": 8}, attribution={"window": 2, "min_slope": 1.0})
    run_with_rules(cfg, tmp_path / "run")
    state = _state(tmp_path / "run")
    remeasured = _events(state, "remeasure")
    assert remeasured and all(r["stable"] and r["first"] == r["second"] for r in remeasured)  # deterministic
    assert all(state.nodes[r["node"]].status == "valid" for r in remeasured)  # a stable measurement stands


def test_after_a_reproduced_measurement_a_doubted_one_is_implemented_again_not_repeated(tmp_path, rules):
    rules.cause = ("design", "major")
    cfg = _cfg(tmp_path, budget={"evals": 14}, attribution={"window": 2, "min_slope": 1.0})
    run_with_rules(cfg, tmp_path / "run")
    state = _state(tmp_path / "run")
    (remeasured,) = _events(state, "remeasure")  # the first doubt is checked, and the score comes again
    assert remeasured["first"] == remeasured["second"]
    later = [e for e in _events(state, "follow_up") if e["ran"] > remeasured["round"]]
    assert later and all(e["step"] != "remeasure" for e in later)  # no evaluation spent on the same score
    routed = [e["decision"] for e in _events(state, "routing") if e["round"] > remeasured["round"]]
    assert routed and all(d["cause"]["category"] == "method" for d in routed)  # a stall, measured exactly
    for e in later:
        doubted, node = state.nodes[e["node"]], state.nodes[e["result"]]
        assert node.follows == doubted.id and node.files != doubted.files


def test_an_unstable_measurement_keeps_the_worse_score(tmp_path, rules):
    task = make_task(tmp_path / "noisy")
    noisy = "import random\n" + (task / "evaluate.py").read_text().replace(
        "-(", "-random.uniform(1, 2) * ("
    )  # each evaluation scales the error by a fresh factor
    (task / "evaluate.py").write_text(noisy)
    rules.cause = ("design", "major")
    cfg = _cfg(tmp_path, budget={"evals": 8}, attribution={"window": 2, "min_slope": 1.0})
    cfg = cfg.model_copy(update={"task": str(task)})
    run_with_rules(cfg, tmp_path / "run")
    state = _state(tmp_path / "run")
    unstable = [r for r in _events(state, "remeasure") if not r["stable"]]
    assert unstable, _events(state, "remeasure")
    r = unstable[0]
    node = state.nodes[r["node"]]
    assert node.raw_score == pytest.approx(min(r["first"], r["second"])) and "unstable" in node.reason


def test_accept_schedules_nothing_and_keeps_the_result(tmp_path, rules, monkeypatch):
    monkeypatch.setitem(doubles.CRITICALITY, "major", 0.1)  # below the first gate: accept
    rules.bad_edits, rules.cause = 2, ("implementation", "major")
    summary = run_with_rules(_cfg(tmp_path, budget={"evals": 8}), tmp_path / "run")
    state = _state(tmp_path / "run")
    assert summary["routing"].get("accept", 0) >= 1
    assert not [e for e in _events(state, "follow_up_scheduled") if e["decision"] != "prediction"]
    assert any(e["status"] == "accepted" for e in _events(state, "hypothesis_status"))


def test_a_pivot_gives_up_a_direction_and_the_opposite_step_stays_open():
    """A pivot on `increase LR` shuts out that direction, not the knob: `decrease LR` may be drawn and the
    menus still offer it; a free archived hypothesis gives up its axis and what reads like it."""
    state = SearchState(
        hypotheses={
            1: Hypothesis(id=1, text="increase LR to 0.01", axis="lr", archived=True, status="set_aside"),
            2: Hypothesis(
                id=2, text="use a cosine schedule", axis="schedule", archived=True, status="set_aside"
            ),
        }
    )
    assert hypotheses.abandoned(state) == {"increase LR", "schedule"}
    cands = [
        Candidate(parent=1, hypothesis="increase LR by 10%", axis="lr", probability=0.4),
        Candidate(parent=1, hypothesis="decrease LR to 0.001", axis="lr", probability=0.3),
        Candidate(parent=1, hypothesis="increase BATCH to 128", axis="batch", probability=0.2),
        Candidate(parent=1, hypothesis="warm restarts", axis="Schedule", probability=0.1),
        Candidate(parent=1, hypothesis="use a cosine schedule instead", axis="decay", probability=0.1),
    ]
    assert hypotheses.admissible(state, cands, round=3, threshold=0.5) == [False, True, True, False, False]
    menus = {"LR": ("increase", "decrease"), "WD": ("increase", "decrease")}
    assert hypotheses.open_moves(menus, {"increase LR"}) == {
        "LR": ("decrease",),
        "WD": ("increase", "decrease"),
    }
    assert hypotheses.open_moves({"LR": ("increase",)}, {"increase LR"}) == {}  # nothing left on it


def test_a_stall_on_an_inert_knob_of_an_exact_evaluator_is_pivoted_from(tmp_path):
    """A plateau of knob steps that changed no score, measured exactly: nothing to refine; the direction
    is given up."""
    from arts.policy.analysis import AnalysisConfig, Analyst
    from arts.search.investigation.attribution import AttributionConfig
    from arts.search.investigation.failures import attribute_round
    from arts.search.ledger import Ledger
    from arts.search.state import Node

    with Store.open(tmp_path / "run", create=True) as store:
        ledger = Ledger(store)
        seed = {"solution.py": "X = 1.0\nN = 10\n"}
        root = ledger.add(Node(parent=None, status="seed", score=-4.0, raw_score=-4.0, files=seed))
        nodes = [
            ledger.add(Node(parent=root.id, round=r, status="valid", score=-4.0, raw_score=-4.0,
                            hypothesis=f"increase N {r}", files={"solution.py": f"X = 1.0\nN = {n}\n"}))
            for r, n in [(1, 20), (2, 40), (2, 80)]
        ]  # fmt: skip
        cfg = AttributionConfig(window=3)
        analyst = Analyst(RuleBackend(), AnalysisConfig())
        exact = attribute_round(ledger, analyst, nodes[1:], cfg, round=2, seed=0, deterministic=True)
        assert exact and all(d.action == "pivot" for d in exact.values())
        inexact = attribute_round(ledger, analyst, nodes[1:], cfg, round=2, seed=0)
        assert inexact and not all(d.action == "pivot" for d in inexact.values())  # left to the critic


def test_a_stall_is_attributed_with_its_trajectory_and_decided_for_the_whole_plateau(tmp_path):
    from arts.policy.analysis import AnalysisConfig, Analyst
    from arts.search.investigation.attribution import AttributionConfig
    from arts.search.investigation.failures import attribute_round
    from arts.search.ledger import Ledger
    from arts.search.state import Node

    rules = RuleBackend()
    calls = recorded(rules)
    with Store.open(tmp_path / "run", create=True) as store:
        ledger = Ledger(store)
        root = ledger.add(Node(parent=None, status="seed", score=-1.0, raw_score=-1.0))
        nodes = [
            ledger.add(
                Node(parent=root.id, round=r, status="valid", score=-1.0, raw_score=-1.0, hypothesis=t)
            )
            for r, t in [(1, "increase X"), (2, "decrease X"), (2, "decrease X again")]
        ]  # three experiments, none better than the seed: a flat curve, nothing failed or regressed
        h1 = ledger.add(Hypothesis(text="increase X", axis="x", nodes=[nodes[0].id], status="working"))
        h2 = ledger.add(
            Hypothesis(text="decrease X", axis="x", nodes=[n.id for n in nodes[1:]], status="working")
        )
        cfg = AttributionConfig(window=3)
        decisions = attribute_round(ledger, Analyst(rules, AnalysisConfig()), nodes[1:], cfg, round=2, seed=0)
        assert set(decisions) == {n.id for n in nodes}  # the plateau, not only this round's nodes
        (routing,) = [e.payload for e in ledger.state.events.values() if e.kind == "routing"]
        assert routing["plateau"] == [n.id for n in nodes] and routing["node"] == nodes[0].id
        causes = next(text for p, text in calls if p == "causes")
        assert "has stalled over the last 3 experiments" in causes and "slope 0.000" in causes
        tested = hypotheses.tested(ledger.state, list(decisions))
        hypotheses.Exploit(ledger, 2, cooldown=2, observations=True, memory=True)(tested, set(), decisions)
        state = ledger.state
    assert state.hypotheses[h1.id].status == state.hypotheses[h2.id].status == "set_aside"
    refined = {
        e.payload["refines"]
        for e in state.events.values()
        if e.kind == "hypothesis" and "refines" in e.payload
    }
    assert refined == {h1.id, h2.id}  # both hypotheses of the plateau were refined


def test_a_stall_leaves_the_plateaus_progress_alone(tmp_path):
    """Gains that shrink read as a stall by the slope while the last step sets a new best: the stall's
    decision reaches the plateau's other experiments, not the one that paid nor its hypothesis."""
    from arts.policy.analysis import AnalysisConfig, Analyst
    from arts.search.investigation.attribution import AttributionConfig
    from arts.search.investigation.failures import attribute_round
    from arts.search.ledger import Ledger
    from arts.search.state import Node

    with Store.open(tmp_path / "run", create=True) as store:
        ledger = Ledger(store)
        root = ledger.add(Node(parent=None, status="seed", score=-10.0, raw_score=-10.0))
        first = ledger.add(Node(parent=root.id, round=1, status="valid", score=-5.0, raw_score=-5.0,
                                hypothesis="increase N"))  # fmt: skip
        second = ledger.add(Node(parent=first.id, round=2, status="valid", score=-2.0, raw_score=-2.0,
                                 hypothesis="increase N"))  # fmt: skip
        flat = [
            ledger.add(Node(parent=second.id, round=3, status="valid", score=-2.0, raw_score=-2.0,
                            hypothesis=f"increase M {i}"))
            for i in range(2)
        ]  # fmt: skip
        last = ledger.add(Node(parent=second.id, round=3, status="valid", score=-1.99, raw_score=-1.99,
                               hypothesis="increase N"))  # fmt: skip
        paying = ledger.add(Hypothesis(text="increase N", axis="n", status="working",
                                       nodes=[first.id, second.id, last.id]))  # fmt: skip
        other = ledger.add(Hypothesis(text="increase M", axis="m", status="working",
                                      nodes=[n.id for n in flat]))  # fmt: skip
        cfg = AttributionConfig(window=3)
        decisions = attribute_round(
            ledger, Analyst(RuleBackend(), AnalysisConfig()), [*flat, last], cfg, round=3, seed=0
        )
        (routing,) = [e.payload for e in ledger.state.events.values() if e.kind == "routing"]
        assert routing["plateau"] == [*(n.id for n in flat), last.id] and routing["spared"] == [last.id]
        assert set(decisions) == {n.id for n in flat}  # the stall is routed, for the flat experiments
        tested = hypotheses.tested(ledger.state, [*decisions, last.id])
        hypotheses.Exploit(ledger, 3, cooldown=2, observations=True, memory=True)(tested, set(), decisions)
        state = ledger.state
    assert state.hypotheses[other.id].status == "set_aside"
    assert state.hypotheses[paying.id].status in ("working", "retained")
    assert not state.hypotheses[paying.id].archived


@pytest.mark.parametrize(
    ("attribution", "asked", "not_asked"),
    [
        ({"critic": False}, {"causes", "judge"}, {"critic", "reflect"}),
        ({"k": 1}, {"causes", "critic", "judge"}, {"reflect"}),
        ({"mode": "reflection"}, {"reflect"}, {"causes", "critic", "judge"}),
    ],
)
def test_the_ablation_switches_change_the_calls(tmp_path, rules, attribution, asked, not_asked):
    rules.bad_edits, rules.cause = 2, ("implementation", "major")
    calls = recorded(rules)
    run_with_rules(_cfg(tmp_path, budget={"evals": 6}, attribution=attribution), tmp_path / "run")
    purposes = {p for p, _ in calls}
    assert asked <= purposes and not (not_asked & purposes)
    state = _state(tmp_path / "run")
    if attribution.get("k") == 1:
        (routing, *_) = [r for r in _events(state, "routing") if r["ok"]]
        assert len(routing["decision"]["causes"]) == 1
    if attribution.get("mode") == "reflection":
        (text,) = [i.text for i in state.insights.values() if i.text.startswith("reflection on node")][:1]
        later = [t for p, t in calls[[p for p, _ in calls].index("reflect") :] if p == "propose"]
        assert later and any(text[:40] in t for t in later)  # the next proposals read the reflection


def test_without_follow_ups_decisions_stay_notes(tmp_path, rules):
    rules.bad_edits, rules.cause = 2, ("implementation", "major")
    run_with_rules(_cfg(tmp_path, budget={"evals": 6}, attribution={"follow_ups": 0}), tmp_path / "run")
    state = _state(tmp_path / "run")
    assert _events(state, "routing") and not _events(state, "follow_up_scheduled")
    assert not [n for n in state.nodes.values() if n.follows is not None or n.axis == "probe"]


def test_a_flawed_experiment_is_retested_next_round(tmp_path, rules, monkeypatch):
    def flag_first(b, schema):
        answer = doubles.compare_answer(b, schema)
        return answer | {
            "flawed": answer["verdicts"][0]["hypothesis"] and [answer["verdicts"][0]["hypothesis"]]
        }

    monkeypatch.setitem(doubles.ANALYSIS, "compare", flag_first)
    run_with_rules(_cfg(tmp_path, budget={"evals": 8}), tmp_path / "run")
    state = _state(tmp_path / "run")
    retests = [e for e in _events(state, "follow_up_scheduled") if e["decision"] == "retest"]
    assert retests
    done = {e["node"]: e for e in _events(state, "follow_up") if e["decision"] == "retest"}
    assert retests[0]["node"] in done  # the next round checked it
    if retests[0]["step"] == "remeasure":
        assert any(r["node"] == retests[0]["node"] for r in _events(state, "remeasure"))


def test_a_step_that_ran_on_an_exact_evaluator_is_not_retested(tmp_path, rules, monkeypatch):
    """The comparison calls every experiment flawed, on a task that declares its evaluator deterministic:
    the knob steps that ran are not carried out again (the same step, the same score)."""

    def flag_all(b, schema):
        answer = doubles.compare_answer(b, schema)
        return answer | {"flawed": [v["hypothesis"] for v in answer["verdicts"]]}

    monkeypatch.setitem(doubles.ANALYSIS, "compare", flag_all)
    cfg = _cfg(tmp_path, budget={"evals": 8})
    toml = tmp_path / "task" / "task.toml"
    toml.write_text(
        toml.read_text().replace('direction = "maximize"\n', 'direction = "maximize"\ndeterministic = true\n')
    )
    (tmp_path / "task" / "solution.py").write_text(
        "X = 1.0\n\n\ndef value():\n    return float(X)\n"
    )  # X alone
    run_with_rules(cfg, tmp_path / "run")
    state = _state(tmp_path / "run")
    assert _events(state, "comparison") and not [
        e for e in _events(state, "follow_up_scheduled") if e["decision"] == "retest"
    ]


def test_a_routed_decision_is_not_overridden_by_a_flawed_verdict(tmp_path, rules, monkeypatch):
    """The comparison calls every experiment flawed; where the attribution routed a failure, its route
    still decides what runs next (a retest only follows experiments no route acted on)."""

    def flag_all(b, schema):
        answer = doubles.compare_answer(b, schema)
        return answer | {"flawed": [v["hypothesis"] for v in answer["verdicts"]]}

    rules.bad_edits, rules.cause = 2, ("implementation", "major")
    monkeypatch.setitem(doubles.ANALYSIS, "compare", flag_all)
    run_with_rules(_cfg(tmp_path, budget={"evals": 8}), tmp_path / "run")
    state = _state(tmp_path / "run")
    routed = {
        (e["node"], e["round"]): e["decision"]["action"]
        for e in _events(state, "routing")
        if e.get("decision") and e["decision"]["action"] not in ("accept", "pivot")
    }
    scheduled = [e for e in _events(state, "follow_up_scheduled") if (e["node"], e["round"]) in routed]
    assert scheduled and all(e["decision"] == routed[e["node"], e["round"]] for e in scheduled)


def test_a_prediction_that_names_a_constant_becomes_a_probe(tmp_path, rules):
    """The scripted comparison predicts 'X above 3 scores lower': X is probed on the best node, halved and
    doubled, and the observation relates to every working hypothesis (X's movers by their direction)."""
    cfg = _cfg(tmp_path, budget={"evals": 10}, space={"probe_share": 1.0})
    summary = run_with_rules(cfg, tmp_path / "run")
    state = _state(tmp_path / "run")
    (scheduled, *_) = [e for e in _events(state, "follow_up_scheduled") if e["step"] == "probe"]
    assert scheduled["text"] == "X" and scheduled["decision"] == "prediction"
    (probe, *_) = probes = _events(state, "probe")
    variants = [n for n in state.nodes.values() if n.axis == "probe"]
    assert variants and {n.parent for n in variants} <= {p["node"] for p in probes}  # the best node then
    o = state.observations[probe["observation"]]
    assert o.source == "probe" and o.region == "sensitivity of X" and o.text.startswith("X ")
    relations = {e.hypothesis: e.relation for e in state.evidence.values() if e.observation == o.id}
    assert relations and set(relations.values()) <= {"support", "oppose", "neutral", "unassessed"}
    movers = [
        h
        for h in state.hypotheses.values()
        if h.id in relations and h.text.startswith(("increase X", "decrease X"))
    ]
    assert all(relations[h.id] != "unassessed" for h in movers)
    assert summary["observations"]["count"] == len(state.observations)


def test_probe_relations_follow_the_direction_a_hypothesis_moves():
    from arts.search.investigation.probes import relation_to

    outcome = {"low": "fell", "high": "rose"}
    assert relation_to("increase X to 4", "X", outcome) == "support"
    assert relation_to("decrease X to 1", "X", outcome) == "oppose"
    assert relation_to("increase Y to 4", "X", outcome) == "unassessed"
    assert relation_to("increase X to 4", "X", {"high": "held"}) == "neutral"


def test_the_scientist_may_propose_a_probe_and_a_drawn_one_is_measured_not_registered(tmp_path, rules):
    calls = recorded(rules)
    cfg = _cfg(tmp_path, budget={"evals": 12}, space={"probe_share": 1.0}, components={"comparison": False})
    run_with_rules(cfg, tmp_path / "run")
    state = _state(tmp_path / "run")
    assert any(p == "propose" and "probe X" in t for p, t in calls)  # offered in the prompt and grammar
    drawn = [
        r
        for r in state.rollouts.values()
        if r.node is not None and json.loads(r.action)["hypothesis"].startswith("probe X")
    ]
    assert drawn, [json.loads(r.action)["hypothesis"] for r in state.rollouts.values()]
    assert all(state.nodes[r.node].axis == "probe" for r in drawn)
    assert not [h for h in state.hypotheses.values() if h.text.startswith("probe")]
    scheduled = [e for e in _events(state, "follow_up_scheduled") if e["step"] == "probe"]
    assert _events(state, "probe") and not scheduled  # sought by the scientist, not by a prediction
    made = [(e["name"], e["node"]) for e in _events(state, "probe")]  # none made twice on one program
    assert len(made) == len(set(made)), made


def test_a_task_that_declares_its_evaluator_deterministic_is_never_remeasured(tmp_path, rules):
    """`metric.deterministic = true`: no doubted measurement is repeated (the same score would tell
    nothing); a stall, whose programs ran and were measured exactly, is the method's, whatever the analyst
    blamed (`as_run` turns a remeasurement scheduled on such a run into a repair: tested below)."""
    rules.cause = ("design", "major")
    cfg = _cfg(tmp_path, budget={"evals": 10}, attribution={"window": 2, "min_slope": 1.0})
    toml = tmp_path / "task" / "task.toml"
    toml.write_text(
        toml.read_text().replace('direction = "maximize"\n', 'direction = "maximize"\ndeterministic = true\n')
    )
    run_with_rules(cfg, tmp_path / "run")
    state = _state(tmp_path / "run")
    assert not _events(state, "remeasure")
    followed = _events(state, "follow_up")
    assert followed and all(e["step"] != "remeasure" for e in followed)
    stalls = [e["decision"] for e in _events(state, "routing") if e["plateau"]]
    assert stalls and all(d["cause"]["category"] == "method" for d in stalls)
    spared = {i for e in _events(state, "routing") if e["plateau"] for i in e["spared"]}
    assert spared  # through `arts search`, a stall's plateau held a new best, which its decision left alone


def test_a_step_that_ran_on_an_exact_evaluator_is_never_repaired(tmp_path, rules):
    """Through a search on a deterministic task whose analyst blames the code every time: the numbers-only
    steps that ran and scored worse, and a stall, are routed as the method's: no repair of code that ran."""
    rules.cause = ("implementation", "major")
    cfg = _cfg(tmp_path, budget={"evals": 8})
    toml = tmp_path / "task" / "task.toml"
    toml.write_text(
        toml.read_text().replace('direction = "maximize"\n', 'direction = "maximize"\ndeterministic = true\n')
    )
    (tmp_path / "task" / "solution.py").write_text("X = 5.0\n\n\ndef value():\n    return float(X)\n")
    run_with_rules(cfg, tmp_path / "run")
    state = _state(tmp_path / "run")
    nodes = state.nodes
    worse = {
        n.id for n in nodes.values() if n.parent and n.status == "valid" and n.score < nodes[n.parent].score
    }
    routed = [e for e in _events(state, "routing") if e["node"] in worse]
    assert routed and all(e["decision"]["cause"]["category"] == "method" for e in routed)
    repairs = [e for e in _events(state, "follow_up_scheduled") if e["step"] == "repair"]
    assert not [e for e in repairs if e["node"] in worse]


@pytest.mark.parametrize(("severity", "route"), [("minor", "refine_local"), ("major", "refine_structural")])
def test_a_local_and_a_structural_refinement_run_different_experiments(tmp_path, rules, severity, route):
    """Local: the same move, smaller; structural: a component of the hypothesis replaced by the fix."""
    rules.bad_edits, rules.cause = 2, ("method", severity)
    run_with_rules(_cfg(tmp_path, budget={"evals": 8}), tmp_path / "run")
    state = _state(tmp_path / "run")
    (scheduled, *_) = [e for e in _events(state, "follow_up_scheduled") if e["step"] == "refine"]
    assert scheduled["decision"] == route
    child = state.hypotheses[scheduled["hypothesis"]]
    parent = state.hypotheses[child.parent]
    (done,) = [e for e in _events(state, "follow_up") if e["hypothesis"] == child.id]
    nodes = state.nodes
    node = nodes[done["result"]]
    if route == "refine_local":  # X moved off every menu (free values): steps back along it, no model call
        assert child.text.startswith(parent.text[:40]) and child.text.endswith("a smaller step")
        assert node.instructions.startswith("Refined locally: the same change with a smaller step")
        failed = nodes[scheduled["node"]]
        x0, x1 = constants(nodes[failed.parent])["X"], constants(failed)["X"]
        stepped = [n for n in nodes.values() if n.follows == failed.id and n.round == done["ran"]]
        assert stepped and all(n.transcript[0]["op"] == "smaller_step" for n in stepped)
        assert all(min(x0, x1) < constants(n)["X"] < max(x0, x1) for n in stepped)
    else:
        assert "; " in child.text and node.instructions.startswith("Refined structurally")


def test_on_an_exact_evaluator_a_flawed_program_is_edited_and_a_doubted_protocol_tried_anew():
    """A remeasurement would repeat an exact score: a retest (the comparison called the program flawed)
    edits that program; a protocol fix implements the hypothesis again from the parent."""
    from arts.search.investigation.followups import FollowUp, as_run
    from arts.search.state import Node

    state = SearchState()
    state.nodes[1] = Node(
        id=1, parent=None, depth=0, round=0, hypothesis="", axis="", files={}, status="seed"
    )
    state.nodes[2] = Node(id=2, parent=1, depth=1, round=1, hypothesis="h", axis="", files={}, status="valid")

    def item(decision):
        return FollowUp(step="remeasure", decision=decision, node=2, parent=2, text="h", round=1)

    retest, protocol = (as_run(item(d), state, None, deterministic=True) for d in ("retest", "fix_protocol"))
    assert (retest.step, retest.parent, retest.start) == ("repair", 1, 2)
    assert (protocol.step, protocol.parent, protocol.start) == ("repair", 1, None)


def test_a_probe_already_made_on_the_best_program_is_not_drawn_again():
    """A probe of X on the best node measured what it can; drawn again it would evaluate nothing (a round
    of such draws is idle, and three idle rounds end a run): it is not admissible, a probe of Y is, and
    once another node is best, X may be probed there."""
    from types import SimpleNamespace

    from arts.search.investigation.probes import KEY
    from arts.search.methods.arts import admissible
    from arts.search.state import Node

    state = SearchState()
    state.nodes = {1: Node(id=1, status="seed", score=1.0, raw_score=1.0),
                   2: Node(id=2, parent=1, status="valid", score=2.0, raw_score=2.0)}  # fmt: skip
    state.meta[KEY] = {"X": {"high": "rose", "node": 2}}
    cands = [Candidate(parent=2, hypothesis=h, axis="x", probability=0.5) for h in ("probe X", "probe Y")]
    cfg = SimpleNamespace(attribution=SimpleNamespace(distinct_threshold=0.5))
    run = SimpleNamespace(state=state, round=3, cfg=cfg)
    proposed = SimpleNamespace(candidates=cands, lists=[SimpleNamespace(candidates=cands)], example=None)
    assert admissible(run, proposed) == [False, True]
    state.nodes[3] = Node(id=3, parent=2, status="valid", score=3.0, raw_score=3.0)
    assert admissible(run, proposed) == [True, True]
