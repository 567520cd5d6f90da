"""The analysis calls of the dual-space search: task plan, competing causes, critic, judge, joint comparison.

Attribution needs several answers that the proposal call cannot give well in one breath: K competing
explanations of a failure, an independent reviewer that scores them, and a judgement whether the result
measured the hypothesis at all. The dual search further needs one joint comparison of the working
hypotheses that turns results into observations with per-hypothesis verdicts. Each is one short prompt
(inputs clipped so a prompt stays under ~600 tokens of the 135M default) plus a per-call pydantic
schema decoded under grammar constraint: ids are `Literal`s of the ids given, labels are `Literal`s,
strings are length-capped, output tokens are capped.

The answer models about an experiment's result are `policy.analysis_answers`; the task plan's are here.

Every call returns the parsed object (or a cleaned copy) or None / [] when the answer is unusable; it
never raises on model output. The Completion of the latest call is kept in `Analyst.last` (None when the
call was skipped because there was nothing to ask) so the caller can log its error and tokens; usage also
reaches the backend's usage sink as for every other call.

Deliberately not done here: no routing, clamping or stall detection (`search.attribution` does that as
pure logic), no storage, no retries.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from arts.policy.analysis_answers import (
    Cause,
    Comparison,
    Critique,
    HypothesisVerdict,
    Judgement,
    Reflection,
)
from arts.policy.base import Backend, Completion
from arts.policy.call import ask, chat

ANALYST = "You analyse the results of experiments on a program. Answer with JSON only."
SUPPORT_GRADES = (0.0, 0.25, 0.5, 0.75, 1.0)
SLOTS = ("implementation", "design", "method")
"""The category of each of K > 1 causes, in turn: every level of fault gets a cause the critic weighs."""
"""The critic scores a cause's support on these grades only: a number it could copy from the report (the
failed node's own score, measured: 0.68899 three times in one run) is not one of them."""
CRITIC_SEED_OFFSET = 7919
"""The critic samples with its own seed (the round's, offset by this), not the analyst's that wrote the
causes: an independent reading of the evidence, not the same draw replayed under another prompt."""

CRITIC = (
    "You are a sceptical reviewer. You trust only what the logs and numbers show, and you score "
    "explanations that others wrote. Answer with JSON only."
)
_FORBID = ConfigDict(extra="forbid")
AXIS_LABEL = r"^[a-z][a-z0-9]{0,15}( [a-z0-9]{1,15}){0,2}$"
"""An axis of the plan: one to three lower-case words (the 135M default wrote `MARGINADUONADUOA` when an
axis was any string of up to 30 characters)."""


class AnalysisConfig(BaseModel):
    """How the analysis calls are asked."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    temperature: float = Field(0.3, ge=0)
    """Sampling temperature of every analysis call (0 is greedy) but the critic's."""
    critic_temperature: float = Field(0.7, ge=0)
    """The critic's sampling temperature: its own draw, not the analyst's near-greedy reading again."""
    report_chars: int = Field(1200, ge=200)
    """A report longer than this keeps its head and tail (result line first, stderr tail last)."""
    plan_statement_chars: int = Field(1600, ge=200)
    """The task statement is clipped to this many characters for the plan (the round prompt's cut is
    `render.statement_chars`)."""
    plan_tokens: int = Field(200, gt=0)
    """Output cap of the plan; `plan_axes` adds 40."""
    plan_axes: bool = False
    """Ask the plan for the search's axes (`Plan.axes`), which free proposals then choose from. Off in the
    small profile: asked for them, the 135M default wrote `the task is` four times on char-lm and copied
    `independent directions` from the question on two other tasks (its directed hypotheses take their
    axes from the program's targets instead)."""
    cause_tokens: int = Field(130, gt=0)
    """Output cap per cause (three strings of up to 120 characters, the labels, the separators): a causes
    call may write k times this plus 20, above the usual 200 because a truncated list loses every cause at
    once. At 100, 2 of 24 attributions of the recovery benchmark were cut off (320 tokens)."""
    critique_tokens: int = Field(44, gt=0)
    """Output cap per critique, plus a fixed 24 for the wrapper."""
    judge_tokens: int = Field(80, gt=0)
    """Output cap of a judgement."""
    compare_tokens: int = Field(110, gt=0)
    """Output cap of a comparison's flawed ids and predictions; each verdict adds `verdict_tokens`."""
    verdict_tokens: int = Field(50, gt=0)
    """Output cap per hypothesis verdict of a comparison."""
    max_hypotheses: int = Field(4, ge=1, le=6)
    """A comparison sees at most this many working hypotheses (the first ones given); four at full length
    keep its prompt under 600 tokens."""
    max_observations: int = Field(5, ge=0)
    """A comparison sees at most this many observations (the last ones given)."""


class Statement(BaseModel):
    """The task statement split into what a prompt needs, without solving anything."""

    model_config = _FORBID
    situation: str = Field(min_length=4, max_length=200)
    """What the task is about: system, data, current state."""
    deliverable: str = Field(min_length=4, max_length=160)
    """What must be produced at the end."""
    requirements: list[Annotated[str, Field(min_length=2, max_length=80)]] = Field(max_length=4)
    """Hard constraints the deliverable must meet."""


Axis = Annotated[str, Field(pattern=AXIS_LABEL)]


class Plan(Statement):
    """The statement's parts and, from a capable model, the axes of the search."""

    axes: list[Axis] = Field(default_factory=list, max_length=4)
    """The directions along which the deliverable could be improved (`model capacity`, `learning rate`):
    a free proposal's axis is one of them (`policy.scientist.candidate_item`), so the hypotheses of a
    search share a readable vocabulary instead of free strings merged by spelling. Empty when the plan
    was not asked for them (`AnalysisConfig.plan_axes`) and in a plan stored before they existed."""


PLAN_AXES = create_model("Plan", __base__=Statement, axes=(list[Axis], Field(max_length=4)))
"""The plan as a model answers it under `plan_axes`: the axes are a required key of its grammar."""


def _ids(ids: list[int]):
    return Literal[tuple(ids)]  # type: ignore[valid-type]


def clip(text: str, limit: int) -> str:
    """`text` cut to about `limit` characters, keeping both ends (a report's result line and its tail)."""
    text = text.strip()
    if len(text) <= limit:
        return text
    half = (limit - 5) // 2
    return f"{text[:half]}\n...\n{text[-half:]}"


def causes_text(causes: list[Cause]) -> str:
    """Numbered lines as the critic sees them (evidence shortened so that five causes fit the prompt)."""
    return "\n".join(
        f"{i}. [{c.category}, {c.severity}] {c.cause} (evidence: {c.evidence[:80]})"
        for i, c in enumerate(causes)
    )


class Analyst:
    """The analysis calls over one backend (and optionally one LoRA adapter)."""

    def __init__(self, backend: Backend, config: AnalysisConfig, adapter: str | None = None):
        self.backend = backend
        self.config = config
        self.adapter = adapter
        self.last: Completion | None = None
        """The Completion of the latest call; None when the latest call had nothing to ask."""

    def _call(
        self,
        system: str,
        user: str,
        schema: type[BaseModel],
        purpose: str,
        max_tokens: int,
        seed: int | None,
        temperature: float | None = None,
    ) -> BaseModel | None:
        """The parsed answer (None when it did not validate); the completion is kept in `last`."""
        self.last = ask(
            self.backend,
            chat(system, user),
            schema,
            purpose=purpose,
            temperature=self.config.temperature if temperature is None else temperature,
            max_tokens=max_tokens,
            seed=seed,
            adapter=self.adapter,
        )
        parsed = self.last.parsed
        return parsed if isinstance(parsed, schema) else None

    def plan(self, statement: str, seed: int | None = None) -> Plan | None:
        user = (
            f"Task statement:\n{clip(statement, self.config.plan_statement_chars)}\n\nDo not solve the task. "
            "Restate it in its own words: the situation, the deliverable that must be handed in and at most "
            "4 hard requirements."
        )
        schema, tokens = Statement, self.config.plan_tokens
        if self.config.plan_axes:
            user += (
                " Then name 2 to 4 axes: the independent directions along which the deliverable could be "
                "improved, one to three words each."
            )
            schema, tokens = PLAN_AXES, tokens + 40
        parsed = self._call(ANALYST, user, schema, "plan", tokens, seed)
        return Plan.model_validate(parsed.model_dump()) if parsed else None

    def causes(self, report: str, k: int, seed: int | None = None) -> list[Cause]:
        """Exactly k candidate causes, or [] on an unusable answer. With k > 1 each cause has its category
        fixed by the grammar, in turn (`SLOTS`: the code, the evaluation, the idea), so the K causes
        compete across levels: free, the 135M default gave all three the same category and text."""
        if k == 1:
            items: tuple = (Cause,)
        else:
            items = tuple(
                create_model(f"Cause{i}", __base__=Cause, category=(Literal[SLOTS[i % len(SLOTS)]], ...))
                for i in range(k)
            )
        schema = create_model("Causes", __config__=_FORBID, causes=(tuple[items], ...))  # type: ignore[valid-type]
        asked = (
            f"in {k} different ways: the first blames the code, the second the evaluation design, the third "
            "the method (the idea itself)"
            if k > 1
            else "once"
        )
        user = (
            f"{clip(report, self.config.report_chars)}\n\nThe experiment above failed or stalled. Explain why "
            f"{asked}. For each: the cause, the line of the report (or signal) that shows it, how severe it "
            "is, and a fix."
        )
        parsed = self._call(ANALYST, user, schema, "causes", 20 + k * self.config.cause_tokens, seed)
        return [Cause.model_validate(c.model_dump()) for c in parsed.causes] if parsed else []

    def critic(
        self,
        report: str,
        causes: list[Cause],
        seed: int | None = None,
        levels: tuple[float, ...] = (0.125, 0.375, 0.65, 0.9),
    ) -> list[Critique]:
        """One critique per cause (first kept on a repeated index; a skipped index has none), or []. The
        support is one of `SUPPORT_GRADES`, the criticality one of `levels` (one per route depth: the
        middle of each band between the router's gates), and the call is sampled with its own seed and
        `config.critic_temperature`."""
        if not causes:
            self.last = None
            return []
        k = len(causes)
        items = tuple(  # one per cause, in order: free indices let it score one cause twice, another never
            create_model(
                f"Score{i}",
                __base__=Critique,
                index=(Literal[i], ...),  # type: ignore[valid-type]
                score=(Literal[SUPPORT_GRADES], ...),  # type: ignore[valid-type]
                criticality=(Literal[tuple(levels)], ...),  # type: ignore[valid-type]
            )
            for i in range(k)
        )
        schema = create_model("Critiques", __config__=_FORBID, scores=(tuple[items], ...))  # type: ignore[valid-type]
        user = (  # a third of the report: the causes already cite what in it matters
            f"{clip(report, self.config.report_chars // 3)}\n\nProposed causes of the failure:\n"
            f"{causes_text(causes)}"
            "\n\nScore how well the evidence supports each cause: 0 (not at all), 0.25, 0.5, 0.75 or 1 "
            "(clearly shown); give its correct category: implementation (code bug), design (evaluation or "
            f"protocol) or method (the idea); and its criticality: {levels[0]:g} (harmless to the idea), "
            f"{levels[1]:g}, {levels[2]:g} or {levels[3]:g} (fatal to it)."
        )
        tokens = 24 + k * self.config.critique_tokens
        own = None if seed is None else seed + CRITIC_SEED_OFFSET
        parsed = self._call(CRITIC, user, schema, "critic", tokens, own, self.config.critic_temperature)
        seen: dict[int, Critique] = {}
        for c in parsed.scores if parsed else []:
            seen.setdefault(c.index, Critique.model_validate(c.model_dump()))
        return list(seen.values())

    def reflect(self, report: str, seed: int | None = None) -> str | None:
        """One reflection instead of K causes, a critic and a judge (the reflection baseline)."""
        user = (
            f"{clip(report, self.config.report_chars)}\n\nThe experiment above failed or stalled. In one or "
            "two sentences: what went wrong, and what to do differently next time."
        )
        parsed = self._call(ANALYST, user, Reflection, "reflect", self.config.judge_tokens, seed)
        return parsed.reflection if parsed else None

    def judge(self, report: str, seed: int | None = None) -> Judgement | None:
        user = (
            f"{clip(report, self.config.report_chars)}\n\nDid this experiment validly measure its hypothesis "
            "(it ran as intended and the number means what it should), even if the result is weak? Give "
            "the reason, the verdict and your confidence from 0 to 1."
        )
        parsed = self._call(ANALYST, user, Judgement, "judge", self.config.judge_tokens, seed)
        return Judgement.model_validate(parsed.model_dump()) if parsed else None

    def compare(
        self,
        hypotheses: list[tuple[int, str, str]],
        observations: list[tuple[int, str]],
        seed: int | None = None,
    ) -> Comparison | None:
        """Joint comparison of (id, hypothesis, its results in one line) against (id, observation)."""
        hyps = list({h[0]: h for h in hypotheses}.values())[: self.config.max_hypotheses]
        if not hyps:
            self.last = None
            return None
        ids = [h[0] for h in hyps]
        obs = observations[-self.config.max_observations :] if self.config.max_observations else []
        verdict = create_model("Verdict", __base__=HypothesisVerdict, hypothesis=(_ids(ids), ...))
        schema = create_model(
            "Compare",
            __base__=Comparison,
            flawed=(list[_ids(ids)], Field(max_length=len(ids))),
            verdicts=(list[verdict], Field(min_length=len(ids), max_length=len(ids))),
        )
        lines = [
            f"Hypothesis {i}: {text[:140]}\n  Results: {res[:120] or 'none yet'}" for i, text, res in hyps
        ]
        seen = [f"- {text[:140]}" for _, text in obs] or ["- none"]
        user = (
            "\n".join(lines) + "\n\nObservations so far:\n" + "\n".join(seen) + "\n\n"
            "Compare these hypotheses. For each hypothesis, write one sentence saying what its results "
            "show (observation) and whether they support, oppose or are neutral to it. predictions: at "
            "most 2 tests that would tell them apart. flawed: only hypotheses whose experiment had a bug "
            "(usually none)."
        )
        tokens = self.config.compare_tokens + len(ids) * self.config.verdict_tokens
        parsed = self._call(ANALYST, user, schema, "compare", tokens, seed)
        if parsed is None:
            return None
        by_id: dict[int, HypothesisVerdict] = {}
        for v in parsed.verdicts:
            by_id.setdefault(v.hypothesis, HypothesisVerdict.model_validate(v.model_dump()))
        return Comparison(
            verdicts=list(by_id.values()),
            predictions=list(parsed.predictions),
            flawed=list(dict.fromkeys(parsed.flawed)),
        )
