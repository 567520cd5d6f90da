"""`arts serve` through the openai client: token-by-token streaming, logprobs, max_tokens under a schema,
errors a user can act on, and the `arts serve` command itself.

The tiny random model is served in a uvicorn thread; its text is noise, which is what these tests want:
it rarely stops early, so answers run to max_tokens, and the checks are on the protocol, not the words.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from arts.policy.backends.serve import build_app
from tests.doubles import free_port, serving


class Watched:
    """The real backend, with a flag set the moment its `generate` returns."""

    def __init__(self, inner: Any):
        self.inner, self.name, self.model_id = inner, inner.name, inner.model_id
        self.tokenizer = inner.tokenizer
        self.done = threading.Event()

    def generate(self, prompts, n=1, sampling=None, schema=None, adapter=None, purpose="", *,
                 top_logprobs=0, on_tokens=None):  # fmt: skip
        self.done.clear()
        self.raised = None
        try:
            return self.inner.generate(prompts, n, sampling, schema, adapter, purpose,
                                       top_logprobs=top_logprobs, on_tokens=on_tokens)  # fmt: skip
        except Exception as e:
            self.raised = type(e).__name__
            raise
        finally:
            self.done.set()

    @property
    def grammars(self) -> Any:
        return self.inner.grammars

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def logprobs(self, *args: Any, **kwargs: Any) -> list[float]:
        return self.inner.logprobs(*args, **kwargs)


class Plain:
    """A backend offering only the protocol's `generate` (no log-probs, no token stream)."""

    def __init__(self, inner: Any):
        self.inner, self.name, self.model_id = inner, "plain", inner.model_id

    def generate(self, prompts, n=1, sampling=None, schema=None, adapter=None, purpose=""):
        return self.inner.generate(prompts, n, sampling, schema, adapter, purpose)


@pytest.fixture(scope="module")
def watched(tiny_model_dir) -> Watched:
    from arts.policy.backends.transformers import TransformersBackend

    return Watched(TransformersBackend(str(tiny_model_dir), seed=0))


@pytest.fixture(scope="module")
def oc(watched) -> Iterator[openai.OpenAI]:
    with serving(build_app(watched, served_name="tiny")) as url:
        yield openai.OpenAI(base_url=url, api_key="none", max_retries=0)


HI = [{"role": "user", "content": "Say something long."}]
NAMED = {
    "type": "json_schema",
    "json_schema": {
        "name": "Named",
        "schema": {
            "type": "object",
            "properties": {"first_name": {"type": "string"}, "last_name": {"type": "string"}},
            "required": ["first_name", "last_name"],
        },
    },
}


@pytest.mark.parametrize("response_format", [None, NAMED], ids=["text", "schema"])
def test_stream_chunks_arrive_while_the_answer_is_still_being_decoded(oc, watched, response_format):
    extra = {"response_format": response_format} if response_format else {}
    stream = oc.chat.completions.create(
        model="tiny", messages=HI, max_tokens=200, seed=1, stream=True, **extra
    )
    early = content = 0
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            content += 1
            early += not watched.done.is_set()
    assert content >= 20 and early >= 10, (content, early)  # all at the end would give early == 0


@pytest.mark.parametrize("cut", [1, 4])
def test_streamed_text_is_the_plain_answer_even_with_a_stop_string(oc, cut):
    ask = dict(model="tiny", messages=HI, max_tokens=60, seed=5, temperature=0.0)
    whole = oc.chat.completions.create(**ask).choices[0].message.content
    stop = whole[30 : 30 + cut]  # a stop string inside the answer, one and several characters long
    plain = oc.chat.completions.create(**ask, stop=[stop]).choices[0].message.content
    streamed = "".join(
        c.choices[0].delta.content or "" for c in oc.chat.completions.create(**ask, stop=[stop], stream=True)
    )
    assert streamed == plain and stop not in plain and whole.startswith(plain), (streamed, plain, stop)


def test_logprobs_and_top_logprobs_in_the_openai_format(oc):
    ask = dict(
        model="tiny", messages=HI, max_tokens=12, seed=2, temperature=0.0, logprobs=True, top_logprobs=3
    )
    answer = oc.chat.completions.create(**ask)
    content = answer.choices[0].logprobs.content
    assert len(content) == answer.usage.completion_tokens == 12
    for entry in content:
        tops = [t.logprob for t in entry.top_logprobs]
        assert len(tops) == 3 and tops == sorted(tops, reverse=True) and entry.logprob <= 0
        # greedy: the sampled token is the likeliest
        assert entry.token == entry.top_logprobs[0].token and entry.logprob == tops[0]
    assert (
        b"".join(bytes(e.bytes) for e in content).decode(errors="replace")
        == answer.choices[0].message.content
    )
    streamed = [
        e for c in oc.chat.completions.create(**ask, stream=True) if c.choices and c.choices[0].logprobs
        for e in c.choices[0].logprobs.content
    ]  # fmt: skip
    assert [(e.token, e.logprob) for e in streamed] == [(e.token, e.logprob) for e in content]
    bare = oc.chat.completions.create(**{**ask, "top_logprobs": None})
    assert [e.top_logprobs for e in bare.choices[0].logprobs.content] == [[]] * 12


def test_logprobs_that_cannot_be_given_are_a_clear_400(oc, tiny_model_dir, watched):
    with pytest.raises(openai.BadRequestError, match="top_logprobs: needs logprobs: true"):
        oc.chat.completions.create(model="tiny", messages=HI, max_tokens=2, top_logprobs=2)
    with pytest.raises(openai.BadRequestError, match="top_logprobs: .*; give a whole number from 0 to 20"):
        oc.chat.completions.create(model="tiny", messages=HI, max_tokens=2, logprobs=True, top_logprobs=21)
    with serving(build_app(Plain(watched.inner), served_name="tiny")) as url:
        plain = openai.OpenAI(base_url=url, api_key="none", max_retries=0)
        with pytest.raises(openai.BadRequestError, match="plain backend .* /v1/arts/logprobs"):
            plain.chat.completions.create(model="tiny", messages=HI, max_tokens=2, logprobs=True)
        chunks = list(plain.chat.completions.create(model="tiny", messages=HI, max_tokens=5, stream=True))
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")  # streamed whole, without a token hook


@pytest.mark.parametrize("max_tokens", [4, 9, 30])
def test_max_tokens_under_a_schema_ends_with_length_and_usage_adds_up(oc, max_tokens):
    answer = oc.chat.completions.create(
        model="tiny", messages=HI, max_tokens=max_tokens, seed=0, response_format=NAMED, logprobs=True
    )
    choice, usage = answer.choices[0], answer.usage
    assert usage.completion_tokens == len(choice.logprobs.content) <= max_tokens
    assert usage.prompt_tokens + usage.completion_tokens == usage.total_tokens
    assert choice.finish_reason == "length" and usage.completion_tokens == max_tokens, choice
    with pytest.raises(openai.LengthFinishReasonError):
        oc.chat.completions.parse(
            model="tiny", messages=HI, max_tokens=max_tokens, seed=0, response_format=NAMED
        )


def raw_post(base: str, body: bytes) -> tuple[int, str]:
    req = urllib.request.Request(f"{base}/chat/completions", body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())["error"]["message"]


def test_a_400_names_each_wrong_field_and_its_fix_without_library_internals(oc):
    base = str(oc.base_url).rstrip("/")
    cases = {
        b'{"model": "tiny"}': ["messages: Field required; give a list of"],
        b'{"model": "tiny", "messages": [], "temperature": -1, "top_p": 2}': [
            "temperature: Input should be greater than or equal to 0; give a number from 0 (greedy) up",
            "top_p: Input should be less than or equal to 1; give a number above 0 and at most 1",
        ],
        b'{"model": "tiny", "messages": [], "max_tokens": "many"}': ["max_tokens: ", "give a whole number"],
        b'{"model": "tiny", "messages": [], "n": 0}': [
            "n: 0 is out of range; give a whole number from 1 to 64"
        ],
        b'{"model": "tiny", "mess': ["body: not valid JSON"],
    }
    for body, expected in cases.items():
        status, message = raw_post(base, body)
        assert status == 400, (body, message)
        lines = message.splitlines()
        assert all(any(e in line for line in lines) for e in expected), (body, message)
        assert len(lines) == len({line.split(":")[0] for line in lines})  # one line per field
        assert "pydantic" not in message and "http" not in message and "{'" not in message, message


def test_arts_serve_from_the_command_line_answers_the_openai_client(tiny_model_dir, tmp_path):
    port = free_port()
    arts = Path(sys.executable).parent / "arts"
    log = (tmp_path / "serve.log").open("w")
    flags = ["--model", str(tiny_model_dir), "--served-model-name", "tiny", "--port", str(port)]
    argv = [str(arts), "serve", *flags]
    server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None and time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                time.sleep(0.3)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
        answer = client.chat.completions.create(model="tiny", messages=HI, max_tokens=5, seed=0)
        assert answer.usage.completion_tokens == 5 and answer.choices[0].finish_reason == "length"
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.slow
def test_first_token_of_a_200_token_answer_from_the_embedded_model_comes_early(embedded_backend):
    with serving(build_app(embedded_backend, served_name="small")) as url:
        client = openai.OpenAI(base_url=url, api_key="none", max_retries=0)
        ask = "Write a long story about a fox and a river."
        start, first = time.perf_counter(), None
        stream = client.chat.completions.create(
            model="small", messages=[{"role": "user", "content": ask}], max_tokens=200, seed=0, stream=True
        )
        for chunk in stream:
            if first is None and chunk.choices and chunk.choices[0].delta.content:
                first = time.perf_counter() - start
        total = time.perf_counter() - start
        hello = [{"role": "user", "content": "Say hello."}]
        answer = client.chat.completions.create(model="small", messages=hello, max_tokens=60, logprobs=True)
    assert first is not None and first <= 0.3 * total, (first, total)
    choice = answer.choices[0]
    assert len(choice.logprobs.content) == answer.usage.completion_tokens
    pieces = [bytes(e.bytes) for e in choice.logprobs.content]
    assert b"".join(pieces).decode() == choice.message.content, (pieces, choice)
    if choice.finish_reason == "stop":  # the stop token is counted, and shows as nothing
        assert choice.logprobs.content[-1].token == "" and pieces[-1] == b""


def test_two_choices_stream_side_by_side_as_the_plain_answer_gives_them(oc):
    ask = dict(model="tiny", messages=HI, max_tokens=16, seed=9, n=2)
    plain = oc.chat.completions.create(**ask)
    texts, finishes, usage = ["", ""], {}, None
    for c in oc.chat.completions.create(**ask, stream=True, stream_options={"include_usage": True}):
        for choice in c.choices:
            texts[choice.index] += choice.delta.content or ""
            if choice.finish_reason:
                finishes[choice.index] = choice.finish_reason
        usage = c.usage or usage
    assert texts == [ch.message.content for ch in plain.choices]
    assert (
        finishes == {0: "length", 1: "length"}
        and usage.completion_tokens == 32 == plain.usage.completion_tokens
    )


def test_a_closed_stream_stops_decoding_and_frees_the_server(oc, watched):
    stream = oc.chat.completions.create(model="tiny", messages=HI, max_tokens=2000, seed=4, stream=True)
    for k, _ in enumerate(stream):
        if k == 3:
            break
    stream.close()
    assert watched.done.wait(60) and watched.raised == "StreamClosed"  # not decoded to the end
    answer = oc.chat.completions.create(model="tiny", messages=HI, max_tokens=3)
    assert answer.usage.completion_tokens == 3


def test_a_schema_without_a_grammar_is_a_400_and_the_server_keeps_serving(oc):
    for schema, reason in (
        ({"type": "object", "properties": {"a": {"type": "bogus"}}}, 'Unsupported type "bogus"'),
        ({"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}}, "#/nowhere"),
        ({"type": "array"}, "JSON-object schemas only"),
    ):
        fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
        with pytest.raises(openai.BadRequestError) as error:
            oc.chat.completions.create(model="tiny", messages=HI, max_tokens=3, response_format=fmt)
        message = error.value.body["message"]
        assert message.startswith("response_format: ") and reason in message and ".cc" not in message, message
    assert oc.chat.completions.create(model="tiny", messages=HI, max_tokens=3).usage.completion_tokens == 3


def test_an_answer_that_broke_off_is_a_500_not_a_finish_reason_clients_do_not_know(watched):
    """Decoding that stopped on an error (a grammar that rejected a token) is a server error with the
    reason, never `finish_reason: "error"`, which is not one of OpenAI's."""
    from arts.policy.base import Completion

    class Broken(Plain):
        def generate(self, prompts, n=1, sampling=None, schema=None, adapter=None, purpose=""):
            return [[Completion(text='{"a', finish_reason="error", error="grammar rejected token 7")]]

    with serving(build_app(Broken(watched.inner), served_name="tiny")) as url:
        client = openai.OpenAI(base_url=url, api_key="none", max_retries=0)
        with pytest.raises(openai.InternalServerError) as error:
            client.chat.completions.create(model="tiny", messages=HI, max_tokens=3)
    message = error.value.body["message"]
    assert "decoding broke off: grammar rejected token 7" in message and "Traceback" not in message
