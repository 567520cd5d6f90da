"""The investigator: answer schemas from JSON schema, the loop with a scripted backend (harness only), and
the grammar keeping a random model and the real embedded model inside the action and answer schemas.

`ScriptedBackend` only tests the loop (notes become findings, failed answers keep the previous one, the
transcript). What a model does is tested with the tiny random model and the embedded SmolLM2-135M.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest
from pydantic import ValidationError

from arts.policy.answer_schema import schema_model
from arts.policy.investigator import Investigator, InvestigatorConfig, Tools
from arts.policy.investigator_steps import choices, hypothesis_words, step_schema
from arts.tasks.readonly import grep_lines, read_lines
from tests.doubles import ScriptedBackend, make_case

SERVICES = ["api", "db", "cache"]
INCIDENT = {
    "type": "object",
    "additionalProperties": False,
    "required": ["root_service", "fault", "ruled_out", "evidence"],
    "properties": {
        "root_service": {"type": "string", "enum": SERVICES},
        "fault": {"type": "string", "enum": ["disk_full", "bad_deploy", "overload"]},
        "ruled_out": {"type": "array", "items": {"type": "string", "enum": SERVICES}, "maxItems": 2},
        "evidence": {"type": "string", "maxLength": 80, "description": "the line the verdict rests on"},
    },
}
SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["incidents"],
    "$defs": {"incident": INCIDENT},
    "properties": {
        "incidents": {
            "type": "object",
            "required": ["i1"],
            "properties": {"i1": {"$ref": "#/$defs/incident"}},
        }
    },
}
ANSWER = {
    "incidents": {"i1": {"root_service": "api", "fault": "overload", "ruled_out": [], "evidence": "guess"}}
}
FILES = ["incidents/i1/logs.txt", "incidents/i1/metrics.csv"]
HYPOTHESIS = "The db ran out of disk, and the api timed out calling it."


class FakeTools:
    """Tools that record their calls and answer with fixed text."""

    def __init__(self, fail: bool = False):
        self.calls: list[tuple] = []
        self.fail = fail

    def read(self, path: str, start: int) -> str:
        self.calls.append(("read", path, start))
        if self.fail:
            raise FileNotFoundError(path)
        return f"{start}: 10:01 db ERROR disk full"

    def grep(self, pattern: str, path: str) -> str:
        self.calls.append(("grep", pattern, path))
        return "3: 10:02 api ERROR timeout calling db"

    def tools(self) -> Tools:
        return Tools(files=FILES, read=self.read, grep=self.grep)


def case_tools(tmp_path: Path) -> Tools:
    """The real read-only tools over the tiny case of test_readonly, in the sandbox."""
    task, work = make_case(tmp_path), tmp_path / "work"
    return Tools(files=FILES, read=partial(read_lines, task, work), grep=partial(grep_lines, task, work))


def test_schema_model_round_trip_and_enum_violations_rejected():
    model = schema_model(SCHEMA)
    good = {
        "incidents": {
            "i1": {"root_service": "db", "fault": "disk_full", "ruled_out": ["api"], "evidence": "x"}
        }
    }
    assert model.model_validate(good).model_dump() == good
    assert model.model_validate_json(json.dumps(good)).model_dump(mode="json") == good
    for path, bad in [
        (("root_service",), "queue"),
        (("fault",), "DISK_FULL"),
        (("ruled_out",), ["api", "cache", "db"]),
        (("ruled_out",), ["disk"]),
        (("evidence",), "x" * 81),
    ]:
        broken = json.loads(json.dumps(good))
        broken["incidents"]["i1"][path[0]] = bad
        with pytest.raises(ValidationError):
            model.model_validate(broken)
    with pytest.raises(ValidationError):  # extra keys are refused at every level
        model.model_validate({"incidents": {"i1": {**good["incidents"]["i1"], "note": "x"}}})
    with pytest.raises(ValidationError):  # strict: no coercion of a string into a list or number
        schema_model({"type": "object", "properties": {"n": {"type": "integer"}}}).model_validate({"n": "3"})


def test_schema_model_keeps_keys_that_are_not_python_names():
    js = {
        "type": "object",
        "required": ["root-service", "class"],
        "properties": {
            "root-service": {"enum": SERVICES},
            "class": {"type": "integer", "minimum": 0, "maximum": 3},
            "json": {"type": "boolean"},
        },
    }
    model = schema_model(js)
    data = {"root-service": "db", "class": 2, "json": True}
    assert model.model_validate(data).model_dump() == data
    assert model.model_validate({"root-service": "db", "class": 2}).model_dump(exclude_none=True) == {
        "root-service": "db",
        "class": 2,
    }
    with pytest.raises(ValidationError):
        model.model_validate({"root-service": "db", "class": 4})
    assert list(model.model_json_schema()["properties"]) == ["root-service", "class", "json"]


@pytest.mark.parametrize(
    "prop, construct",
    [
        ({"type": "string", "pattern": "^a"}, "pattern"),
        ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, "oneOf"),
        ({"type": ["string", "null"]}, "['string', 'null']"),
        ({"type": "object", "additionalProperties": {"type": "string"}}, "additionalProperties"),
        ({"type": "array"}, "without items"),
        ({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, "uniqueItems"),
        ({"$ref": "other.json#/x"}, "$ref"),
        ({"type": "number", "exclusiveMinimum": 0}, "exclusiveMinimum"),
    ],
)
def test_schema_model_names_the_unsupported_construct(prop, construct):
    with pytest.raises(ValueError, match="Answer.x") as info:
        schema_model({"type": "object", "properties": {"x": prop}})
    assert construct in str(info.value)


def test_notes_become_findings_about_the_file_last_looked_at():
    answer = {"incidents": {"i1": {**ANSWER["incidents"]["i1"], "root_service": "db", "fault": "disk_full"}}}
    backend = ScriptedBackend(
        [
            {"op": "read", "file": FILES[0], "start": 1},
            {"op": "note", "observation": "1: 10:01 db ERROR disk full", "relation": "support"},
            {"op": "grep", "pattern": "api", "file": FILES[1]},
            {"op": "note", "observation": "3: 10:02 api ERROR timeout calling db", "relation": "oppose"},
            answer,
        ]
    )
    tools = FakeTools()
    result = Investigator(backend).run(
        HYPOTHESIS, ANSWER, schema_model(SCHEMA), tools.tools(), "Find the cause."
    )
    assert tools.calls == [("read", FILES[0], 1), ("grep", "api", FILES[1])]
    assert [(f.region, f.relation) for f in result.findings] == [(FILES[0], "support"), (FILES[1], "oppose")]
    assert result.findings[0].text == "1: 10:01 db ERROR disk full"
    assert result.answer == answer and result.reason == ""
    assert [e["step"] for e in result.transcript] == [0, 1, 2, 3, "answer"]
    assert "disk full" in result.transcript[0]["output"] and result.transcript[3]["op"] == "note"
    assert (result.prompt_tokens, result.completion_tokens) == (500, 100)
    assert [c["purpose"] for c in backend.calls] == ["investigate"] * 4 + ["answer"]
    step_prompt = backend.calls[2]["prompts"][1]["content"]  # after the read and the first note
    assert step_prompt.endswith(f"Hypothesis: {HYPOTHESIS}") and "Output of read" in step_prompt
    assert "support: 1: 10:01 db ERROR disk full" in step_prompt
    assert json.dumps(ANSWER, separators=(", ", ": ")) in backend.calls[4]["prompts"][1]["content"]


def test_narrowed_steps_offer_only_hypothesis_words_shown_lines_and_their_numbers():
    assert hypothesis_words(HYPOTHESIS) == ["db", "ran", "out", "disk", "api", "timed", "calling"]
    shown = "3: 10:01 db ERROR disk full\n7: 10:02 api ERROR timeout"
    picks = choices(HYPOTHESIS, shown)
    assert picks["starts"] == [1, 3, 7, 8] and picks["quotes"] == shown.splitlines()
    schema = step_schema(FILES, **picks)
    assert schema.model_validate({"action": {"op": "read", "file": FILES[0], "start": 7}})
    for bad in [
        {"op": "read", "file": FILES[0], "start": 5},
        {"op": "grep", "pattern": "timeout", "file": FILES[0]},
        {"op": "note", "observation": "the db was fine", "relation": "oppose"},
    ]:
        with pytest.raises(ValidationError):
            schema.model_validate({"action": bad})
    # the first step has nothing to note; a line noted once is not offered again
    backend = ScriptedBackend(
        [
            {"op": "grep", "pattern": "disk", "file": FILES[0]},
            {"op": "note", "observation": "3: 10:02 api ERROR timeout calling db", "relation": "support"},
            {"op": "read", "file": FILES[0], "start": 3},
        ]
        + ["{"]
    )
    Investigator(backend, InvestigatorConfig(max_steps=3)).run(
        HYPOTHESIS, None, schema_model(SCHEMA), FakeTools().tools()
    )
    schemas = [json.dumps(c["schema"].model_json_schema()) for c in backend.calls[:3]]
    assert '"note"' not in schemas[0] and '"note"' in schemas[1] and '"note"' not in schemas[2]
    assert "- note:" not in backend.calls[0]["prompts"][1]["content"]


def test_without_narrowing_any_pattern_and_observation_is_taken():
    backend = ScriptedBackend(
        [
            {"op": "grep", "pattern": "ERROR|WARN", "file": FILES[0]},
            {"op": "note", "observation": "the api failed after the db did", "relation": "support"},
            ANSWER,
        ]
    )
    cfg = InvestigatorConfig(max_steps=2, narrow=False)
    result = Investigator(backend, cfg).run(HYPOTHESIS, None, schema_model(SCHEMA), FakeTools().tools())
    assert [f.text for f in result.findings] == ["the api failed after the db did"]
    assert result.answer == ANSWER


def test_a_garbage_answer_keeps_the_previous_one():
    backend = ScriptedBackend(["not json", '{"action": {"op": "delete"}}', "{", "", '{"incidents": {}}'])
    result = Investigator(backend).run(HYPOTHESIS, ANSWER, schema_model(SCHEMA), FakeTools().tools())
    assert result.answer == ANSWER and result.findings == []
    assert "previous answer is kept" in result.reason
    assert len(result.transcript) == 5 and all(e["error"] for e in result.transcript)


def test_the_last_step_only_notes_when_nothing_was_noted():
    backend = ScriptedBackend(
        [
            {"op": "read", "file": FILES[0], "start": 1},
            {"op": "note", "observation": "1: 10:01 db ERROR disk full", "relation": "neutral"},
            "{",
        ]
    )
    cfg = InvestigatorConfig(max_steps=2)
    result = Investigator(backend, cfg).run(HYPOTHESIS, None, schema_model(SCHEMA), FakeTools().tools())
    last = json.dumps(backend.calls[1]["schema"].model_json_schema())
    assert '"read"' not in last and '"grep"' not in last and '"note"' in last
    assert "- read:" not in backend.calls[1]["prompts"][1]["content"]
    assert result.answer is None and len(result.findings) == 1


def test_a_failing_tool_is_shown_back_and_the_output_is_clipped():
    backend = ScriptedBackend(
        [
            {"op": "read", "file": FILES[0], "start": 1},
            {"op": "grep", "pattern": "db", "file": FILES[0]},
            {"op": "grep", "pattern": "disk", "file": FILES[1]},
            "{",
        ]
    )
    tools = FakeTools(fail=True)
    tools.grep = lambda pattern, path: "x" * 5000  # type: ignore[method-assign]
    cfg = InvestigatorConfig(max_steps=3, note_last=False, note_each=False, output_chars=300)
    result = Investigator(backend, cfg).run(HYPOTHESIS, ANSWER, schema_model(SCHEMA), tools.tools())
    assert "error: FileNotFoundError" in result.transcript[0]["output"]
    assert "error: FileNotFoundError" in backend.calls[1]["prompts"][1]["content"]
    third = backend.calls[2]["prompts"][1]["content"]
    assert "x" * 290 in third and "x" * 301 not in third
    assert len(result.transcript[1]["output"]) <= 300 and result.answer == ANSWER


def test_step_schema_offers_only_existing_files():
    schema = step_schema(FILES)
    assert schema.model_validate({"action": {"op": "grep", "pattern": "db", "file": FILES[1]}})
    for bad in [
        {"op": "read", "file": "grader/truth.txt", "start": 1},
        {"op": "read", "file": FILES[0], "start": 0},
        {"op": "grep", "pattern": "x" * 41, "file": FILES[0]},
        {"op": "note", "observation": "seen", "relation": "maybe"},
    ]:
        with pytest.raises(ValidationError):
            schema.model_validate({"action": bad})
    assert "read" not in json.dumps(step_schema([]).model_json_schema())


def _check_schema_valid(result, answer_model) -> None:
    steps = [e for e in result.transcript if e["step"] != "answer"]
    assert steps and all(e["op"] in ("read", "grep", "note") for e in steps), result.transcript
    assert result.answer is not None and result.reason == "", result.transcript
    assert answer_model.model_validate(result.answer).model_dump(exclude_none=True) == result.answer


def test_grammar_keeps_a_random_model_inside_the_schemas(tiny_backend, tmp_path):
    model = schema_model(SCHEMA)
    result = Investigator(tiny_backend, InvestigatorConfig(max_steps=3)).run(
        HYPOTHESIS, None, model, case_tools(tmp_path), "Find the root cause of incident i1.", seed=0
    )
    _check_schema_valid(result, model)
    assert result.findings and result.completion_tokens > 0


@pytest.mark.slow
def test_embedded_model_investigates_and_answers(embedded_backend, tmp_path):
    model = schema_model(SCHEMA)
    result = Investigator(embedded_backend).run(
        HYPOTHESIS, None, model, case_tools(tmp_path), "Find the root cause of incident i1.", seed=0
    )
    _check_schema_valid(result, model)
    assert result.findings and all(f.region in [*FILES, "material"] for f in result.findings)
