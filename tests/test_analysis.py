"""The analysis calls: schemas, prompt budgets and failure handling (scripted backend: harness only), plus
schema checks on the tiny random model, whose grammar-constrained answers must parse."""

from __future__ import annotations

import pytest

from arts.policy.analysis import (
    CRITIC_SEED_OFFSET,
    SLOTS,
    SUPPORT_GRADES,
    AnalysisConfig,
    Analyst,
    Plan,
    clip,
)
from arts.policy.analysis_answers import Cause, Comparison, Critique, Judgement
from tests.doubles import Scripted

REPORT = (
    "### node 4 (parent 1): raise LEARNING_RATE from 0.01 to 0.5\nresult: INVALID: training loss became nan\n"
    "parent score: 0.912\ndiff:\n-LEARNING_RATE = 0.01\n+LEARNING_RATE = 0.5\n"
    'curves:\n{"step": 0, "train_loss": 2.3}\n{"step": 20, "train_loss": NaN}\n'
    "stderr tail:\nValueError: Input contains NaN"
)
CAUSE = {
    "evidence": "train_loss NaN at step 20",
    "cause": "the step size diverges",
    "category": "method",
    "severity": "major",
    "fix": "lower LEARNING_RATE to 0.05",
}


def analyst(config: AnalysisConfig | None = None, **answers) -> tuple[Analyst, Scripted]:
    backend = Scripted(answers)
    return Analyst(backend, config or AnalysisConfig()), backend


def test_plan_parses_and_a_garbage_answer_is_none():
    plan = {"situation": "digits classifier", "deliverable": "solution.py", "requirements": ["numpy only"]}
    a, backend = analyst(plan=plan)
    assert a.plan("Train a digits classifier.") == Plan(**plan) and Plan(**plan).axes == []
    assert backend.calls[0]["sampling"].max_tokens == AnalysisConfig().plan_tokens
    assert "axes" not in backend.calls[0]["schema"].model_fields  # the small profile's plan: no axes asked
    a, _ = analyst(plan='{"situation": "x"')
    assert a.plan("Train a digits classifier.") is None and a.last.error


def test_a_plan_asked_for_axes_must_name_readable_ones():
    plan = {
        "situation": "digits classifier",
        "deliverable": "solution.py",
        "requirements": ["numpy only"],
        "axes": ["model capacity", "learning rate"],
    }
    a, backend = analyst(AnalysisConfig(plan_axes=True), plan=plan)
    assert a.plan("Train a digits classifier.") == Plan(**plan)
    assert "axes" in backend.calls[0]["schema"].model_json_schema()["required"]  # the grammar asks for them
    assert "name 2 to 4 axes" in backend.calls[0]["messages"][-1]["content"]
    for axes in (["MARGINADUONADUOA"], ["a b c d"], ["x"] * 5):  # not a readable label, or too many
        a, _ = analyst(AnalysisConfig(plan_axes=True), plan=plan | {"axes": axes})
        assert a.plan("Train a digits classifier.") is None, axes


def test_plan_rejects_more_than_four_requirements():
    plan = {"situation": "digits", "deliverable": "solution.py", "requirements": ["numpy"] * 5}
    a, _ = analyst(plan=plan)
    assert a.plan("Train a digits classifier.") is None


SLOTTED = [{**CAUSE, "category": c} for c in SLOTS]


def test_causes_are_exactly_k_one_per_level_and_a_wrong_answer_is_empty():
    """K > 1 causes each blame a level the grammar fixes in turn (the code, the evaluation, the idea): the
    135M default, free, gave three causes one category and one text."""
    a, backend = analyst(causes={"causes": SLOTTED})
    causes = a.causes(REPORT, 3)
    assert causes == [Cause(**c) for c in SLOTTED] and type(causes[0]) is Cause
    assert backend.calls[0]["sampling"].max_tokens >= 3 * AnalysisConfig().cause_tokens
    assert "the first blames the code" in backend.calls[0]["messages"][-1]["content"]
    assert a.causes(REPORT, 4) == []  # three answers to a request for four: unusable
    for wrong in ([CAUSE] * 3, [{**c, "category": "idea"} for c in SLOTTED]):  # one category thrice; none
        a, _ = analyst(causes={"causes": wrong})
        assert a.causes(REPORT, 3) == []
    a, _ = analyst(causes={"causes": [CAUSE]})  # one cause (the k = 1 ablation): its category is free
    assert a.causes(REPORT, 1) == [Cause(**CAUSE)]


def test_critic_is_an_independent_sceptical_call_scoring_each_cause_once():
    scores = [
        {"index": 0, "score": 0.5, "category": "method", "criticality": 0.125},
        {"index": 1, "score": 0.75, "category": "implementation", "criticality": 0.65},
        {"index": 2, "score": 0.25, "category": "method", "criticality": 0.65},
    ]
    a, backend = analyst(critic={"scores": scores})
    out = a.critic(REPORT, [Cause(**CAUSE)] * 3, seed=5)
    assert out == [Critique(**c) for c in scores]
    repeated = [scores[1], scores[1], scores[2]]  # free indices let the 135M critic skip cause 0
    a, _ = analyst(critic={"scores": repeated})
    assert a.critic(REPORT, [Cause(**CAUSE)] * 3) == []  # the grammar fixes index i at place i
    system = backend.calls[0]["messages"][0]["content"]
    assert (
        "sceptical reviewer" in system and "0. [method, major]" in backend.calls[0]["messages"][1]["content"]
    )
    sampling = backend.calls[0]["sampling"]  # its own draw: not the analyst's seed and temperature
    assert sampling.seed == 5 + CRITIC_SEED_OFFSET and sampling.temperature == a.config.critic_temperature


def test_the_critic_cannot_copy_the_nodes_score():
    """The 135M critic copied the failed node's score from the report (0.68899 for three causes): support
    is a grade, so a copied measurement is not an answer the grammar admits."""
    copied = {
        "scores": [
            {"index": i, "score": 0.68899, "category": "method", "criticality": 0.375} for i in range(3)
        ]
    }
    a, _ = analyst(critic=copied)
    assert a.critic(REPORT, [Cause(**CAUSE)] * 3) == [] and a.last.error
    graded = {
        "scores": [
            {"index": i, "score": g, "category": "method", "criticality": 0.375}
            for i, g in enumerate(SUPPORT_GRADES[:3])
        ]
    }
    a, _ = analyst(critic=graded)
    assert [c.score for c in a.critic(REPORT, [Cause(**CAUSE)] * 3)] == list(SUPPORT_GRADES[:3])


def test_critic_rejects_unknown_indices_and_out_of_range_scores():
    bad_index = {
        "scores": [{"index": i, "score": 0.5, "category": "method", "criticality": 0.375} for i in (0, 1, 3)]
    }
    bad_score = {
        "scores": [{"index": i, "score": 1.5, "category": "method", "criticality": 0.375} for i in (0, 1, 2)]
    }
    for answer in (bad_index, bad_score):
        a, _ = analyst(critic=answer)
        assert a.critic(REPORT, [Cause(**CAUSE)] * 3) == [] and a.last.error
    a, backend = analyst()
    assert a.critic(REPORT, []) == [] and a.last is None and not backend.calls


def test_judge():
    answer = {"reason": "ran to the end; weak but real", "valid_measurement": True, "confidence": 0.7}
    a, _ = analyst(judge=answer)
    assert a.judge(REPORT) == Judgement(**answer)
    a, _ = analyst(judge={**answer, "confidence": 2.0})
    assert a.judge(REPORT) is None


def test_compare_restricts_ids_and_keeps_one_verdict_per_hypothesis():
    answer = {
        "flawed": [5, 5],
        "predictions": ["a lower rate converges on both"],
        "verdicts": [
            {"hypothesis": 3, "observation": "loss diverges above rate 0.1", "verdict": "support"},
            {"hypothesis": 3, "observation": "duplicate", "verdict": "oppose"},
        ],
    }
    hyps = [(3, "a lower rate stabilises training", "node 4: nan"), (5, "weight decay helps", "node 6: 0.93")]
    a, backend = analyst(compare=answer)
    out = a.compare(hyps, [(1, "loss is nan at rate 0.5")])
    assert isinstance(out, Comparison) and out.flawed == [5] and len(out.verdicts) == 1
    assert out.verdicts[0].verdict == "support" and out.predictions == answer["predictions"]
    user = backend.calls[0]["messages"][1]["content"]
    assert "Hypothesis 3: a lower rate" in user and "Results: node 6: 0.93" in user
    a, _ = analyst(compare={**answer, "flawed": [7]})  # 7 is no hypothesis compared
    assert a.compare(hyps, []) is None and a.last.error
    a, backend = analyst()
    assert a.compare([], [(1, "x")]) is None and not backend.calls


def test_compare_bounds_its_inputs():
    cfg = AnalysisConfig()
    hyps = [(i, f"hypothesis text {i}", "") for i in range(10)]
    obs = [(i, f"observation number {i}") for i in range(10)]
    answer = {"flawed": [], "predictions": [], "verdicts": []}
    a, backend = analyst(compare=answer)
    assert a.compare(hyps, obs) is None  # too few verdicts for the hypotheses shown
    user = backend.calls[0]["messages"][1]["content"]
    assert user.count("hypothesis text") == cfg.max_hypotheses and "Results: none yet" in user
    assert user.count("observation number") == cfg.max_observations and "observation number 9" in user


def test_clip_keeps_both_ends():
    text = "result: INVALID\n" + "x" * 5000 + "\nValueError: the tail"
    out = clip(text, 400)
    assert len(out) <= 400 and out.startswith("result: INVALID") and out.endswith("ValueError: the tail")
    assert clip("short", 400) == "short"


def test_prompts_fit_the_small_model_budget(tiny_backend):
    """With every input at its largest, each prompt stays under 600 tokens of the SmolLM2 tokenizer."""
    long = "ValueError: Input contains NaN at step 20 of the training loop " * 100
    sentence = "the training loss became NaN after the learning rate was raised from 0.01 to 0.5 at step 20 of 40 in the loop"
    cause = Cause(**{**CAUSE, "evidence": sentence[:120], "cause": sentence[:120], "fix": sentence[:120]})
    a, backend = analyst(
        plan="{}", causes="{}", critic="{}", judge="{}", compare="{}"
    )  # every answer fails: only the prompts matter here
    a.plan(long)
    a.causes(long, 5)
    a.critic(long, [cause] * 5)
    a.judge(long)
    a.compare([(i, long, long) for i in range(8)], [(i, long) for i in range(8)])
    for call in backend.calls:
        tokens = sum(tiny_backend.count_tokens(m["content"]) for m in call["messages"])
        assert tokens < 600, (call["purpose"], tokens)


def test_answers_of_the_tiny_model_parse_under_the_grammar(tiny_backend):
    """A random model writes anything the grammar allows; every call must come back as a typed object."""
    caps = {"plan_tokens": 400, "cause_tokens": 300, "critique_tokens": 60, "judge_tokens": 200}
    caps |= {"compare_tokens": 400, "verdict_tokens": 200}  # a random model writes strings to their cap
    a = Analyst(tiny_backend, AnalysisConfig(temperature=1.0, **caps))
    plan = a.plan("Pack 26 circles in a unit square to maximise the sum of radii.", seed=0)
    assert isinstance(plan, Plan), a.last.error
    causes = a.causes(REPORT, 3, seed=0)
    assert len(causes) == 3 and all(isinstance(c, Cause) for c in causes), a.last.error
    critiques = a.critic(REPORT, causes, seed=0)
    assert critiques and all(0 <= c.index < 3 and 0 <= c.score <= 1 for c in critiques), a.last.error
    assert isinstance(a.judge(REPORT, seed=0), Judgement), a.last.error
    assert isinstance(a.reflect(REPORT, seed=0), str), a.last.error
    out = a.compare(
        [(2, "smaller radius", "0.9"), (9, "hexagonal start", "1.1")], [(1, "edges empty")], seed=0
    )
    assert isinstance(out, Comparison) and {v.hypothesis for v in out.verdicts} <= {2, 9}, a.last.error
    assert set(out.flawed) <= {2, 9}


@pytest.mark.parametrize("purpose", ["plan", "causes", "critic", "judge", "compare", "reflect"])
def test_every_call_survives_a_truncated_answer(purpose):
    a, _ = analyst(**{purpose: '{"situation": "cut off mid'})
    calls = {
        "plan": lambda: a.plan("statement"),
        "causes": lambda: a.causes(REPORT, 3),
        "critic": lambda: a.critic(REPORT, [Cause(**CAUSE)] * 3),
        "judge": lambda: a.judge(REPORT),
        "compare": lambda: a.compare([(1, "h", "r")], []),
        "reflect": lambda: a.reflect(REPORT),
    }
    assert not calls[purpose]() and a.last.error


@pytest.mark.slow
def test_the_embedded_model_answers_every_call_within_the_default_caps(embedded_backend):
    """The 135M default, with the default token caps: every call comes back as a typed object (this says
    the answers parse, not that they are wise)."""
    a = Analyst(embedded_backend, AnalysisConfig())
    assert isinstance(
        a.plan("Train a digits classifier; solution.py defines train and predict.", seed=0), Plan
    )
    causes = a.causes(REPORT, 3, seed=0)
    assert len(causes) == 3, a.last.error
    critiques = a.critic(REPORT, causes, seed=0)
    assert critiques and all(0 <= c.criticality <= 1 for c in critiques), a.last.error
    assert isinstance(a.judge(REPORT, seed=0), Judgement), a.last.error
    assert a.reflect(REPORT, seed=0), a.last.error
    hyps = [(1, "a lower learning rate stabilises training", "node 4: nan at 0.5; node 6: 0.95 at 0.05")]
    out = a.compare(
        hyps + [(2, "weight decay helps", "node 5: 0.93, parent 0.91")], [(1, "nan above 0.1")], seed=0
    )
    assert isinstance(out, Comparison), a.last.error
