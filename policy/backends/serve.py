"""`arts serve`: any `Backend` behind the OpenAI protocol, with vLLM-style runtime LoRA loading.

Why: the scientist model of a run (the local transformers backend plus its current adapter) can then
be used by any OpenAI client — another machine's search (`--backend openai`), an evaluation harness,
curl — and the same client code (`OpenAIBackend`) drives `arts serve` and `vllm serve` alike.

Routes: `GET /health`; `GET /v1/models`; `POST /v1/chat/completions` (messages, n, temperature, top_p,
max_tokens, stop, seed, stream, response_format json_schema or json_object; answers carry `usage`;
errors are OpenAI-shaped JSON objects); `POST /v1/load_lora_adapter`
({lora_name, lora_path}, as vLLM's); the request's `model` selects the base model or a loaded adapter.
Two extensions: `POST /tokenize` ({prompt} → {count}, as vLLM's, without token ids) and
`POST /v1/arts/logprobs` ({model, messages, completion, schema} → {logprobs}), which `OpenAIBackend`
uses for exact, grammar-masked log-probabilities.

JSON schemas arrive as plain JSON, while backends take a pydantic model; `schemas.schema_model` bridges
them.

`json_object` is the JSON-object schema `{"type": "object"}`, which xgrammar compiles to its JSON grammar
restricted to objects (any keys, any JSON values), so even the 135M model returns one.

Streaming (`stream: true`) answers in server-sent events as OpenAI clients expect: a first chunk with the
role at once (so a client sees the request accepted), then the content, a chunk with `finish_reason`,
a usage chunk when `stream_options.include_usage`, and `data: [DONE]`. The backends decode a whole
answer at a time (N samples share one prefill under one grammar), so the content arrives when it is
decoded, in word-sized chunks, not token by token.

Deliberately not done: tools, logprobs on chat answers, unloading adapters, authentication (bind to
127.0.0.1, the default, or put a proxy in front), concurrency (one request at a time: a local model on
a CPU gains nothing from more).
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException

from arts.policy.backends.schemas import schema_model
from arts.policy.base import Backend, BackendError, Completion, Message, Sampling


class ChatRequest(BaseModel):
    """The part of OpenAI's chat-completions request that arts serve honours (others are ignored)."""

    model_config = ConfigDict(extra="ignore")
    model: str
    messages: list[dict[str, Any]]
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    stop: str | list[str] | None = None
    seed: int | None = None
    response_format: dict[str, Any] | None = None
    stream: bool = False
    stream_options: dict[str, Any] | None = None


class LoadAdapterRequest(BaseModel):
    lora_name: str
    lora_path: str
    load_inplace: bool = False


class LogprobsRequest(BaseModel):
    model: str
    messages: list[dict[str, Any]]
    completion: str | list[int]
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    """The JSON schema that constrained the completion (its grammar mask is applied), or None."""


class TokenizeRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    prompt: str


class ApiError(Exception):
    """An error answered in OpenAI's shape: {"error": {"message", "type", "code"}}."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind


def text_of(content: Any) -> str:
    """Message content as text: a string, or the text parts of an OpenAI content list."""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


def to_messages(raw: list[dict[str, Any]]) -> list[Message]:
    return [{"role": str(m.get("role", "user")), "content": text_of(m.get("content"))} for m in raw]


def request_schema(fmt: dict[str, Any] | None) -> type[BaseModel] | None:
    if not fmt or fmt.get("type") == "text":
        return None
    if fmt.get("type") == "json_object":
        return schema_model({"type": "object"}, "JsonObject")
    if fmt.get("type") != "json_schema" or "schema" not in fmt.get("json_schema", {}):
        raise ApiError(
            400,
            'response_format: give {"type": "json_schema", "json_schema": {"schema": {...}}}, '
            '{"type": "json_object"} or {"type": "text"}',
        )
    spec = fmt["json_schema"]
    try:
        return schema_model(spec["schema"], str(spec.get("name") or "Answer"))
    except ValueError as e:
        raise ApiError(400, f"response_format: {e}") from None


def chat_response(model: str, comps: list[Completion]) -> dict[str, Any]:
    choices = [
        {
            "index": i,
            "message": {"role": "assistant", "content": c.text},
            "finish_reason": c.finish_reason or "stop",
        }
        for i, c in enumerate(comps)
    ]
    usage = _usage(comps) | {"prompt_tokens_details": {"cached_tokens": 0}}
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": usage,
    }


def _usage(comps: list[Completion]) -> dict[str, Any]:
    prompt = comps[0].prompt_tokens if comps else 0
    completion = sum(c.completion_tokens for c in comps)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def stream_events(model: str, generate: Any, n: int, include_usage: bool) -> Iterator[str]:
    """Server-sent events of one chat completion: the role at once, then `generate()`'s answers."""
    head = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}  # fmt: skip

    def event(choices: list[dict[str, Any]], **extra: Any) -> str:
        return f"data: {json.dumps({**head, 'choices': choices, **extra})}\n\n"

    yield event([{"index": i, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
                 for i in range(n)])  # fmt: skip
    try:
        comps = generate()
    except ApiError as e:  # the status line is sent; the error goes in the stream, as OpenAI's does
        yield f"data: {json.dumps({'error': {'message': e.message, 'type': e.kind, 'code': e.status}})}\n\n"
        return
    for i, c in enumerate(comps):
        for piece in re.findall(r"\s*\S+|\s+", c.text):
            yield event([{"index": i, "delta": {"content": piece}, "finish_reason": None}])
        yield event([{"index": i, "delta": {}, "finish_reason": c.finish_reason or "stop"}])
    if include_usage:
        yield event([], usage=_usage(comps))
    yield "data: [DONE]\n\n"


def build_app(
    backend: Backend, served_name: str | None = None, adapters: dict[str, str] | None = None
) -> FastAPI:
    """The FastAPI app serving `backend` as `served_name` (default: its model_id), with `adapters`
    ({name: folder}) loaded first."""
    app = FastAPI(title="arts serve")
    started = time.time()
    base = served_name or backend.model_id
    adapters = dict(adapters or {})
    for name, path in adapters.items():
        load_adapter(backend, name, path)
    lock = threading.Lock()  # backends are not thread-safe; requests run in a thread pool

    def adapter_for(model: str) -> str | None:
        if model == base:
            return None
        if model in adapters:
            return model
        raise ApiError(
            404, f"model {model!r} is not served; known: {', '.join([base, *adapters])}", "NotFoundError"
        )

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, e: ApiError) -> JSONResponse:
        return JSONResponse({"error": {"message": e.message, "type": e.kind, "code": e.status}}, e.status)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, e: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(x) for x in err.get('loc', ()) if x != 'body') or 'body'}: {err.get('msg')}"
            for err in e.errors()
        )
        return JSONResponse(
            {"error": {"message": problems, "type": "invalid_request_error", "code": 400}}, 400
        )

    @app.exception_handler(HTTPException)
    async def _http(_: Request, e: HTTPException) -> JSONResponse:  # 404 and 405 as JSON too
        return JSONResponse({"error": {"message": str(e.detail), "type": "invalid_request_error",
                                       "code": e.status_code}}, e.status_code)  # fmt: skip

    @app.exception_handler(Exception)
    async def _crash(_: Request, e: Exception) -> JSONResponse:
        message = f"internal error: {type(e).__name__}: {e}"
        return JSONResponse({"error": {"message": message, "type": "server_error", "code": 500}}, 500)

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "model": base, "adapters": sorted(adapters)}

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        created = int(started)
        entry = {"object": "model", "created": created, "owned_by": "arts"}
        data = [{"id": base, **entry, "root": backend.model_id, "parent": None}]
        data += [{"id": k, **entry, "root": p, "parent": base} for k, p in adapters.items()]
        return {"object": "list", "data": data}

    @app.post("/v1/chat/completions", response_model=None)
    def chat(req: ChatRequest) -> dict[str, Any] | StreamingResponse:
        adapter, schema = adapter_for(req.model), request_schema(req.response_format)
        stop = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
        max_tokens = req.max_completion_tokens or req.max_tokens or Sampling().max_tokens
        try:
            sampling = Sampling(
                temperature=req.temperature, top_p=req.top_p, max_tokens=max_tokens, stop=stop, seed=req.seed
            )
        except ValidationError as e:
            raise ApiError(400, str(e)) from None
        if not 1 <= req.n <= 64:
            raise ApiError(400, "n must be between 1 and 64")

        def generate() -> list[Completion]:
            with lock:
                try:
                    out = backend.generate(
                        to_messages(req.messages), n=req.n, sampling=sampling, schema=schema, adapter=adapter
                    )
                except (ValueError, BackendError) as e:  # e.g. the prompt does not fit the context
                    raise ApiError(400, str(e)) from None
            return out[0]

        if req.stream:
            usage = bool((req.stream_options or {}).get("include_usage"))
            events = stream_events(req.model, generate, req.n, usage)
            return StreamingResponse(events, media_type="text/event-stream")
        return chat_response(req.model, generate())

    @app.post("/v1/load_lora_adapter")
    def load_lora_adapter(req: LoadAdapterRequest) -> PlainTextResponse:
        if req.lora_name == base:
            raise ApiError(400, f"the adapter name {req.lora_name!r} is the base model's name")
        if req.lora_name in adapters and not req.load_inplace:
            raise ApiError(400, f"adapter {req.lora_name!r} is loaded; send load_inplace=true to replace it")
        with lock:
            try:
                load_adapter(backend, req.lora_name, req.lora_path)
            except (BackendError, OSError, ValueError) as e:
                raise ApiError(
                    400, f"cannot load adapter {req.lora_name!r} from {req.lora_path}: {e}"
                ) from None
        adapters[req.lora_name] = req.lora_path
        return PlainTextResponse(f"Success: LoRA adapter '{req.lora_name}' added successfully.")

    @app.post("/tokenize")
    def tokenize(req: TokenizeRequest) -> dict[str, int]:
        return {"count": backend.count_tokens(req.prompt)}

    @app.post("/v1/arts/logprobs")
    def logprobs(req: LogprobsRequest) -> dict[str, list[float]]:
        adapter = adapter_for(req.model)
        try:
            schema = schema_model(req.schema_) if req.schema_ else None
        except ValueError as e:
            raise ApiError(400, f"schema: {e}") from None
        with lock:
            try:
                values = backend.logprobs(
                    to_messages(req.messages), req.completion, schema=schema, adapter=adapter
                )
            except NotImplementedError as e:
                raise ApiError(501, str(e), "not_implemented") from None
            except (ValueError, BackendError) as e:
                raise ApiError(400, str(e)) from None
        return {"logprobs": [float(v) for v in values]}

    return app


def load_adapter(backend: Backend, name: str, path: str) -> None:
    """Load a LoRA adapter into a backend that can (the contract leaves loading to each backend)."""
    load = getattr(backend, "load_adapter", None)
    if load is None:
        raise BackendError(f"the {backend.name} backend cannot load LoRA adapters")
    load(name, path)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`arts serve`'s flags (the `arts` command adds them to its `serve` sub-command)."""
    p.add_argument("--model", default=None, help="model folder, .gguf file or HF id (default: embedded)")
    p.add_argument(
        "--backend", default="transformers", help="backend running the model (default: transformers)"
    )
    p.add_argument(
        "--adapter", default=None, help="LoRA adapter folder to load, e.g. runs/<id>/adapters/<k>/"
    )
    p.add_argument("--adapter-name", default="adapter", help="the model name that selects --adapter")
    p.add_argument("--served-model-name", default=None, help="the base model's name in requests")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default: loopback only)")
    p.add_argument("--port", type=_port, default=8000, help="TCP port, 1-65535 (default 8000)")
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="arts serve", description="Serve a model through the OpenAI protocol.")
    add_arguments(p)
    return p.parse_args(argv)


def _port(text: str) -> int:
    """A TCP port from the command line, or argparse's one-line error naming the range."""
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port; give a number from 1 to 65535")
    return int(text)


def app_from_args(args: argparse.Namespace) -> FastAPI:
    """The backend named by `--backend` on `--model`, with `--adapter` loaded, as an app."""
    from arts.policy.backends.registry import backend_class

    cls = backend_class(args.backend)
    backend = cls(args.model) if args.model else cls()
    adapters = {args.adapter_name: args.adapter} if args.adapter else None
    return build_app(backend, args.served_model_name, adapters)


def serve(args: argparse.Namespace) -> None:
    """Build the backend, load `--adapter` if given, serve until interrupted."""
    import uvicorn

    app = app_from_args(args)
    print(f"arts serve: http://{args.host}:{args.port}/v1  (GET /health when ready)", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)


def main(argv: list[str] | None = None) -> None:
    """`python -m arts.policy.backends.serve`: the same as `arts serve`."""
    serve(parse_args(argv))
