"""Calls between servers hosted in the same process, without a socket.

When `gym run` co-hosts several server instances in one process (`colocate: true`), `ServerClient` sends
their calls straight to the callee's ASGI app: the same routing, validation, middleware, session cookies
and error bodies as over HTTP, minus the HTTP client, the kernel round trip and the HTTP parser on both
sides, which were most of a rollout's CPU. The answer is a `LocalResponse`, which offers the part of
`aiohttp.ClientResponse` that Gym code reads (status, headers, cookies, `read()`, `json()`, `release()`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from http import HTTPStatus
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlencode

import aiohttp
import orjson
from multidict import CIMultiDict, CIMultiDictProxy
from starlette.types import ASGIApp, Message
from yarl import URL

from nemo_gym.http.client import DeadlineExceededError, RetryPolicy, cookie_header, default_retry_policy
from nemo_gym.http.deadlines import budget
from nemo_gym.http.errors import error_body

logger = logging.getLogger("nemo_gym.in_process")
# The ASGI scope extension that marks a request made in-process: the callee runs in the caller's task.
IN_PROCESS_EXTENSION = "nemo_gym.http.in_process"
_hosted: dict[str, tuple[ASGIApp, str, int]] = {}


def host_in_process(instance_name: str, app: ASGIApp, host: str, port: int) -> None:
    """Make `instance_name` reachable in-process by this process's `ServerClient`s."""
    _hosted[instance_name] = (app, host, port)


def is_hosted_here(instance_name: str) -> bool:
    return instance_name in _hosted


class LocalResponse:
    """A complete answer of an in-process call (its body is already in memory)."""

    def __init__(self, method: str, url: URL, status: int, headers: CIMultiDict[str], body: bytes) -> None:
        self.method = method
        self.url = url
        self.status = status
        self.headers = CIMultiDictProxy(headers)
        self._body = body
        self.history: tuple[()] = ()

    @property
    def request_info(self) -> aiohttp.RequestInfo:
        """Read only when reporting an error, so not built for every call."""
        return aiohttp.RequestInfo(self.url, self.method, CIMultiDictProxy(CIMultiDict()), self.url)

    @property
    def ok(self) -> bool:
        return self.status < 400

    @property
    def reason(self) -> str:
        try:
            return HTTPStatus(self.status).phrase
        except ValueError:
            return ""

    @property
    def content_type(self) -> str:
        return self.headers.get("Content-Type", "application/octet-stream").split(";")[0].strip()

    @property
    def cookies(self) -> SimpleCookie:
        jar: SimpleCookie = SimpleCookie()
        for header in self.headers.getall("Set-Cookie", ()):
            jar.load(header)
        return jar

    async def read(self) -> bytes:
        return self._body

    async def text(self, encoding: str = "utf-8") -> str:
        return self._body.decode(encoding, errors="replace")

    async def json(self, **_: Any) -> Any:
        return orjson.loads(self._body)

    def release(self) -> None:
        return None


async def call_in_process(
    instance_name: str, method: str, path: str, *, idempotent: bool | None = None, **request: Any
) -> LocalResponse:
    """Run one request (`call_app`'s keywords) through the hosted app of `instance_name`, within the
    call's deadline. Nothing here is retried (no connection can fail), so `idempotent` has no effect."""
    app, host, port = _hosted[instance_name]
    # The callee runs in the caller's task, so its SERVER span continues the caller's current span (and
    # baggage) from the shared context: nothing to write into headers and parse back.
    return await call_app(app, (host, port), instance_name, method, path, **request)


async def call_app(
    app: ASGIApp,
    address: tuple[str, int],
    label: str,
    method: str,
    path: str,
    *,
    json: Any = None,
    data: bytes | str | None = None,
    headers: Mapping[str, str] | None = None,
    cookies: Mapping[str, str] | None = None,
    params: Mapping[str, Any] | None = None,
    retry_policy: RetryPolicy | None = None,
) -> LocalResponse:
    """One request through `app` (as if it arrived at `address`), within the call's deadline; `label`
    names the app in the error of a request it could not answer."""
    host, port = address
    body = (
        orjson.dumps(json) if json is not None else (data.encode() if isinstance(data, str) else data or b"")
    )
    raw_headers = [
        (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in (headers or {}).items()
    ]
    if json is not None:
        raw_headers.append((b"content-type", b"application/json"))
    if cookies:
        raw_headers.append((b"cookie", cookie_header(cookies).encode("latin-1")))
    raw_headers.append((b"content-length", str(len(body)).encode()))
    path, _, query = path.partition("?")
    if params:
        query = "&".join(filter(None, [query, urlencode(params, doseq=True)]))
    url = URL.build(scheme="http", host=host, port=port, path=path, query_string=query)
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method.upper(),
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": raw_headers,
        "client": ("127.0.0.1", 0),
        "server": (host, port),
        "extensions": {IN_PROCESS_EXTENSION: {}},
    }
    exchange = _Exchange(body)
    loop = asyncio.get_running_loop()
    started = loop.time()
    # As over HTTP: the call ends at the caller's deadline, and the callee works within what is left of
    # it (an HTTP callee learns it from the deadline header; this one runs in the caller's task).
    with budget((retry_policy or default_retry_policy()).deadline_s) as deadline_s:
        deadline = asyncio.timeout(deadline_s)
        try:
            async with deadline:
                await app(scope, exchange.receive, exchange.send)
        except TimeoutError as error:
            if deadline.expired():
                raise DeadlineExceededError(method, str(url), 1, loop.time() - started, error) from error
            exchange.escaped(label, error)
        except Exception as error:
            exchange.escaped(label, error)
        finally:
            exchange.finished.set()
    return LocalResponse(method.upper(), url, exchange.status, exchange.headers, b"".join(exchange.body))


class _Exchange:
    """The ASGI receive/send pair of one in-process request."""

    def __init__(self, body: bytes) -> None:
        self._request_body: bytes | None = body
        self.finished = asyncio.Event()
        self.started = False
        self.status = 500
        self.headers: CIMultiDict[str] = CIMultiDict()
        self.body: list[bytes] = []

    async def receive(self) -> Message:
        if self._request_body is not None:
            body, self._request_body = self._request_body, None
            return {"type": "http.request", "body": body, "more_body": False}
        await self.finished.wait()  # asked again only by code that watches for the client going away
        return {"type": "http.disconnect"}

    def escaped(self, instance_name: str, error: Exception) -> None:
        """An exception got past the callee's own error handling. Over HTTP the caller would get a 500 (or
        whatever answer had already gone out, followed by uvicorn's log line); so here too, never the
        callee's exception raised inside the caller."""
        logger.error("%s: unhandled error in an in-process call", instance_name, exc_info=error)
        if self.started:
            return
        self.started = True
        self.status = 500
        payload = orjson.dumps(
            error_body("internal_error", 500, f"{type(error).__name__}: {error}", instance_name)
        )
        self.headers = CIMultiDict({"Content-Type": "application/json", "Content-Length": str(len(payload))})
        self.body = [payload]

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
            self.status = message["status"]
            for name, value in message.get("headers", ()):
                self.headers.add(name.decode("latin-1"), value.decode("latin-1"))
        elif message["type"] == "http.response.body":
            self.body.append(message.get("body", b""))
            if not message.get("more_body", False):
                self.finished.set()
