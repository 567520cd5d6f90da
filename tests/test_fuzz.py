"""Fuzz the model-output path with malformed and hostile completions: the parsers, `apply_edit` and the
executor's handling of actions must never raise anything but their typed failures (0 crashes).

Completions are generated from valid answers by seeded mutations (cuts, byte noise, deep nesting, huge
numbers, lone surrogates, NUL and escape characters, paths out of the working copy, code in every field),
so a failure reproduces from its index."""

import json
import random

import pytest
from pydantic import BaseModel

from arts.policy.base import Completion
from arts.policy.edits.apply import EditError, apply_edit
from arts.policy.edits.schema import edit_schema, unwrap
from arts.policy.executor import Executor, ExecutorConfig
from arts.policy.parsing import parse_json_object, salvage_items, validate_json
from arts.tasks.base import EvalResult

FILES = {
    "model.py": "LR = 0.003\nDEPTH = 4\nNAME = 'mlp'\n\n\ndef build(x):\n    y = x * LR\n    return y + DEPTH\n",
    "notes.txt": "free text\n",
}
OPS = {"set_constant", "set_return", "replace_function", "replace_lines", "write_file", "read_file"}
VALID = [
    {"action": {"op": "set_constant", "name": "LR", "value": 0.01}},
    {"action": {"op": "set_constant", "name": "NAME", "value": "'cnn'"}},
    {"action": {"op": "set_return", "function": "build", "expression": "y * DEPTH"}},
    {"action": {"op": "replace_function", "name": "build", "body": "return x"}},
    {"action": {"op": "replace_lines", "start": "1: LR = 0.003", "end": "2: DEPTH = 4", "file": "model.py", "text": "LR = 1"}},
    {"action": {"op": "write_file", "file": "notes.txt", "content": "new"}},
    {"action": {"op": "read_file", "file": "notes.txt"}},
    {"candidates": [{"hypothesis": "raise LR", "probability": 0.5}, {"hypothesis": "x", "probability": 2}]},
]  # fmt: skip
LONGEST = 64 << 10
"""Completions are cut here: a backend's token cap (1,024 tokens at most for an edit) bounds them far below."""
HOSTILE_VALUES = [
    "", None, True, -1, 10**400, 1e308, float("inf"), [], {}, "\x00", "\x1b[2J", "\ud800", "../../etc/passwd",
    "/etc/shadow", "model.py\x00.txt", "__import__('os').system('id')", "x" * 20_000, "def f(:\n\tpass",
    "\n" * 1000, "    " * 500 + "return 1", "LR", "build", "1: LR = 0.003", "0: nothing", "🙂" * 50,
]  # fmt: skip


def _mutate(rng: random.Random, text: str) -> str:
    kind = rng.randrange(12)
    if kind == 0:
        return text[: rng.randrange(len(text) + 1)]  # cut off at max_tokens
    if kind == 1:
        i = rng.randrange(len(text) + 1)
        return text[:i] + "".join(chr(rng.randrange(0x110000)) for _ in range(rng.randrange(1, 8))) + text[i:]
    if kind == 2:
        depth = rng.choice([50, 5000, 30_000])
        return '{"action": ' + "[" * depth + "]" * rng.choice([0, depth]) + "}"
    if kind == 3:
        return "```json\n" + text + "\n```\nand " + text  # prose, fences, two objects
    if kind == 4:
        return text.replace("}", ",}").replace("]", ",]")  # trailing commas
    if kind == 5:
        return text.replace('"', "'")  # Python-ish quotes
    if kind == 6:
        return '{"action": {"op": "set_constant", "name": "LR", "name": "DEPTH", "value": 1}}'  # dup keys
    if kind == 7:
        return text.replace("0.01", rng.choice(["NaN", "Infinity", "-Infinity", "1e999", "0x10", "01"]))
    if kind == 8:
        return "{" * rng.randrange(1, 40) + '"' + "\\" * rng.randrange(0, 5)
    if kind == 9:
        return '{"candidates": [' + ", ".join([text] * rng.randrange(0, 30)) + ", {"
    if kind == 10:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(64))).decode("latin-1")
    return text


def _hostile_object(rng: random.Random) -> str:
    """A schema-shaped answer whose fields hold hostile values."""
    obj = json.loads(json.dumps(rng.choice(VALID)))
    inner = obj.get("action") or obj
    for key in list(inner) if isinstance(inner, dict) else []:
        if rng.random() < 0.6:
            inner[key] = rng.choice(HOSTILE_VALUES)
    if rng.random() < 0.2:
        inner["extra"] = "field"
    try:
        return json.dumps(obj, allow_nan=True)
    except (ValueError, OverflowError):
        return json.dumps(obj, default=str)


def completions(n: int, seed: int = 0):
    rng = random.Random(seed)
    for _ in range(n):
        base = json.dumps(rng.choice(VALID)) if rng.random() < 0.5 else _hostile_object(rng)
        text = base
        for _ in range(rng.randrange(0, 3)):
            text = _mutate(rng, text)
        yield text[:LONGEST]


class Candidate(BaseModel):
    hypothesis: str
    probability: float


def fuzz_parsers(n: int, seed: int) -> tuple[int, int]:
    """Run n completions through both parsers, `apply_edit` and `salvage_items`; (parsed, applied)."""
    schema = edit_schema(FILES, OPS)
    parsed_count = applied = 0
    for i, text in enumerate(completions(n, seed)):
        try:
            for parse in (parse_json_object, validate_json):
                parsed, why = parse(text, schema)
                assert (parsed is None) != (why is None)
                if parsed is None:
                    continue
                parsed_count += 1
                try:
                    out = apply_edit(FILES, unwrap(parsed))
                    applied += 1
                    assert set(out) >= set(FILES) and all(isinstance(v, str) for v in out.values())
                except EditError:
                    pass
            salvage_items(text, "candidates", Candidate)
        except Exception as e:  # any other exception is a crash
            raise AssertionError(f"completion {i} crashed: {type(e).__name__}: {e}\n{text[:300]!r}") from e
    return parsed_count, applied


def test_hostile_completions_crash_no_parser_nor_apply_edit():
    parsed, applied = fuzz_parsers(1500, seed=0)
    assert parsed > 100 and applied > 20, (parsed, applied)  # the fuzz reached apply_edit


@pytest.mark.slow
def test_ten_thousand_hostile_completions_crash_nothing():
    parsed, applied = fuzz_parsers(10_000, seed=2)
    assert parsed > 500 and applied > 100, (parsed, applied)


class ScriptedBackend:
    """Answers each executor call with the next fuzzed completion, parsed as an unconstrained server's
    output is (`parse_json_object`)."""

    name = model_id = "fuzz"

    def __init__(self, texts):
        self.texts, self.calls = texts, 0

    def generate(self, prompts, n=1, sampling=None, schema=None, adapter=None, purpose=""):
        text, self.calls = next(self.texts, ""), self.calls + 1
        parsed, error = parse_json_object(text, schema) if schema is not None else (None, None)
        return [[Completion(text=text, parsed=parsed, error=error, finish_reason="stop")]]

    def logprobs(self, prompt, completion, schema=None, adapter=None):
        return []

    def count_tokens(self, text):
        return len(text) // 4


def fuzz_executor(runs: int, seed: int) -> int:
    """Executor runs, each answered by fuzzed completions until it gives up; returns the actions handled."""
    backend = ScriptedBackend(completions(runs * 4, seed))
    executor = Executor(backend, ExecutorConfig(max_actions=4, max_evals=2))
    validate = lambda files: EvalResult(valid=True, score=1.0, reason="")  # noqa: E731
    for _ in range(runs):
        result = executor.run("raise LR", dict(FILES), ["model.py", "notes.txt"], validate)
        assert set(result.files) >= {"model.py"} and all(isinstance(v, str) for v in result.files.values())
    return backend.calls


def test_executor_survives_hostile_actions():
    assert fuzz_executor(10, seed=1) >= 10


@pytest.mark.slow
def test_executor_survives_a_thousand_hostile_actions():
    assert fuzz_executor(300, seed=3) >= 300
