"""OpenAIBackend against `arts serve` on loopback, with real local transformers backends behind it.

The plumbing (n, seeds, stop, usage, adapters, errors, fallbacks) runs on the tiny random model; one
test serves the real embedded model and checks a schema-constrained answer end to end. Servers run
in a uvicorn thread on a free 127.0.0.1 port. ASGI wrappers stand in for servers that reject
`response_format` or ignore `n`, and a small stub speaks vLLM's logprob protocol: those tests are about
the client's handling of such servers, so the model behind them stays real where it matters.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from arts.policy.backends.openai import OpenAIBackend
from arts.policy.backends.serve import app_from_args, build_app, parse_args, schema_model
from arts.policy.base import BackendError, Sampling, Usage
from arts.policy.parsing import schema_key
from tests.doubles import free_port, serving


class Pick(BaseModel):
    label: Literal["alpha", "beta"]
    keep: bool


class Nested(BaseModel):
    pick: Pick
    tags: list[Literal["x", "y"]] = Field(max_length=2)


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    from arts.policy.backends.transformers import TransformersBackend

    return TransformersBackend(str(tiny_model_dir), seed=0)


@pytest.fixture(scope="module")
def tiny_url(tiny) -> Iterator[str]:
    with serving(build_app(tiny, served_name="tiny")) as url:
        yield url


def client(url: str, model: str = "tiny", **kwargs: Any) -> OpenAIBackend:
    return OpenAIBackend(url, model, backoff_s=0.01, **kwargs)


def test_n_samples_seed_and_usage(tiny_url):
    seen: list[Usage] = []
    backend = client(tiny_url, usage_sink=seen.append)
    sampling = Sampling(temperature=1.0, max_tokens=6, seed=7)
    [first] = backend.generate("Say something.", n=3, sampling=sampling, purpose="propose")
    [again] = backend.generate("Say something.", n=3, sampling=sampling)
    assert len(first) == 3 and backend.n_supported
    assert [c.text for c in first] == [c.text for c in again]  # the seed reaches the server
    assert len({c.text for c in first}) > 1  # but the n samples differ from one another
    usage = seen[0]
    assert usage.backend == "openai" and usage.purpose == "propose" and usage.model == "tiny"
    assert usage.prompt_tokens > 0 and usage.completion_tokens == sum(c.completion_tokens for c in first)
    assert 0 < usage.completion_tokens <= 18 and usage.wall_s > 0


def test_requests_sent_at_once_get_what_each_gets_alone(tiny_url):
    """`generate_each`: requests with their own schema, n, seed and purpose go out together; each gets
    the answers of its own call, and usage is reported once per request from the calling thread."""
    import threading

    from arts.policy.base import Request

    seen: list[tuple[str, bool]] = []
    backend = client(
        tiny_url, usage_sink=lambda u: seen.append((u.purpose, threading.current_thread() is main))
    )
    main = threading.current_thread()
    requests = [
        Request("Say something.", n=2, sampling=Sampling(temperature=1.0, max_tokens=6, seed=3), purpose="a"),
        Request("Pick one.", sampling=Sampling(temperature=0, max_tokens=40), schema=Pick, purpose="b"),
        Request("Anything.", sampling=Sampling(temperature=0, max_tokens=5), purpose="c"),
    ]
    together = backend.generate_each(requests)
    assert sorted(seen) == [("a", True), ("b", True), ("c", True)]
    for r, comps in zip(requests, together, strict=True):
        alone = backend.generate(r.prompt, r.n, r.sampling, r.schema, r.adapter, r.purpose)[0]
        assert [c.text for c in comps] == [c.text for c in alone]
        assert [c.ok for c in comps] == [c.ok for c in alone]


def test_stop_string_cuts_the_text(tiny_url):
    backend = client(tiny_url)
    seeded = Sampling(temperature=1.0, max_tokens=12, seed=11)
    [[full]] = backend.generate("Count.", sampling=seeded)
    stop = next(ch for i, ch in enumerate(full.text) if i >= 2 and not ch.isspace())
    [[cut]] = backend.generate("Count.", sampling=seeded.model_copy(update={"stop": [stop]}))
    assert cut.text == full.text[: full.text.index(stop)]


def test_response_format_constrains_flat_and_nested_schemas(tiny_url):
    backend = client(tiny_url)
    for schema, n in ((Pick, 2), (Nested, 1)):
        [answers] = backend.generate("Choose.", n=n, sampling=Sampling(max_tokens=48, seed=1), schema=schema)
        assert len(answers) == n
        assert all(a.ok and isinstance(a.parsed, schema) and a.constrained for a in answers), answers
    assert not backend.rejected_schemas


def test_schema_model_is_exact_when_flat_and_verbatim_otherwise():
    flat = schema_model(Pick.model_json_schema(), "Pick")
    assert flat.model_validate({"label": "beta", "keep": False}).label == "beta"
    with pytest.raises(ValueError):
        flat.model_validate({"label": "gamma", "keep": False})
    nested = schema_model(Nested.model_json_schema(), "Nested")
    assert nested.model_json_schema() == Nested.model_json_schema()
    with pytest.raises(ValueError, match="object"):
        schema_model({"type": "array"})


def without_response_format(app: Any, calls: list[dict[str, Any]]) -> Any:
    """An ASGI wrapper that answers 400 to any chat request with response_format, like servers that
    do not support it; it records every chat request body."""

    async def wrapped(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/chat/completions"):
            return await app(scope, receive, send)
        body, more = b"", True
        while more:
            message = await receive()
            body, more = body + message.get("body", b""), message.get("more_body", False)
        calls.append(json.loads(body))
        if "response_format" in calls[-1]:
            error = {"error": {"message": "response_format is not supported", "type": "BadRequestError"}}
            return await JSONResponse(error, 400)(scope, receive, send)

        async def replay() -> dict:
            return {"type": "http.request", "body": body, "more_body": False}

        await app(scope, replay, send)

    return wrapped


def test_rejected_response_format_falls_back_to_prompt_parse_and_retry(tiny):
    calls: list[dict[str, Any]] = []
    with serving(without_response_format(build_app(tiny, "tiny"), calls)) as url:
        backend = client(url, schema_retries=1)
        [[answer]] = backend.generate("Choose.", sampling=Sampling(max_tokens=8, seed=3), schema=Pick)
    assert backend.rejected_schemas == {schema_key(Pick)}
    # Rejected, then asked with the schema in the prompt, then asked once more (random text never parses).
    assert len(calls) == 3 and "response_format" not in calls[1]
    assert "JSON schema" in calls[1]["messages"][-1]["content"] and calls[2]["seed"] != calls[1]["seed"]
    assert not answer.ok and answer.parsed is None and not answer.constrained and answer.error


class Quirky:
    """The real backend behind a server that always returns one choice and has no masked logprobs."""

    def __init__(self, inner: Any):
        self.inner, self.name, self.model_id = inner, inner.name, inner.model_id

    def generate(self, prompts: Any, n: int = 1, **kwargs: Any) -> Any:
        return self.inner.generate(prompts, n=1, **kwargs)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def logprobs(self, *args: Any, **kwargs: Any) -> list[float]:
        raise NotImplementedError("no grammar-masked logprobs here")


def test_ignored_n_falls_back_to_separate_calls(tiny):
    with serving(build_app(Quirky(tiny), "tiny")) as url:
        backend = client(url)
        [samples] = backend.generate("Say something.", n=3, sampling=Sampling(max_tokens=5, seed=2))
        with pytest.raises(NotImplementedError, match="no grammar-masked logprobs here"):
            backend.logprobs("Say something.", "x", schema=Pick)  # a 501, not retried
    assert len(samples) == 3 and not backend.n_supported
    assert len({c.text for c in samples}) > 1  # seeds seed+0, seed+1, seed+2: not one sample thrice


def test_down_server_fails_fast_with_a_clear_error():
    url = f"http://127.0.0.1:{free_port()}/v1"
    start = time.monotonic()
    with pytest.raises(BackendError, match=r"cannot reach .*127\.0\.0\.1.*arts serve.*--base-url"):
        client(url, max_retries=2).generate("hello")
    assert time.monotonic() - start < 5


def test_unknown_model_is_a_backend_error(tiny_url):
    with pytest.raises(BackendError, match="no model 'nope'"):
        client(tiny_url, "nope").generate("hello", sampling=Sampling(max_tokens=2))


@pytest.fixture(scope="module")
def tiny_adapter(tiny, tmp_path_factory) -> Path:
    """A LoRA adapter folder for the tiny model with random (non-zero) B matrices, as TTT writes them."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    folder = tmp_path_factory.mktemp("run") / "adapters" / "1"
    donor = AutoModelForCausalLM.from_pretrained(tiny.path)
    config = LoraConfig(r=4, lora_alpha=64, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(donor, config).save_pretrained(folder)
    return folder


def test_loaded_adapter_changes_logprobs_and_text(tiny, tiny_url, tiny_adapter):
    backend = client(tiny_url)
    backend.load_adapter("ttt", tiny_adapter)
    served = [m.id for m in backend._client.models.list().data]
    assert served == ["tiny", "ttt"]
    greedy = Sampling(temperature=0.0, max_tokens=8)
    [[base]] = backend.generate("Propose an experiment.", sampling=greedy)
    [[tuned]] = backend.generate("Propose an experiment.", sampling=greedy, adapter="ttt")
    lp_base = backend.logprobs("Propose an experiment.", base.text)
    lp_tuned = backend.logprobs("Propose an experiment.", base.text, adapter="ttt")
    assert len(lp_base) == len(lp_tuned) > 0 and lp_base != pytest.approx(lp_tuned, abs=1e-3)
    assert tuned.text != base.text
    assert lp_base == pytest.approx(tiny.logprobs("Propose an experiment.", base.text), abs=1e-5)


def test_logprobs_with_schema_replay_the_grammar_mask(tiny, tiny_url):
    backend = client(tiny_url)
    [[answer]] = backend.generate("Choose.", sampling=Sampling(max_tokens=16, seed=5), schema=Pick)
    remote = backend.logprobs("Choose.", answer.text, schema=Pick)
    assert remote == pytest.approx(tiny.logprobs("Choose.", answer.text, schema=Pick), abs=1e-5)
    assert remote != pytest.approx(tiny.logprobs("Choose.", answer.text), abs=1e-3)  # the mask matters
    assert backend.count_tokens("four score and seven") == tiny.count_tokens("four score and seven")


def vllm_like_stub(prompt_ids: list[int]) -> FastAPI:
    """vLLM's /tokenize and prompt_logprobs shapes (as in vllm 0.33's serving code), scripted values."""
    app = FastAPI()

    @app.get("/v1/models")
    def models() -> dict:
        return {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "vllm"}]}

    @app.post("/tokenize")
    def tokenize(body: dict) -> dict:
        tokens = prompt_ids if "messages" in body else [500 + len(w) for w in body["prompt"].split()]
        return {"count": len(tokens), "max_model_len": 2048, "tokens": tokens}

    @app.post("/v1/completions")
    def completions(body: dict) -> dict:
        assert body["prompt_logprobs"] == 0 and body["max_tokens"] == 1
        rows = [None] + [{str(t): {"logprob": -i / 10, "rank": 1}} for i, t in enumerate(body["prompt"]) if i]
        choice = {"index": 0, "text": "", "finish_reason": "length", "prompt_logprobs": rows}
        return {"id": "c", "object": "text_completion", "created": 0, "model": "m", "choices": [choice]}

    return app


def test_vllm_prompt_logprobs_are_read_for_the_completion():
    with serving(vllm_like_stub([1, 2, 3])) as url:
        backend = OpenAIBackend(url, "m", backoff_s=0.01)
        assert backend.logprobs("hi", "ab cde") == [-0.3, -0.4]  # positions 3 and 4, tokens 502 and 503
        assert backend.logprobs("hi", [9]) == [-0.3]
        with pytest.raises(NotImplementedError, match="arts serve"):
            backend.logprobs("hi", "ab", schema=Pick)


def test_server_without_logprobs_says_which_backend_has_them():
    app = FastAPI()
    app.get("/v1/models")(
        lambda: {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "x"}]}
    )
    with serving(app) as url:
        backend = OpenAIBackend(url, "m", backoff_s=0.01)
        with pytest.raises(NotImplementedError, match="transformers or vllm backend"):
            backend.logprobs("hi", "there")
        assert backend.count_tokens("abcdefgh") == 2  # no /tokenize: estimated


def test_real_embedded_model_answers_in_the_schema(embedded_backend):
    with serving(build_app(embedded_backend)) as url:
        backend = OpenAIBackend(url, embedded_backend.model_id, backoff_s=0.01)
        prompt = (
            "Is a smaller learning rate worth testing? Pick alpha (yes) or beta (no), and whether to keep it."
        )
        [[answer]] = backend.generate(prompt, sampling=Sampling(temperature=0.0, max_tokens=24), schema=Pick)
    assert answer.ok and isinstance(answer.parsed, Pick) and answer.constrained, answer
    assert json.loads(answer.text) == answer.parsed.model_dump()


def test_arts_serve_flags_serve_an_adapter_folder(tiny, tiny_adapter):
    argv = ["--model", str(tiny.path), "--adapter", str(tiny_adapter), "--adapter-name", "step1"]
    args = parse_args([*argv, "--served-model-name", "tiny", "--port", "8123"])
    assert (args.host, args.port, args.backend) == ("127.0.0.1", 8123, "transformers")
    with serving(app_from_args(args)) as url:
        backend = client(url)
        assert [m.id for m in backend._client.models.list().data] == ["tiny", "step1"]
        [[c]] = backend.generate("Hi.", sampling=Sampling(max_tokens=3, seed=0), adapter="step1")
    assert c.completion_tokens > 0


def test_streaming_through_the_openai_client_matches_the_plain_answer(tiny_url):
    import openai

    oc = openai.OpenAI(base_url=tiny_url, api_key="none", max_retries=0)
    ask = dict(model="tiny", messages=[{"role": "user", "content": "Say hi."}], max_tokens=12, seed=3)
    plain = oc.chat.completions.create(**ask).choices[0].message.content
    chunks = list(oc.chat.completions.create(**ask, stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == plain and len([c for c in chunks if c.choices and c.choices[0].delta.content]) >= 2
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] in (
        ["stop"],
        ["length"],
    )
    assert chunks[-1].usage.completion_tokens > 0 and not chunks[-1].choices


def test_json_object_answers_are_json_objects(tiny_url):
    import openai

    oc = openai.OpenAI(base_url=tiny_url, api_key="none", max_retries=0)
    answer = oc.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "JSON please."}], max_tokens=40, seed=0,
        response_format={"type": "json_object"},
    )  # fmt: skip
    choice = answer.choices[0]
    if choice.finish_reason == "stop":  # a random model may run out of tokens inside the object
        assert isinstance(json.loads(choice.message.content), dict)
    assert choice.message.content.startswith("{")


def http(method: str, url: str, body: Any = None) -> tuple[int, dict[str, Any]]:
    """(status, JSON body) of one plain HTTP request, errors included."""
    import urllib.error
    import urllib.request

    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data, {"Content-Type": "application/json"}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_health_models_and_errors_are_json(tiny_url):
    root = tiny_url.removesuffix("/v1")
    code, health = http("GET", f"{root}/health")  # other tests may have loaded adapters into this server
    assert code == 200 and health["status"] == "ok" and health["model"] == "tiny"
    entry = http("GET", f"{tiny_url}/models")[1]["data"][0]
    assert entry["id"] == "tiny" and isinstance(entry["created"], int) and entry["created"] > 1.7e9
    for method, path, body, status in (
        ("GET", "/v1/nothing", None, 404),
        ("POST", "/v1/chat/completions", {"model": "tiny"}, 400),
        ("POST", "/v1/chat/completions", {"model": "nope", "messages": []}, 404),
        (
            "POST",
            "/v1/chat/completions",
            {"model": "tiny", "messages": [], "response_format": {"type": "x"}},
            400,
        ),
    ):
        code, answer = http(method, root + path, body)
        error = answer["error"]
        assert code == status and isinstance(error["message"], str), answer
        assert "[{'" not in error["message"] and "Traceback" not in error["message"]  # no repr
    missing = http("POST", f"{tiny_url}/chat/completions", {"model": "tiny"})[1]["error"]["message"]
    assert missing == 'messages: Field required; give a list of {"role": ..., "content": ...} objects'
