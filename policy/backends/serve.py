"""`arts serve`: any `Backend` behind the OpenAI protocol, with vLLM-style runtime LoRA loading.

Why: the scientist model of a run (the local transformers backend plus its current adapter) can then
be used by any OpenAI client — another machine's search (`--backend openai`), an evaluation harness,
curl — and the same client code (`OpenAIBackend`) drives `arts serve` and `vllm serve` alike.

Routes: `GET /health`; `GET /v1/models`; `POST /v1/chat/completions` (messages, n, temperature, top_p,
max_tokens, stop, seed, stream, logprobs, top_logprobs, response_format json_schema or json_object;
answers carry `usage`; errors are OpenAI-shaped JSON objects, a line per wrong field naming the fix);
`POST /v1/load_lora_adapter` ({lora_name, lora_path}, as vLLM's); the request's `model` selects the base
model or a loaded adapter.
Two extensions: `POST /tokenize` ({prompt} → {count}, as vLLM's, without token ids) and
`POST /v1/arts/logprobs` ({model, messages, completion, schema} → {logprobs}), which `OpenAIBackend`
uses for exact, grammar-masked log-probabilities.

JSON schemas arrive as plain JSON, while backends take a pydantic model; `schemas.schema_model` bridges
them.

`json_object` is the JSON-object schema `{"type": "object"}`, which xgrammar compiles to its JSON grammar
restricted to objects (any keys, any JSON values), so even the 135M model returns one.

`max_tokens` counts every token of a completion, grammar-forced ones included, so under a schema an
answer stops there with `finish_reason: "length"` and `usage` counts the tokens it returned. Log-probs
are those the backend recorded while sampling (temperature 1, after the grammar mask; temperature and
top-p not applied), with `top_logprobs` alternatives from the same distribution; a backend that cannot
give them answers 400. Streaming (`stream: true`) sends the role at once, then each token's text as it
is decoded (`policy.backends.chat_wire`).

Deliberately not done: tools, unloading adapters, authentication (bind to 127.0.0.1, the default, or
put a proxy in front), concurrency (one request at a time: a local model on a CPU gains nothing from
more).
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from arts.policy.backends.chat_request import (
    ChatRequest,
    field_problems,
    logprob_request,
    request_schema,
    sampling_of,
    takes,
    to_messages,
    token_bytes,
    token_decoder,
)
from arts.policy.backends.chat_wire import ApiError, StreamClosed, chat_response, stream_events
from arts.policy.backends.schemas import schema_model
from arts.policy.base import Backend, BackendError, Completion


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
        return JSONResponse(e.body(), e.status)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, e: RequestValidationError) -> JSONResponse:
        return JSONResponse(ApiError(400, field_problems(e.errors())).body(), 400)

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
        adapter, schema = adapter_for(req.model), request_schema(req.response_format, backend)
        sampling = sampling_of(req)
        top = logprob_request(backend, req)
        extra: dict[str, Any] = {"top_logprobs": top} if top is not None else {}
        per_token = token_bytes(backend) if top is not None else None

        def generate(on_tokens: Any = None) -> list[Completion]:
            live = {"on_tokens": on_tokens} if on_tokens is not None else {}
            with lock:
                try:
                    out = backend.generate(
                        to_messages(req.messages), n=req.n, sampling=sampling, schema=schema, adapter=adapter,
                        **extra, **live,
                    )  # fmt: skip
                except (ValueError, BackendError) as e:  # e.g. the prompt does not fit the context
                    raise ApiError(400, str(e)) from None
                except (StreamClosed, ApiError):
                    raise
                except Exception as e:  # answered here: starlette's last-resort handler drops the connection
                    raise ApiError(500, f"internal error: {type(e).__name__}: {e}", "server_error") from e
            broken = next((c for c in out[0] if c.finish_reason == "error"), None)
            if broken is not None:  # not a finish_reason OpenAI's clients know: the answer broke off
                raise ApiError(
                    500, f"decoding broke off: {broken.error}; nothing was returned", "server_error"
                )
            return out[0]

        if req.stream:
            usage = bool((req.stream_options or {}).get("include_usage"))
            live = takes(backend.generate, "on_tokens") and hasattr(backend, "tokenizer")
            events = stream_events(
                req.model, generate, req.n, usage, decode=token_decoder(backend), stop=[] if schema else sampling.stop,
                live=live, logprobs=per_token,
            )  # fmt: skip
            return StreamingResponse(events, media_type="text/event-stream")
        return chat_response(req.model, generate(), per_token)

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
