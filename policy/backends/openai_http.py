"""One OpenAI-compatible server as `OpenAIBackend` reaches it: the openai client with our retries, and API
errors turned into messages that say what to do.

The client's own retries are off: connection errors, 429 and 5xx are retried here with exponential
backoff, and a server that stays down ends in a `BackendError` saying how to start it; a 501 ("not
implemented") is never retried, it will not change. What a request asks (chat, tokens, logprobs, adapters)
and what to do when a server rejects a schema are the backend's (`openai`); nothing here builds a request.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import openai

from arts.policy.base import BackendError

log = logging.getLogger(__name__)

RETRYABLE = (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError)
"""Errors a later attempt may not meet: the server is starting, busy or briefly failing."""
REJECTED = (openai.BadRequestError, openai.UnprocessableEntityError)
"""Errors that reject the request itself: sending it again as it is would fail again."""


class Http:
    """Calls to the server at `base_url` (ending in /v1) with retries; `model` names the served model in
    error messages when a call names none."""

    def __init__(
        self, base_url: str, model: str, api_key: str, timeout_s: float, max_retries: int, backoff_s: float
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout_s)

    def call(self, fn: Callable[..., Any], **kwargs: Any) -> Any:
        """`fn(**kwargs)`, retried with exponential backoff on connection errors, 429 and 5xx."""
        delay = self.backoff_s
        for attempt in range(self.max_retries + 1):
            try:
                return fn(**kwargs)
            except RETRYABLE as e:
                if getattr(e, "status_code", None) == 501:
                    raise  # "not implemented" will not change on a retry
                if attempt == self.max_retries:
                    raise self.error(e, kwargs.get("model", self.model)) from None
                log.info("%s: %s; retrying in %.2fs", self.base_url, type(e).__name__, delay)
                time.sleep(delay)
                delay *= 2

    def error(self, e: openai.APIError, model: str) -> BackendError:
        """The BackendError for an API error: how to reach the server, or which model names it serves."""
        if isinstance(e, openai.APIConnectionError):
            reason = e.__cause__ or e
            return BackendError(
                f"cannot reach {self.base_url}: {reason}; start the server "
                f"(e.g. `arts serve` or `vllm serve ...`) or fix --base-url"
            )
        if isinstance(e, openai.NotFoundError):
            return BackendError(
                f"{self.base_url} has no model {model!r} ({e.message}); pass a served model name "
                f"(GET {self.base_url}/models lists them) or load the adapter first"
            )
        status = getattr(e, "status_code", "?")
        return BackendError(f"{self.base_url} answered {status} for model {model!r}: {e.message}")

    def post(self, url: str, body: dict[str, Any], cast_to: type) -> Any:
        """A POST of `body` to `url` (outside the typed API: `/tokenize`, `/load_lora_adapter`), retried."""
        return self.call(self.client.post, path=url, body=body, cast_to=cast_to)

    def checked(self, fn: Callable[[], Any], model: str) -> Any:
        """`fn()` with API errors turned into a BackendError, except "not offered" ones: a 404 passes
        through, and a 501 becomes NotImplementedError with the server's reason."""
        try:
            return fn()
        except openai.NotFoundError:
            raise
        except openai.APIStatusError as e:
            if e.status_code == 501:
                raise NotImplementedError(f"{self.base_url}: {e.message}") from None
            raise self.error(e, model) from None
        except openai.APIError as e:
            raise self.error(e, model) from None
