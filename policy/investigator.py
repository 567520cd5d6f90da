"""The investigator: the executor of `answer`-kind (diagnosis) tasks; it reads material, never edits code.

A diagnosis task shows the search no score: what it learns comes from observations of the case material,
each with its relation to the hypothesis under test (support / oppose / neutral). So where the executor
edits and validates, the investigator reads and notes. A step is one short prompt (task line, files, the
previous tool output clipped, the notes so far, the hypothesis last) and one grammar-constrained action:
`read` ~20 lines of a file, `grep` a file for a pattern, or `note` an observation (offered once something
was looked at), which becomes a `Finding` about the file last looked at. After `max_steps` steps, one
call constrained to the task's answer model writes the deliverable, with the current answer shown so that
a small model can copy it and change only a part; an answer that does not fit the schema keeps the
previous one. For a small model every choice is narrowed to what exists (`InvestigatorConfig.narrow`):
grep words of the hypothesis, read from line numbers just shown, note a line just shown.

The tools are callables handed in (the search builds them on `tasks.readonly`); this module runs nothing
and imports nothing of `search`; the step grammar is `policy.investigator_steps`, the answer model comes
from `policy.answer_schema`. Not done here: judging whether a finding is true, merging findings into the
observation space (the search does), or grading the answer (the task's hidden `[test]` does).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from arts.policy.base import Backend, Message
from arts.policy.call import ask, chat
from arts.policy.investigator_steps import OP_HELP, Relation, choices, clip, step_schema

SYSTEM = "You investigate case material to test a hypothesis. Answer with one JSON action."
ANSWER_SYSTEM = "You write the answer of a diagnosis task as JSON."


class InvestigatorConfig(BaseModel):
    """How the investigator asks for actions and for the answer."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    max_steps: int = Field(4, ge=1)
    """Action calls per hypothesis (read, grep or note); each costs one model call."""
    max_tokens: int = Field(96, gt=0)
    """Cap on the tokens of one action."""
    answer_tokens: int = Field(360, gt=0)
    """Cap on the tokens of the answer call."""
    temperature: float = Field(0.7, ge=0.0)
    """Sampling temperature of every call; 0 is greedy."""
    output_chars: int = Field(900, ge=100)
    """How much of the previous tool output a prompt shows."""
    notes_shown: int = Field(4, ge=1)
    """At most this many of the latest notes in a step prompt (the answer prompt shows them all)."""
    note_last: bool = True
    """When nothing was noted by the last step, that step may only note (once something was read or
    grepped): an investigation then yields at least one observation, what a diagnosis search learns
    from. Independently, no note is offered before anything was looked at."""
    narrow: bool = True
    """Narrow each action to what exists, as `Literal`s (the executor's way with the 135M default): a grep
    pattern is a word of the hypothesis, a read starts at line 1 or at a line number of the last output
    (or just past it), and a note's observation quotes a line of the last output. Measured with the 135M
    default over 4 investigations each: free patterns ('1.json', 'date:20, time:7, ...') matched nothing
    in 4 of 4 (hypothesis words: 4 of 4 matched); free reads started at lines 20 and 10000 of a 5-line
    file; free notes were 'neutral', 'dedupe', '0.0.0.0%% 16:00:...'. Off, free text (larger models)."""
    note_each: bool = True
    """After a look whose output holds lines, the next step notes one of them: every look then leaves an
    observation (and the comparison's notes name what changed first), instead of looks in a row whose
    outputs no note keeps."""
    menus_from_notes: bool = True
    """A part's answer menus keep only the values the notes (that do not oppose) name, in the order they
    name them, and a free string must quote a note (`search.diagnose`); off, the menus of the part's
    material (larger models, which can weigh what they read without the narrowing)."""
    overview_first: bool = True
    """Where the tools can compare a folder's tables (`Tools.compare`) or replay a history
    (`Tools.bisect`), the first step does: the one look that orders a case's series by when they changed,
    or finds the commit after which its test fails. Off, the model picks its first action."""


class Finding(BaseModel):
    """One observation made while testing a hypothesis."""

    model_config = ConfigDict(extra="forbid")
    text: str = Field(max_length=160)
    """What was observed, in the model's words."""
    region: str
    """Which part of the material it is about: the file last read or grepped ("material" before any)."""
    relation: Relation
    """Its relation to the hypothesis under test."""
    by: str = ""
    """The tool whose verdict this is (`bisect`), its relation set by what the verdict names; "" for a
    note of the model's."""


class InvestigationResult(BaseModel):
    """What one investigation produced."""

    model_config = ConfigDict(extra="forbid")
    answer: dict | None = None
    """The deliverable after the answer call; the previous answer when that call failed."""
    findings: list[Finding] = []
    """The notes, in order."""
    transcript: list[dict[str, Any]] = []
    """One entry per call: the action (or the model's error) and the tool's clipped output; then the answer."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model_s: float = 0.0
    reason: str = ""
    """Why the answer was not updated; empty when the answer call gave a valid answer."""


@dataclass(frozen=True)
class Tools:
    """The read-only tools handed to the investigator (built by the search on `tasks.readonly`)."""

    files: list[str]
    """Material files that may be read, as paths relative to the working copy."""
    read: Callable[[str, int], str]
    """read(path, start): about 20 numbered lines from line `start`."""
    grep: Callable[[str, str], str]
    """grep(pattern, path): the matching lines, numbered and capped."""
    folders: list[str] = field(default_factory=list)
    """Material folders whose tables `compare` may compare."""
    compare: Callable[[str], str | tuple[str, str | None] | tuple[str, str | None, int]] | None = None
    """compare(folder): which numeric series of the folder's CSV files left their range first
    (`tasks.windows`); or (that, the file whose series stays out first, when one does[, the verdict's
    lines at the head of the output])."""
    histories: list[str] = field(default_factory=list)
    """Material folders whose history `bisect` may replay."""
    bisect: Callable[[str], str | tuple[str, str | None]] | None = None
    """bisect(folder): the failing test run at each commit of the folder's history (`tasks.history`); or
    (that, the commit its verdict blames or None). Each line of a tool's verdict (its output's first,
    unless the tool says how many) becomes a finding of its own (`Finding.by`)."""
    words: list[str] = field(default_factory=list)
    """Words a narrowed grep may use besides the hypothesis's: the entities of the case's answer menus."""
    vocabulary: frozenset[str] = frozenset()
    """The material's words (lower case), when known: a hypothesis word outside it is not offered to
    grep (the 135M default's hypotheses are often words of no case: "falsehood", "improves")."""


def _one_line(text: str, limit: int) -> str:
    return clip(" ".join(text.split()), limit)


def _dump(answer: dict | None) -> str:
    """Compact JSON as the grammar writes it (", " and ": "), so the model can copy it token for token."""
    return "none yet" if answer is None else json.dumps(answer, separators=(", ", ": "), ensure_ascii=False)


def named_first(files: list[str], output: str) -> list[str]:
    """`files` with those the output names (by file name without its extension) first, in the order it
    first names them: after a comparison ranks `payments.csv` first, `logs/payments.txt` leads the menu."""
    text = output.lower()

    def first(path: str) -> int:
        stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0].lower()
        at = text.find(stem) if len(stem) >= 2 else -1
        return at if at >= 0 else len(text) + 1

    return sorted(files, key=first)  # stable: files named nowhere keep their order


class Investigator:
    """Tests a hypothesis against the material with read-only tools, then writes the answer."""

    def __init__(
        self, backend: Backend, config: InvestigatorConfig | None = None, adapter: str | None = None
    ):
        self.backend = backend
        self.config = config or InvestigatorConfig()
        self.adapter = adapter

    def prompt(
        self,
        hypothesis: str,
        files: list[str],
        last: tuple[str, str] | None,
        findings: list[Finding],
        ops: list[str],
        task_summary: str = "",
    ) -> list[Message]:
        """One step's prompt; `last` is (what was run, its output). The hypothesis comes last."""
        parts = [f"Task: {_one_line(task_summary, 300)}"] if task_summary else []
        if files:
            parts.append(f"Files: {clip(', '.join(files), 400)}")
        if last is None:
            parts.append("Nothing read yet.")
        else:
            parts.append(f"Output of {last[0]}:\n{clip(last[1].strip(), self.config.output_chars)}")
        if findings:
            shown = findings[-self.config.notes_shown :]
            parts.append("Notes so far:\n" + "\n".join(f"- {f.relation}: {f.text}" for f in shown))
        parts.append("Actions:\n" + "\n".join(f"- {OP_HELP[op]}" for op in ops))
        parts.append(f"Hypothesis: {hypothesis.strip()}")
        return chat(SYSTEM, "\n\n".join(parts))

    def answer_prompt(
        self, hypothesis: str, answer: dict | None, findings: list[Finding], task_summary: str = ""
    ) -> list[Message]:
        """The answer call's prompt: notes, hypothesis, then the current answer right before the request."""
        parts = [f"Task: {_one_line(task_summary, 300)}"] if task_summary else []
        if findings:
            notes = "\n".join(f"- {f.relation} ({f.region}): {f.text}" for f in findings)
            parts.append(f"Notes:\n{notes}")
        parts.append(f"Hypothesis: {hypothesis.strip()}")
        parts.append(f"Current answer: {_dump(answer)}")
        parts.append(
            "Write the whole answer as JSON: copy the current answer and change only what the notes and "
            "the hypothesis show."
            if answer is not None
            else "Write the whole answer as JSON, following the notes and the hypothesis."
        )
        return chat(ANSWER_SYSTEM, "\n\n".join(parts))

    def run(
        self,
        hypothesis: str,
        answer: dict | None,
        answer_model: type[BaseModel] | Callable[[list[Finding]], type[BaseModel]],
        tools: Tools,
        task_summary: str = "",
        seed: int | None = None,
        steps: int | None = None,
    ) -> InvestigationResult:
        """`max_steps` actions, then one answer call. Never raises for what the model or a tool returns.
        `answer_model` may be a function of the findings (a menu narrowed to what the notes name);
        `steps` (default `max_steps`) may be 0: the answer is then written without looking."""
        cfg, out = self.config, InvestigationResult(answer=answer)
        last: tuple[str, str] | None = None
        region = "material"
        for step in range(cfg.max_steps if steps is None else steps):
            ran = frozenset(e.get("op") for e in out.transcript if not e.get("by"))
            noted = not out.transcript or out.transcript[-1].get("op") in ("note", None)
            ops, schema = self._offer(step, hypothesis, tools, last, out.findings, ran, noted)
            messages = self.prompt(hypothesis, tools.files, last, out.findings, list(ops), task_summary)
            step_seed = None if seed is None else seed + step
            comp = ask(
                self.backend,
                messages,
                schema,
                purpose="investigate",
                temperature=cfg.temperature,
                max_tokens=cfg.max_tokens,
                seed=step_seed,
                adapter=self.adapter,
                spent=out,
            )
            entry: dict[str, Any] = {"step": step}
            out.transcript.append(entry)
            if comp.parsed is None:
                entry.update(op=None, error=comp.error or "no object was returned", text=comp.text[:300])
                continue
            action = comp.parsed.action
            entry.update(op=action.op, action=action.model_dump())
            if action.op == "note":
                out.findings.append(Finding(text=action.observation, region=region, relation=action.relation))
                continue
            label, output, blamed, n = self._use(tools, action)
            last, region = (label, output), getattr(action, "file", None) or action.folder
            entry["output"] = clip(output, cfg.output_chars)
            for line in output.strip().splitlines()[:n] if blamed is not None else []:
                verdict = self._verdict(action.op, line, blamed, hypothesis, tools, region)
                out.findings.append(verdict)  # the tool's verdict is an observation of its own
                out.transcript.append({"step": step, "op": "note", "by": action.op, "action": {
                    "op": "note", "observation": verdict.text, "relation": verdict.relation
                }})  # fmt: skip
        if not isinstance(answer_model, type):
            answer_model = answer_model(out.findings)
        self._answer(hypothesis, answer_model, task_summary, seed, out)
        return out

    def _offer(
        self,
        step: int,
        hypothesis: str,
        tools: Tools,
        last: tuple[str, str] | None,
        findings: list[Finding],
        ran: frozenset[str] = frozenset(),
        noted_last: bool = True,
    ) -> tuple[tuple[str, ...], type[BaseModel]]:
        """The actions offered at a step, and their schema. A note needs something looked at: the 135M
        default, offered every action at the first step, noted ungrounded guesses ("30,8", "usage").
        `ran`: the ops run so far; a comparison or a bisect runs once (a second shows the same lines)."""
        cfg, files = self.config, tools.files
        folders = tools.folders if tools.compare is not None and "compare" not in ran else []
        histories = tools.histories if tools.bisect is not None and "bisect" not in ran else []
        overviews = (*(("compare",) if folders else ()), *(("bisect",) if histories else ()))
        looks = ("read", "grep", *overviews)
        ops: tuple[str, ...] = (*looks, "note")
        if not files and not folders and not histories:
            ops = ("note",)
        elif last is None:
            ops = overviews if overviews and cfg.overview_first and step == 0 else looks
        elif cfg.note_last and step == cfg.max_steps - 1 and not findings:
            ops = ("note",)
        elif cfg.note_each and not noted_last:
            ops = ("note",)
        if not files:
            ops = tuple(op for op in ops if op not in ("read", "grep")) or ("note",)
        if not cfg.narrow:
            return ops, step_schema(files, ops, folders=folders, histories=histories)
        narrowed = choices(hypothesis, clip(last[1].strip(), cfg.output_chars) if last else None)
        said = [w for w in narrowed["words"] if not tools.vocabulary or w in tools.vocabulary]
        narrowed["words"] = list(dict.fromkeys([*tools.words, *said]))[:24]
        files = named_first(files, last[1]) if last else files
        noted = {f.text for f in findings}  # a line noted once is not offered again
        narrowed["quotes"] = [q for q in narrowed["quotes"] if q not in noted]
        if not narrowed["quotes"] and len(ops) > 1:
            ops = tuple(op for op in ops if op != "note")
        return ops, step_schema(files, ops, folders=folders, histories=histories, **narrowed)

    def _use(self, tools: Tools, action: BaseModel) -> tuple[str, str, str | None, int]:
        """Run a read, grep, compare or bisect: (label, output, what the tool's verdict names or None, the
        verdict's lines at the head of the output: 1 unless the tool says). A tool that raises is shown
        back as its error (the loop goes on)."""
        if action.op in ("compare", "bisect"):
            label, call = f"{action.op} {action.folder}", (getattr(tools, action.op), action.folder)
        elif action.op == "read":
            label, call = (
                f"read {action.file} from line {action.start}",
                (tools.read, action.file, action.start),
            )
        else:
            label, call = (
                f"grep {action.pattern!r} in {action.file}",
                (tools.grep, action.pattern, action.file),
            )
        try:
            got = call[0](*call[1:])
        except Exception as e:  # a tool is someone else's code: its failure is an observation, not a crash
            return label, f"error: {type(e).__name__}: {e}", None, 0
        if not isinstance(got, tuple):
            return label, str(got), None, 0
        return label, str(got[0]), got[1], got[2] if len(got) > 2 else 1

    @staticmethod
    def _verdict(op: str, line: str, blamed: str, hypothesis: str, tools: Tools, region: str) -> Finding:
        """A line of a tool's verdict as a finding: it supports a hypothesis that names what the tool blames,
        opposes one that names another of the case's entities (`Tools.words`), and is neutral to any other."""
        said = set(re.findall(r"[a-z0-9][a-z0-9_-]*", hypothesis.lower()))
        others = {w.lower() for w in tools.words} - {blamed.lower()}
        relation: Relation = "support" if blamed.lower() in said else "oppose" if said & others else "neutral"
        text = clip(line.strip(), 160)
        return Finding(text=text, region=region, relation=relation, by=op)

    def _answer(
        self,
        hypothesis: str,
        answer_model: type[BaseModel],
        task_summary: str,
        seed: int | None,
        out: InvestigationResult,
    ) -> None:
        cfg = self.config
        messages = self.answer_prompt(hypothesis, out.answer, out.findings, task_summary)
        answer_seed = None if seed is None else seed + cfg.max_steps
        comp = ask(
            self.backend,
            messages,
            answer_model,
            purpose="answer",
            temperature=cfg.temperature,
            max_tokens=cfg.answer_tokens,
            seed=answer_seed,
            adapter=self.adapter,
            spent=out,
        )
        if comp.parsed is None:
            why = _one_line(comp.error or "no object was returned", 300)
            out.reason = f"the answer did not fit the schema ({why}); the previous answer is kept"
            out.transcript.append({"step": "answer", "answer": None, "error": why, "text": comp.text[:300]})
            return
        out.answer = comp.parsed.model_dump(mode="json", by_alias=True, exclude_none=True)
        out.transcript.append({"step": "answer", "answer": out.answer, "error": None})
