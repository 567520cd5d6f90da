"""The executor agent: implements one hypothesis on a program, one typed edit action at a time.

Why so small: the default model has 135M parameters. It cannot run a tool-calling loop or write diffs,
but under a per-call grammar it reliably emits one small JSON action (see `policy.edits.apply`). So the harness
does what a larger agent would do with tools: it shows the (trimmed, line-numbered) file in every prompt
(`policy.edits.prompt`), applies the action, and calls `validate` after every applied edit. A step is: short prompt → one
constrained action → apply (a rejected edit is shown back as the last error) → validate → stop at the
first valid result, else show the evaluator's reason and go on, up to `max_actions` model calls.

`validate` is a callable handed in by the search (the sandbox); this module never imports it. Not done
here: choosing what to try (the scientist does that), judging whether the score improved, or running
any generated code.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from arts.policy.base import Backend, Message
from arts.policy.call import ask
from arts.policy.edits.apply import EditError, apply_edit, program_key
from arts.policy.edits.moves import directed_target
from arts.policy.edits.prompt import action_prompt, one_line, window
from arts.policy.edits.quickfix import name_fixes
from arts.policy.edits.schema import edit_schema, unwrap
from arts.policy.edits.step_menus import direction, mentioned, step_menus
from arts.tasks.base import EvalResult

EditOp = Literal[
    "set_constant",
    "set_keyword",
    "swap_call",
    "set_return",
    "replace_function",
    "replace_lines",
    "write_file",
]
SIMPLE_OPS = {"set_constant", "set_keyword", "swap_call", "set_return"}
"""Ops whose every grammatical answer is a well-formed edit: offered first to a small model."""


class ExecutorConfig(BaseModel):
    """How the executor asks for and applies edits."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    max_actions: int = Field(6, ge=1)
    """Model calls per hypothesis; a rejected edit, a read_file and an unparsable answer each cost one."""
    max_evals: int = Field(2, ge=1)
    """Evaluations per hypothesis. Every evaluation counts against the search's budget: with no cap, two
    nodes of a 20-evaluation circle-packing run with the 135M default spent 11 evaluations on edits that
    each crashed the same way."""
    revert_failed: bool = True
    """After an edit that applied but failed its evaluation, the next action starts again from the
    original program (the error is still shown). Measured with the 135M default: edits stacked on a
    crash (a scalar returned where a tuple was expected) never repaired it. A seedless draft is kept, so
    the next action can repair it."""
    max_tokens: int = Field(192, gt=0)
    """Cap on the tokens of one edit action."""
    draft_tokens: int = Field(1024, gt=0)
    """Cap on the tokens of a whole-file draft (write_file for a seedless task)."""
    temperature: float = Field(0.7, ge=0.0)
    """Sampling temperature of each action; 0 is greedy."""
    repeat_heat: float = Field(0.4, ge=0.0)
    """The temperature rises by this much for each time an action already rejected is answered again,
    and the hypothesis is given up at the third such repeat. Measured on bin-packing with the 135M
    default, 46 of 136 executor calls repeated an action already rejected for the same hypothesis."""
    ops: list[EditOp] = Field(
        ["set_constant", "set_keyword", "swap_call", "set_return", "replace_function", "replace_lines"],
        min_length=1,
    )
    """Edit actions offered to the model. A seedless task's first action is always write_file, and
    read_file is offered whenever several files are editable."""
    show_chars: int = Field(2500, ge=200)
    """How much of the focused file (line-numbered) a prompt shows; longer files show a window around
    the lines the hypothesis mentions."""
    constants_first: bool = True
    """When the hypothesis names no target, the first `narrow_actions` actions may only set constants or
    return expressions (ops whose grammar admits only well-formed edits): measured with the 135M default,
    constant edits reached a valid program in 6 of 6 runs while function bodies applied in 1 of 12
    actions. Large models lose little (a later action may rewrite code)."""
    narrow_actions: int = Field(3, ge=0)
    """For this many first actions, when the hypothesis names constants or functions of the file, only
    those are offered (set_constant / replace_function): a small model then cannot wander off to another
    target. Later actions offer everything."""
    value_menu: bool = True
    """A numeric constant's new value is chosen from a menu around its current one (x1/4, x1/2, x0.8,
    x0.9, x1.1, x1.25, x2, x4; `policy.edits.value_menu`), the values the random-mutation baseline draws from. The
    135M default, free to write any number, copied numbers from its prompt (a score shown as 1.1498 became
    MARGIN = 1.14, a negative radius): 6 of its 7 values in one circle-packing run made the program
    invalid. With it, a settable return answers from a menu of concrete expressions too
    (`policy.orderings.return_menu`). Turn it off for a model that can choose values itself."""
    compass: bool = True
    """With value menus, a directed `increase X` / `decrease X` takes the next step of a compass search
    on X: the first value on its side of the menu not yet evaluated, coarse to fine (x2, x1.25, x1.1,
    x4 up; x0.5, x0.8, x0.9, x0.25 down), not the model's pick; once 3 moves of one step size from a
    parent have all failed to beat it, the next start one size finer (`search.compass`). The 135M default picks by the digits:
    it favoured the smaller values (x1.25 up, x0.25 down) whatever the menu's order, so a circle-packing
    MARGIN crept up by a quarter per round in 2 of 2 runs (1.075, against 1.35-1.56 where probes doubled it)."""
    max_anchors: int = Field(40, ge=2)
    """At most this many line anchors in the replace_lines enum (non-blank lines of the shown window)."""
    feedback_chars: int = Field(400, ge=50)
    """How much of an error or an evaluator's reason is shown back to the model."""


class ExecutorResult(BaseModel):
    """What one executor run produced."""

    model_config = ConfigDict(extra="forbid")
    files: dict[str, str]
    """The final files: the last applied edit (valid or not), or the input if nothing applied."""
    result: EvalResult | None = None
    """The validation of `files`; None when no edit was applied."""
    transcript: list[dict[str, Any]] = []
    """One entry per action: the action (or the model's error), whether it applied, the validation."""
    actions: int = 0
    model_s: float = 0.0
    eval_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reason: str = ""
    """Why there is no valid result; empty when there is one."""

    @property
    def applied(self) -> int:
        """How many actions produced an applied, parseable edit."""
        return sum(1 for step in self.transcript if step.get("applied"))


def _ops_of(schema: type[BaseModel]) -> list[str]:
    js = schema.model_json_schema()
    defs = list(js.get("$defs", {}).values()) or [js]
    return [d["properties"]["op"]["const"] for d in defs if "op" in d.get("properties", {})]


def feedback(result: EvalResult, limit: int) -> str:
    """The evaluator's reason plus the last stderr lines, for the next prompt."""
    head = result.reason or result.message or "the evaluation was not valid"
    tail = "\n".join(result.stderr_tail.strip().splitlines()[-4:])
    text = f"{head}\n{tail}".strip()
    return text if len(text) <= limit else "..." + text[-limit:]


class Executor:
    """Implements hypotheses with a backend under typed, grammar-constrained edit actions."""

    def __init__(self, backend: Backend, config: ExecutorConfig | None = None, adapter: str | None = None):
        self.backend = backend
        self.config = config or ExecutorConfig()
        self.adapter = adapter

    def run(
        self,
        hypothesis: str,
        files: dict[str, str],
        editable: list[str],
        validate: Callable[[dict[str, str]], EvalResult],
        task_summary: str = "",
        instructions: str = "",
        known: Callable[[dict[str, str]], str | None] | None = None,
        tried: str = "",
        share: tuple[int, int] | None = None,
        level: int = 0,
        failure: str = "",
    ) -> ExecutorResult:
        """Edit `files` until `validate` says valid, or `max_actions` model calls or `max_evals`
        evaluations are spent. `known(files)` names an earlier evaluation of exactly these files (such an
        edit is rejected before an evaluation is spent); `tried` lists earlier edits and their scores;
        `share` = (i, k): this is the i-th of k executors running the same hypothesis at once, and each
        menu offers its i-th share (`policy.edits.step_menus`); `level`: the compass's step level on these
        files (`search.compass`); `failure`: why `files` failed, when a repair starts from a failed program
        (a crash on a name is tried first with its quick fixes, `policy.edits.quickfix`)."""
        cfg, out = self.config, ExecutorResult(files=dict(files))
        focus, last_error, current, evals = editable[0], "", dict(files), 0
        seen: dict[str, str] = {}  # programs evaluated during this run -> what they gave
        rejected: set[str] = set()  # actions refused before an evaluation
        repeats = 0
        sides = direction(hypothesis, {p: files.get(p, "") for p in editable})
        move = directed_target(hypothesis)
        for path, (label, text) in [(p, f) for p in editable for f in name_fixes(files.get(p, ""), failure)]:
            entry = {"action": None, "op": "quick_fix", "fix": label, "error": None, "applied": False}
            out.transcript.append(entry)
            last_error = self._validated({**current, path: text}, validate, entry, out, known, seen)
            evals += "valid" in entry
            if entry.get("valid"):
                return out
            if evals >= cfg.max_evals:
                break
        for step in range(cfg.max_actions if evals < cfg.max_evals else 0):
            work = {p: current.get(p, "") for p in editable}
            seedless = not any(t.strip() for t in work.values())
            span = window(work[focus], hypothesis, cfg.show_chars) if work[focus] else (1, 1)
            named = mentioned(hypothesis, work) if step < cfg.narrow_actions else set()
            m = step_menus(
                work, current, known, seen, sides, cfg.ops, cfg.value_menu, share, cfg.compass, level
            )
            menus, keywords, swaps, rewrites = m.constants, m.keywords, m.swaps, m.rewrites
            if step < cfg.narrow_actions and move and move[0] == "swap" and swaps.get(move[1]):
                keywords = {}  # `swap c`: not a keyword of c, which the same narrowing would offer
            if any(not _side_left(name, menus, keywords) for name in sides):
                way = "above" if max(sides.values()) > 0 else "below"
                last_error = (
                    f"every value {way} the current {', '.join(sides)} in its menu has been evaluated"
                )
                break
            schema = self._schema(
                work, focus, span, seedless, named or None, step < cfg.narrow_actions, menus, keywords, swaps,
                rewrites,
            )  # fmt: skip
            ctx = {
                "task_summary": task_summary,
                "instructions": instructions,
                "tried": tried,
                "last_error": last_error,
            }
            messages = action_prompt(hypothesis, work, focus, span, _ops_of(schema), named or None, **ctx)
            entry, action = self._ask(
                messages, schema, seedless, out, cfg.temperature + repeats * cfg.repeat_heat
            )
            entry["step"] = step
            out.transcript.append(entry)
            said = action.model_dump_json() if action is not None else ""
            if said in rejected:
                repeats += 1
                if repeats >= 3:
                    last_error = f"{entry['op']} was answered again after its rejection; gave up"
                    break
            if action is None:
                last_error = entry["error"]
            elif action.op == "read_file":
                focus, last_error = action.file, ""
            else:
                last_error = self._apply(action, current, editable, validate, entry, out, known, seen)
                if "valid" not in entry:
                    rejected.add(said)
                    continue  # rejected before an evaluation
                if entry["valid"]:
                    break
                evals += 1
                if evals >= cfg.max_evals:
                    break
                if cfg.revert_failed and not seedless:
                    current = dict(files)
                    last_error += " (the program is back as it was before that edit)"
                else:
                    current = out.files
        if out.result is None or not out.result.valid:
            out.reason = f"no valid result after {out.actions} actions; last error: {last_error or 'none'}"
        return out

    def _schema(
        self,
        work: dict[str, str],
        focus: str,
        span: tuple[int, int],
        seedless: bool,
        only: set[str] | None,
        constants_only: bool = False,
        menus: dict[str, list] | None = None,
        keywords: dict[str, dict[str, list[str]]] | None = None,
        swaps: dict[str, list[str]] | None = None,
        rewrites: dict[str, list[str]] | None = None,
    ) -> type[BaseModel]:
        """This step's action schema: a draft for a seedless task; else the configured ops (plus read_file
        with several files), narrowed to `only` when given and any target is left, else whole-file writes.
        With `constants_only` (early steps, `constants_first`) and nothing named, constants come first."""
        if seedless:
            return edit_schema(work, {"write_file"}, focus=focus)
        ops, cfg = set(self.config.ops) | ({"read_file"} if len(work) > 1 else set()), self.config
        given = {"menus": menus, "keywords": keywords, "swaps": swaps, "rewrites": rewrites}
        if only:
            named = ops & (
                SIMPLE_OPS if cfg.constants_first and constants_only else SIMPLE_OPS | {"replace_function"}
            )
            for allowed in (named, ops & (SIMPLE_OPS | {"replace_function"})):
                try:
                    return edit_schema(work, allowed, focus, span, only=only, **given)
                except EditError:
                    pass  # the named targets cannot be edited by these ops
        elif constants_only and cfg.constants_first and ops & SIMPLE_OPS:
            try:
                return edit_schema(work, ops & SIMPLE_OPS, focus, span, **given)
            except EditError:
                pass  # no constants and no one-line returns in this program
        try:
            return edit_schema(work, ops, focus, span, cfg.max_anchors, **given)
        except EditError:
            return edit_schema(work, {"write_file"}, focus=focus)

    def _ask(
        self,
        messages: list[Message],
        schema: type[BaseModel],
        draft: bool,
        out: ExecutorResult,
        temperature: float,
    ) -> tuple[dict[str, Any], BaseModel | None]:
        """One constrained model call; returns the transcript entry and the action (None on failure)."""
        cfg = self.config
        comp = ask(
            self.backend,
            messages,
            schema,
            purpose="executor",
            temperature=temperature,
            max_tokens=cfg.draft_tokens if draft else cfg.max_tokens,
            adapter=self.adapter,
            spent=out,
        )
        out.actions += 1
        if comp.error is not None or comp.parsed is None:
            why = comp.error or "no object was returned"
            error = f"the answer was not a valid action: {one_line(why, cfg.feedback_chars)}"
            return {"action": None, "text": comp.text[:300], "error": error, "applied": False}, None
        action = unwrap(comp.parsed)
        return {"action": action.model_dump(), "op": action.op, "error": None, "applied": False}, action

    def _apply(
        self,
        action: BaseModel,
        current: dict[str, str],
        editable: list[str],
        validate: Callable[[dict[str, str]], EvalResult],
        entry: dict[str, Any],
        out: ExecutorResult,
        known: Callable[[dict[str, str]], str | None] | None,
        seen: dict[str, str],
    ) -> str:
        """Apply to the editable files of `current` and validate, unless the result was evaluated before;
        updates `out` and `entry`, returns the error to show next ("" if none)."""
        work = {p: current.get(p, "") for p in editable}
        try:
            edited = apply_edit(work, action)
            files = {**current, **{p: t for p, t in edited.items() if t != work[p]}}
            key = program_key(files)
            earlier = seen.get(key) or (known(files) if known else None)
            if earlier:
                raise EditError(
                    f"this exact program was already evaluated ({earlier}); make a different change"
                )
        except EditError as e:
            entry["error"] = f"the edit was rejected: {one_line(str(e), self.config.feedback_chars)}"
            return entry["error"]
        return self._validated(files, validate, entry, out, None, seen, key)

    def _validated(
        self,
        files: dict[str, str],
        validate: Callable[[dict[str, str]], EvalResult],
        entry: dict[str, Any],
        out: ExecutorResult,
        known: Callable[[dict[str, str]], str | None] | None,
        seen: dict[str, str],
        key: str | None = None,
    ) -> str:
        """Evaluate `files` (unless `known` ran them already: then the error says so), update `out` and
        `entry`; the error to show next ("" if none)."""
        if key is None:
            key = program_key(files)
            if earlier := seen.get(key) or (known(files) if known else None):
                entry["error"] = f"this exact program was already evaluated ({earlier})"
                return entry["error"]
        t0 = time.perf_counter()
        result = validate(files)
        out.eval_s += time.perf_counter() - t0
        out.files, out.result = files, result
        entry.update(applied=True, valid=result.valid, score=result.score)
        seen[key] = f"score {result.score:.5g}" if result.valid and result.score is not None else "it failed"
        if result.valid:
            return ""
        entry["feedback"] = feedback(result, self.config.feedback_chars)
        return f"the edit applied, but the evaluation failed: {entry['feedback']}"


def _side_left(
    name: str, constants: dict[str, list] | None, keywords: dict[str, dict[str, list[str]]]
) -> bool:
    """Whether the constant or keyword a directed hypothesis moves still has a value on its side."""
    if constants is not None and name in constants:
        return bool(constants[name])
    return any(kws.get(name) for kws in keywords.values()) or constants is None
