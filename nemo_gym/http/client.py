"""The one outbound HTTP client of a Gym process.

Every call between servers, and every call to a model upstream, goes through `request()`: one pooled
aiohttp session per process (per event loop), a deadline per call, and a bounded retry with exponential
backoff and jitter for the failures where retrying is safe or expected. Nothing here waits forever and
nothing retries forever: the reference design retried some failures endlessly and silently, which turned
a dead upstream into a hung training run.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import re
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from http.cookies import SimpleCookie
from typing import Any

import aiohttp
import orjson
import yarl
from multidict import CIMultiDict, CIMultiDictProxy

from nemo_gym.config.defaults import DEFAULT_CONNECT_TIMEOUT_S as DEFAULT_CONNECT_TIMEOUT_S
from nemo_gym.config.defaults import DEFAULT_CONNECTOR_LIMIT as DEFAULT_CONNECTOR_LIMIT
from nemo_gym.config.defaults import DEFAULT_CONNECTOR_LIMIT_PER_HOST as DEFAULT_CONNECTOR_LIMIT_PER_HOST
from nemo_gym.config.defaults import DEFAULT_DEADLINE_S as DEFAULT_DEADLINE_S
from nemo_gym.config.defaults import DEFAULT_HTTP_MAX_ATTEMPTS as DEFAULT_HTTP_MAX_ATTEMPTS
from nemo_gym.http.deadlines import DEADLINE_HEADER, announced, bounded
from nemo_gym.telemetry import tracing
from nemo_gym.telemetry.metrics import record_retry
from nemo_gym.text.extraction import one_line
from nemo_gym.text.redaction import without_url_passwords

logger = logging.getLogger("nemo_gym.http")

# Below the servers' 30 s keep-alive, so the client never reuses a socket the server is about to close.
CLIENT_KEEPALIVE_S = 15.0
MAX_REASON_CHARS = 200
# How aiohttp words a body that ended before its Content-Length or last chunk: the connection closed.
PAYLOAD_CUT_SHORT = "Response payload is not completed"
# NeMo Gym's name for the default attempts (server_utils exports it).
MAX_NUM_TRIES = DEFAULT_HTTP_MAX_ATTEMPTS


@dataclass(frozen=True)
class RetryPolicy:
    """How long one logical call may take and which failures it may retry.

    `deadline_s` bounds the whole call, every attempt and backoff sleep included. Failures to connect
    (refused, connect timeout) are always retried; a connection dropped after the request was sent is
    retried only for idempotent calls, since the handler may already have run. Statuses in
    `retry_statuses` are retried honouring `Retry-After`, unless `is_final(status, body)` says that
    answer cannot change (a spent quota). Anything else is returned or raised at once.
    """

    max_attempts: int = DEFAULT_HTTP_MAX_ATTEMPTS
    deadline_s: float = DEFAULT_DEADLINE_S
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    backoff_base_s: float = 0.5
    backoff_max_s: float = 8.0
    retry_statuses: frozenset[int] = field(default_factory=frozenset)
    is_final: Callable[[int, bytes], bool] | None = None

    def with_overrides(self, **changes: Any) -> RetryPolicy:
        if "retry_statuses" in changes:
            changes["retry_statuses"] = frozenset(changes["retry_statuses"])
        return replace(self, **changes)

    def backoff_delay(self, attempt: int) -> float:
        """Exponential backoff with jitter in [50%, 100%] of the step, so clients do not retry in lockstep."""
        step = min(self.backoff_max_s, self.backoff_base_s * (2 ** (attempt - 1)))
        return step * random.uniform(0.5, 1.0)

    def next_delay(
        self, attempts: int, retry_after_s: float | None = None, remaining_s: float | None = None
    ) -> float | None:
        """The wait before another attempt after `attempts` failed ones, or None to stop: the attempts are
        spent, or the wait (the backoff, or the peer's `Retry-After` when longer) would reach the deadline,
        `remaining_s` away. Every Gym retry loop (this client, the judge, benchmark downloads) asks here,
        so attempts, backoff and deadlines mean the same everywhere."""
        if attempts >= self.max_attempts:
            return None
        delay = self.backoff_delay(attempts)
        if retry_after_s is not None:
            delay = max(delay, retry_after_s)
        if remaining_s is not None and delay >= remaining_s:
            return None
        return delay


class RequestFailedError(aiohttp.ClientError):
    """A call that produced no usable HTTP response: the last failure after all permitted attempts.

    `reason` says what went wrong in one line a log reader can act on ("connection closed mid-body"),
    where aiohttp's own messages name parser internals.
    """

    kind = "connection"

    def __init__(
        self,
        method: str,
        url: str,
        attempts: int | None,
        elapsed_s: float | None,
        cause: BaseException | None,
        reason: str | None = None,
    ):
        self.method = method
        self.url = without_url_passwords(url)
        self.attempts = attempts
        self.elapsed_s = elapsed_s
        self.cause = cause
        self.reason = reason or (
            _failure_reason(cause, answered=False) if cause is not None else "no attempt was possible"
        )
        counted = (
            f" after {attempts} attempt(s) in {elapsed_s:.1f}s" if attempts and elapsed_s is not None else ""
        )
        super().__init__(without_url_passwords(f"{method} {url}: {self.reason}{counted}"))

    def __reduce__(self) -> tuple[Any, ...]:
        # Picklable (trainers pass errors between Ray processes); the aiohttp cause may not be, so it stays.
        return type(self), (self.method, self.url, self.attempts, self.elapsed_s, None, self.reason)


class ConnectionFailedError(RequestFailedError, ConnectionError):
    """The peer could not be reached or dropped the connection, on every attempt."""

    kind = "connection"


class DeadlineExceededError(RequestFailedError, TimeoutError):
    """The call's deadline passed before the whole response (headers and body) arrived."""

    kind = "timeout"


class BadResponseError(RequestFailedError, ValueError):
    """The peer answered, but with something its caller cannot use: bytes that are not HTTP, broken
    framing, or a body that is not JSON. The peer's fault, so the caller's own answer is a 502."""

    kind = "bad_upstream_response"


def _failure_reason(error: BaseException, answered: bool) -> str:
    """One line on what broke; `answered` tells whether the headers had arrived (the body had not)."""
    if isinstance(error, aiohttp.ConnectionTimeoutError):
        return "timed out connecting"
    if isinstance(error, asyncio.TimeoutError):
        return "body not complete within the deadline" if answered else "no answer within the deadline"
    if isinstance(error, aiohttp.ClientPayloadError):
        if _closed_mid_body(error):
            return "connection closed mid-body"
        return f"broken body ({one_line(str(error.__cause__ or error), MAX_REASON_CHARS, ellipsis='')})"
    if isinstance(error, aiohttp.ServerDisconnectedError):
        return "connection closed mid-body" if answered else "connection closed before an answer"
    if isinstance(error, aiohttp.ClientConnectorError):
        return f"cannot connect ({error.os_error.strerror or error.os_error})"
    if isinstance(error, aiohttp.ClientResponseError):
        return f"not a valid HTTP answer ({one_line(error.message, MAX_REASON_CHARS, ellipsis='')})"
    return f"{type(error).__name__}: {one_line(str(error), MAX_REASON_CHARS, ellipsis='')}"


def _closed_mid_body(error: aiohttp.ClientPayloadError) -> bool:
    """Cut short (any framing) rather than malformed: aiohttp tells the two apart only by its message."""
    return str(error).startswith(PAYLOAD_CUT_SHORT)


def _failure_type(error: BaseException) -> type[RequestFailedError] | None:
    """The Gym error for an aiohttp failure; None for errors that are bugs of the caller (bad URL, ...)."""
    if isinstance(error, aiohttp.ClientPayloadError) and not _closed_mid_body(error):
        return BadResponseError
    if isinstance(error, asyncio.TimeoutError) and not isinstance(error, aiohttp.ConnectionTimeoutError):
        return DeadlineExceededError
    if isinstance(error, aiohttp.ClientConnectionError | aiohttp.ClientPayloadError):
        return ConnectionFailedError
    if isinstance(error, aiohttp.ClientResponseError):
        return BadResponseError
    return None


class HTTPStatusError(aiohttp.ClientResponseError):
    """A non-2xx answer, with the body kept (`response_content`) so the error can travel upward intact."""

    def __init__(self, response: aiohttp.ClientResponse, body: bytes):
        sent = response.request_info
        super().__init__(
            # Without the request headers: they carry the bearer key, and errors get logged and shown.
            aiohttp.RequestInfo(sent.url, sent.method, CIMultiDictProxy(CIMultiDict()), sent.real_url),
            response.history,
            status=response.status,
            message=response.reason or "",
            headers=response.headers,
        )
        self.response_content = body
        self.url = without_url_passwords(str(response.url))

    def __str__(self) -> str:
        snippet = self.response_content[:500].decode("utf-8", errors="replace")
        return f"HTTP {self.status} from {self.url}: {snippet}"

    def __reduce__(self) -> tuple[Any, ...]:
        # aiohttp's header proxies cannot be pickled, and trainers pass errors between Ray processes: the
        # copy keeps what a caller reads (status, message, URL, method, body) and drops the headers.
        sent = self.request_info
        fields = (self.status, self.message, str(sent.url), sent.method, self.response_content, self.url)
        return _unpickled_status_error, (*fields, type(self))


def _unpickled_status_error(
    status: int,
    message: str,
    sent_url: str,
    method: str,
    body: bytes,
    shown_url: str,
    error_class: type[HTTPStatusError] = HTTPStatusError,
) -> HTTPStatusError:
    error = error_class.__new__(error_class)
    url = yarl.URL(sent_url)
    sent = aiohttp.RequestInfo(url, method, CIMultiDictProxy(CIMultiDict()), url)
    aiohttp.ClientResponseError.__init__(error, sent, (), status=status, message=message)
    error.response_content = body
    error.url = shown_url
    return error


@dataclass
class _ClientState:
    # One session per event loop: an embedded deployment (RunHelper) runs its own loop in a thread beside
    # the trainer's, and neither may use, replace or close the other's session.
    sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession] = field(
        default_factory=weakref.WeakKeyDictionary
    )
    connector_limit: int = DEFAULT_CONNECTOR_LIMIT
    connector_limit_per_host: int = DEFAULT_CONNECTOR_LIMIT_PER_HOST
    default_policy: RetryPolicy = field(default_factory=RetryPolicy)


_state = _ClientState()


def configure_http_client(
    *,
    connector_limit: int | None = None,
    connector_limit_per_host: int | None = None,
    default_policy: RetryPolicy | None = None,
) -> None:
    """Set the process-wide pool sizes and default retry policy (before the first request)."""
    if connector_limit is not None:
        _state.connector_limit = connector_limit
    if connector_limit_per_host is not None:
        _state.connector_limit_per_host = connector_limit_per_host
    if default_policy is not None:
        _state.default_policy = default_policy


def default_retry_policy() -> RetryPolicy:
    return _state.default_policy


def get_global_aiohttp_client() -> aiohttp.ClientSession:
    """The pooled session of the running event loop, created there on first use.

    Each loop gets its own (an aiohttp session cannot be used from another loop, nor outlive its own), so
    a test or CLI that runs several loops one after the other, or a trainer whose loop runs beside an
    embedded deployment's, never shares one.
    """
    loop = asyncio.get_running_loop()
    session = _state.sessions.get(loop)
    if session is None or session.closed:
        connector = aiohttp.TCPConnector(
            limit=_state.connector_limit,
            limit_per_host=_state.connector_limit_per_host,
            keepalive_timeout=CLIENT_KEEPALIVE_S,
            ttl_dns_cache=300,
        )
        session = _state.sessions[loop] = aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),
            json_serialize=lambda obj: orjson.dumps(obj).decode(),
            timeout=aiohttp.ClientTimeout(total=None),
        )
    return session


async def close_global_aiohttp_client() -> None:
    """Close the running loop's session; sessions of other loops are theirs to close."""
    session = _state.sessions.pop(asyncio.get_running_loop(), None)
    if session is not None and not session.closed:
        await session.close()


IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})


def _retryable_failure(error: BaseException, idempotent: bool) -> bool:
    """Whether retrying cannot run a handler twice (or the caller said running it twice is harmless)."""
    if isinstance(error, aiohttp.ConnectionTimeoutError | aiohttp.ClientConnectorError):
        return True
    if isinstance(error, asyncio.TimeoutError):
        return False
    return idempotent and isinstance(
        error, aiohttp.ServerDisconnectedError | aiohttp.ClientOSError | aiohttp.ClientPayloadError
    )


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a `Retry-After` header (delta-seconds or HTTP-date); None if absent or bad."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


async def request(
    method: str,
    url: str,
    *,
    retry_policy: RetryPolicy | None = None,
    idempotent: bool | None = None,
    _internal: bool = False,
    **aiohttp_kwargs: Any,
) -> aiohttp.ClientResponse:
    """Send one HTTP request with a deadline and bounded retries; return the response, its body read.

    The deadline covers the body too, and never outlasts the caller's budget (`nemo_gym.http.deadlines`). The
    status is not checked here (see `raise_for_status`) except for statuses the policy retries; when those
    persist, the last response is returned with its body intact. Raises `ConnectionFailedError`, `DeadlineExceededError` or `BadResponseError` (all name
    the URL) when no whole, well-formed response could be had. `idempotent` defaults to the method's
    semantics (GET, HEAD, OPTIONS, PUT, DELETE); pass True for a POST that is safe to repeat after a
    dropped connection.
    `_internal` marks a call to one of Gym's own servers (a URL resolved from a server instance name or
    the head server's registry): only such a call tells its peer the budget's remainder in the deadline
    header, so third-party upstreams (OpenAI, vLLM, a judge's endpoint) never receive it.
    """
    policy = retry_policy or _state.default_policy
    if idempotent is None:
        idempotent = method.upper() in IDEMPOTENT_METHODS
    payload = aiohttp_kwargs.pop("json", None)
    cookies = aiohttp_kwargs.pop("cookies", None)
    headers = dict(aiohttp_kwargs.get("headers") or {})
    if payload is not None:
        aiohttp_kwargs["data"] = orjson.dumps(payload)
        headers.setdefault("Content-Type", "application/json")
    if cookies:
        headers["Cookie"] = cookie_header(cookies)
    aiohttp_kwargs["headers"] = headers
    announces_deadline = _internal and not any(name.lower() == DEADLINE_HEADER.lower() for name in headers)
    with tracing.client_span(method, url, headers) as span:
        response = await _send(method, url, policy, idempotent, announces_deadline, headers, aiohttp_kwargs)
        if span is not None:
            tracing.record_status(span, response.status)
        return response


async def _send(
    method: str,
    url: str,
    policy: RetryPolicy,
    idempotent: bool,
    announces_deadline: bool,
    headers: dict[str, str],
    aiohttp_kwargs: dict[str, Any],
) -> aiohttp.ClientResponse:
    """`request()`'s attempts, each within what is left of the deadline."""
    session = get_global_aiohttp_client()
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline = started + bounded(policy.deadline_s)
    attempt = 0
    last_error: BaseException | None = None
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            reason = "the deadline passed" + (
                f" while retrying; last failure: {_failure_reason(last_error, answered=False)}"
                if last_error
                else ""
            )
            raise DeadlineExceededError(method, url, attempt, loop.time() - started, last_error, reason)
        attempt += 1
        if announces_deadline:
            headers[DEADLINE_HEADER] = announced(remaining)
        timeout = aiohttp.ClientTimeout(
            total=remaining, sock_connect=min(policy.connect_timeout_s, remaining)
        )
        response: aiohttp.ClientResponse | None = None
        try:
            response = await session.request(method, url, timeout=timeout, **aiohttp_kwargs)
            # Read here, under the same deadline (aiohttp's total timeout runs until the body is in) and
            # the same error mapping: a body that breaks or stalls is this call's failure, not the caller's.
            await response.read()
        except Exception as error:
            failure = _failure_type(error)
            if failure is None:
                raise
            reason = _failure_reason(error, answered=response is not None)
            delay = None
            if _retryable_failure(error, idempotent):
                delay = policy.next_delay(attempt, remaining_s=deadline - loop.time())
            if delay is None:
                raise failure(method, url, attempt, loop.time() - started, error, reason) from error
            last_error = error
            record_retry(error)
            logger.warning(
                "HTTP retry: %s %s: %s (attempt %d/%d, next in %.2fs)",
                method, without_url_passwords(url), reason, attempt, policy.max_attempts, delay,
            )  # fmt: skip
            await asyncio.sleep(delay)
            continue

        if response.status not in policy.retry_statuses:
            return response
        retry_after = parse_retry_after(response.headers.get("Retry-After"))
        delay = policy.next_delay(attempt, retry_after, deadline - loop.time())
        if delay is None:
            return response
        if policy.is_final is not None and policy.is_final(response.status, await response.read()):
            return response
        record_retry(None, response.status)
        logger.warning(
            "HTTP retry: %s %s returned status %d (attempt %d/%d, next in %.2fs)",
            method, without_url_passwords(url), response.status, attempt, policy.max_attempts, delay,
        )  # fmt: skip
        response.release()
        await asyncio.sleep(delay)


# RFC 6265 cookie-octets: a value made only of these is sent as it is, anything else quoted.
_PLAIN_COOKIE_VALUE = re.compile(r"^[\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]*$")


def cookie_header(cookies: Mapping[str, str]) -> str:
    """The `Cookie` header for name -> value pairs.

    Built directly rather than through aiohttp's `cookies=`, which makes a temporary cookie jar on every
    request: a measurable share of an agent's CPU, since every call of a rollout carries session cookies.
    """
    return "; ".join(
        f"{name}={value if _PLAIN_COOKIE_VALUE.match(value) else SimpleCookie().value_encode(value)[1]}"
        for name, value in cookies.items()
    )


def response_cookies(response: aiohttp.ClientResponse) -> dict[str, str]:
    """name -> value of the cookies a response sets (attributes such as Path and Max-Age dropped)."""
    found: dict[str, str] = {}
    for header in response.headers.getall("Set-Cookie", ()):
        pair = header.split(";", 1)[0]
        name, separator, value = pair.partition("=")
        if not separator:
            continue
        value = value.strip()
        if value.startswith('"'):  # quoted (and maybe escaped): the standard library decodes it
            jar: SimpleCookie = SimpleCookie()
            jar.load(pair)
            value = jar[name.strip()].value if name.strip() in jar else value
        found[name.strip()] = value
    return found


async def raise_for_status(response: aiohttp.ClientResponse) -> None:
    """Raise `HTTPStatusError` for a non-2xx response, after reading its body so the cause is not lost."""
    if response.ok:
        return
    body = await response.read()
    raise HTTPStatusError(response, body)


async def get_response_json(response: aiohttp.ClientResponse) -> Any:
    """The parsed body; a body that is not JSON is the peer's fault (`BadResponseError`, a 502)."""
    body = await response.read()
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as error:
        reason = f"HTTP {response.status} answer is invalid JSON ({error})"
        raise BadResponseError(response.method, str(response.url), None, None, error, reason) from error


async def checked_json(response: aiohttp.ClientResponse) -> Any:
    """The parsed body of a 2xx response; any other status raises `HTTPStatusError` with the peer's body."""
    await raise_for_status(response)
    return await get_response_json(response)
