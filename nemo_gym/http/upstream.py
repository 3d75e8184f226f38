"""The upstream LLM as model servers call it: a client for an OpenAI-compatible API, and the bounds and
manners every model server keeps with it (deadline, attempts, calls in flight, the key kept out of error
bodies, an invalid 2xx answer turned into a 502 that names its problems)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import logging
from collections.abc import AsyncIterator
from typing import Any, ClassVar, TypeVar

import orjson
from pydantic import BaseModel, Field, PrivateAttr, SecretStr, ValidationError
from yarl import URL

from nemo_gym.config.old_keys import AcceptsOldKeyNames
from nemo_gym.http.client import (
    DEFAULT_DEADLINE_S,
    HTTPStatusError,
    RetryPolicy,
    checked_json,
    default_retry_policy,
    request,
)
from nemo_gym.http.errors import GymError
from nemo_gym.wire.validation_errors import describe_validation_error

logger = logging.getLogger("nemo_gym.upstream")

RATE_LIMIT_ERROR_CODES = [429, 502, 503, 504, 520]
RETRY_ERROR_CODES = RATE_LIMIT_ERROR_CODES + [500]

DEFAULT_MAX_ATTEMPTS = 5
# Keys shorter than this are placeholders ("EMPTY", "dummy"); masking them would only garble error text.
MIN_MASKED_KEY_CHARS = 8
MAX_REPORTED_PROBLEMS = 3

Client = TypeVar("Client", bound="NeMoGymAsyncOpenAI")
Answer = TypeVar("Answer", bound=BaseModel)


# How an OpenAI-compatible API says the key is wrong, or its budget spent: no retry can help.
INVALID_KEY_CODES = frozenset({"invalid_api_key", "invalid_api_token", "authentication_error"})
INVALID_KEY_TEXTS = ("invalid api key", "incorrect api key")
SPENT_QUOTA_CODES = frozenset({"budget_exceeded", "insufficient_quota"})


class PermanentEndpointError(HTTPStatusError):
    """The upstream refused the key (invalid, or its quota spent). The client that got this answer fails
    every later call with it at once, without calling the upstream again: retrying for hours cannot help."""


def is_permanent_refusal(status: int, body: bytes) -> bool:
    """A 401/403 saying the key is invalid, or a 429 saying the budget is spent."""
    if status not in (401, 403, 429):
        return False
    try:
        error = orjson.loads(body).get("error")
    except (orjson.JSONDecodeError, AttributeError):
        error = None
    labels = {str(error.get(key)) for key in ("code", "type")} if isinstance(error, dict) else set()
    if status == 429:
        return bool(labels & SPENT_QUOTA_CODES)
    text = body.decode("utf-8", errors="replace").lower()
    return bool(labels & INVALID_KEY_CODES) or any(phrase in text for phrase in INVALID_KEY_TEXTS)


@functools.lru_cache(maxsize=256)
def _client_retry_policy(base: RetryPolicy, max_attempts: int, timeout: float) -> RetryPolicy:
    """A client's policy over the deployment's default (made once per combination: every call asks)."""
    return base.with_overrides(
        max_attempts=max_attempts,
        deadline_s=timeout,
        retry_statuses=RETRY_ERROR_CODES,
        is_final=is_permanent_refusal,
    )


@functools.lru_cache(maxsize=256)
def _authorization(base_url: str, api_key: str) -> dict[str, str]:
    """The key goes as a bearer token, unless the base URL carries a user and password: then, as with
    the OpenAI client, those are sent (Basic) instead, since a request has one Authorization."""
    if api_key and not URL(base_url).raw_user:
        return {"Authorization": f"Bearer {api_key}"}
    return {}


class NeMoGymAsyncOpenAI(AcceptsOldKeyNames):
    """Minimal async client for an OpenAI-compatible upstream (OpenAI, vLLM, ...), returning plain JSON.

    Statuses in RETRY_ERROR_CODES are retried with exponential backoff and jitter, honouring
    `Retry-After`, for at most `max_attempts` attempts within `timeout` seconds in all; any other non-2xx
    status raises `HTTPStatusError` at once, carrying the upstream's body. A reply that breaks off, is
    not HTTP or not JSON, or is not whole by `timeout` raises the `RequestFailedError` saying so (a 502
    or 504 in a Gym server's answer). An invalid key or a spent quota raises `PermanentEndpointError`,
    now and on every later call of this client, which then makes no request at all (NeMo Gym 0.7).
    """

    OLD_KEY_NAMES: ClassVar[dict[str, str]] = {"max_retries": "max_attempts"}

    base_url: str
    api_key: str = Field(default="", repr=False)
    internal: bool = False
    default_headers: dict[str, str] = Field(default_factory=dict, repr=False)
    max_attempts: int = Field(default=DEFAULT_MAX_ATTEMPTS, ge=1)
    timeout: float = Field(default=DEFAULT_DEADLINE_S, gt=0)

    _refused: PermanentEndpointError | None = PrivateAttr(default=None)

    def _retry_policy(self) -> RetryPolicy:
        return _client_retry_policy(default_retry_policy(), self.max_attempts, self.timeout)

    def _headers(self) -> dict[str, str]:
        return {**self.default_headers, **_authorization(self.base_url, self.api_key)}

    def auth_headers(self) -> dict[str, str]:
        """The headers every call of this client sends, the key's included: for a side call made as the
        same caller (a proxy's stats, say), never for a log."""
        return self._headers()

    async def _call(self, method: str, url: str, body: dict[str, Any] | None = None) -> Any:
        if self._refused is not None:
            raise copy.copy(self._refused)
        response = await request(
            method,
            url,
            json=body,
            headers=self._headers(),
            retry_policy=self._retry_policy(),
            _internal=self.internal,
        )
        answer = await response.read()
        if is_permanent_refusal(response.status, answer):
            self._refused = PermanentEndpointError(response, answer)
            logger.error(
                "[model_retry_stop url=%s status=%d] the upstream refused the key; every later call of this "
                "client fails at once",
                self._refused.url,
                response.status,
            )
            raise copy.copy(self._refused)
        return await checked_json(response)

    async def create_response(self, **body: Any) -> dict[str, Any]:
        return await self._call("POST", f"{self.base_url.rstrip('/')}/responses", body)

    async def create_chat_completion(self, **body: Any) -> dict[str, Any]:
        return await self._call("POST", f"{self.base_url.rstrip('/')}/chat/completions", body)

    async def create_tokenize(self, **body: Any) -> dict[str, Any]:
        """vLLM's `/tokenize` lives beside `/v1`, not under it."""
        root = self.base_url.rstrip("/").removesuffix("/v1")
        return await self._call("POST", f"{root}/tokenize", body)

    async def create_models(self) -> dict[str, Any]:
        return await self._call("GET", f"{self.base_url.rstrip('/')}/models")


class UpstreamCallConfig(AcceptsOldKeyNames):
    """The config keys bounding a model server's upstream calls, the same in every model server."""

    OLD_KEY_NAMES: ClassVar[dict[str, str]] = {"max_retries": "max_attempts"}

    max_concurrent_requests: int | None = Field(
        default=None, ge=1, description="upstream calls in flight per server process; null = no cap"
    )
    max_attempts: int = Field(
        default=DEFAULT_MAX_ATTEMPTS,
        ge=1,
        description="attempts per call in all, first one included (old name, still accepted: max_retries)",
    )
    timeout_s: float | None = Field(
        default=None,
        gt=0,
        description="deadline of one call, retries included; null = global_http_deadline_s",
    )


class Upstream:
    """One model server's calls to its upstream: the clients it builds and the scope of each call.

    Build the clients at `setup_webserver()`, after `run_webserver()` applied the config's `global_http_*`
    knobs, so that the default deadline is the deployment's and not the library's.
    """

    def __init__(
        self, bounds: UpstreamCallConfig, api_key: SecretStr, default_headers: dict[str, str]
    ) -> None:
        self._bounds = bounds
        self._api_key = api_key
        self._default_headers = default_headers
        limit = bounds.max_concurrent_requests
        self._semaphore = asyncio.Semaphore(limit) if limit is not None else None

    def client(
        self, client_class: type[Client], base_url: str, max_attempts: int | None = None, **fields: Any
    ) -> Client:
        """A client of `base_url`; `max_attempts` lowers the configured attempts (e.g. for a backend that
        may move, so a call fails soon and the next one looks for it again). `fields` are the settings a
        provider's client class adds (e.g. Azure's query parameters)."""
        return client_class(
            base_url=base_url,
            api_key=self._api_key.get_secret_value(),
            default_headers=self._default_headers,
            max_attempts=min(self._bounds.max_attempts, max_attempts or self._bounds.max_attempts),
            timeout=self._bounds.timeout_s or default_retry_policy().deadline_s,
            **fields,
        )

    @contextlib.asynccontextmanager
    async def call(self) -> AsyncIterator[None]:
        """The scope of one upstream call (generation or not): within the `max_concurrent_requests` bound,
        and an upstream error leaves it with any echo of the key masked, since its body reaches the caller
        and the logs (the error keeps no request headers). The error is re-raised as is: the error
        middleware answers with the upstream's status and body."""
        try:
            async with self._semaphore if self._semaphore is not None else contextlib.nullcontext():
                yield
        except HTTPStatusError as error:
            key = self._api_key.get_secret_value()
            if len(key) >= MIN_MASKED_KEY_CHARS:
                error.response_content = error.response_content.replace(key.encode(), b"****")
            raise


def bad_upstream_answer(message: str) -> GymError:
    """A 2xx answer the server cannot use is the upstream's fault, a 502, not the request's or the server's."""
    return GymError(502, "bad_upstream_response", message)


def validated_answer(model: type[Answer], answer: Any, base_url: str, what: str) -> Answer:
    """The upstream's answer as `model`; one that is not what the API promises is a 502 naming the first
    problems, instead of a bare 500 from deep inside a conversion or the response serialisation."""
    try:
        return model.model_validate(answer)
    except ValidationError as error:
        problems = describe_validation_error(error, limit=MAX_REPORTED_PROBLEMS)
        raise bad_upstream_answer(f"upstream {base_url} returned an invalid {what}: {problems}") from None
