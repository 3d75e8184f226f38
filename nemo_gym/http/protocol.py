"""How a Gym server takes HTTP requests in: uvicorn's httptools protocol, with limits and a liveness answer
that does not queue behind the work.

Limits. uvicorn times out only idle keep-alive connections: a client that sends half its headers, or half
its body, holds a connection (and a handler waiting for the rest) forever, and a body of any size is read
into memory. Here a request must arrive whole within `read_timeout_s` of its first byte (else 408), a new
connection must start a request within the keep-alive time (else it is closed), and a body beyond
`max_body_bytes` is refused with 413 as soon as its `Content-Length`, or the bytes received, show it.
Both answers use the Gym error format and close the connection.

Disconnects. A request whose client goes away before its answer is complete is cancelled (as NeMo Gym 0.7
does): a collector that gave up on a rollout stops the agent's work, and the agent's model calls with it.
Each such request is counted and logged as a 499 (the first, then every hundredth).

Liveness. Under a burst of thousands of `/run`, each event-loop pass runs one step of every ready
request, and a `GET /` waiting its turn took over a second. `GET /` is answered by the protocol itself,
as soon as it is read; and `StartGate` lets only so many new requests begin per pass, so a burst is
spread over passes instead of making one pass that lasts seconds.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass
from typing import Any

import httptools
import orjson
from omegaconf import DictConfig
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from nemo_gym.config.deployment import ServerKnobs, deployment_settings
from nemo_gym.http.errors import error_body

logger = logging.getLogger("nemo_gym.http_protocol")

BYTES_PER_MB = 1024 * 1024
# Scope keys: the task running a request's handler, and whether its client went away.
HANDLER_TASK_KEY = "gym.handler_task"
DISCONNECTED_KEY = "gym.client_disconnected"
DISCONNECTS_LOGGED_EVERY = 100
LIVENESS_BODY = b'{"status":"ok"}'
STARTS_PER_LOOP_PASS = 4
SLOW_LOOP_PASS_S = 0.010


@dataclass(frozen=True)
class RequestLimits:
    max_body_bytes: int
    read_timeout_s: float

    @classmethod
    def from_config(cls, global_config_dict: DictConfig) -> RequestLimits:
        """The limits the config sets; a bad value is a ConfigError naming its key."""
        return cls.of(deployment_settings(global_config_dict).knobs)

    @classmethod
    def of(cls, knobs: ServerKnobs) -> RequestLimits:
        """The limits of settings already read and checked (a server start reads them once)."""
        return cls(
            max_body_bytes=int(knobs.global_max_request_body_mb * BYTES_PER_MB),
            read_timeout_s=knobs.global_request_read_timeout_s,
        )


def gym_protocol(limits: RequestLimits, server_label: str, answers_liveness: bool) -> type[HttpToolsProtocol]:
    """The protocol class to give uvicorn as `http`; `answers_liveness` when the app's own `GET /` is the
    Gym liveness route (a server that routes `GET /` itself keeps it)."""
    attributes = {"limits": limits, "server_label": server_label, "answers_liveness": answers_liveness}
    return type("GymHttpToolsProtocol", (_GymHttpToolsProtocol,), attributes)


class _GymHttpToolsProtocol(HttpToolsProtocol):
    limits: RequestLimits
    server_label: str
    answers_liveness: bool
    disconnects = 0  # requests of this process cancelled because their client went away

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._read_deadline: asyncio.TimerHandle | None = None
        self._headers_complete = False
        self._liveness_request = False
        self._body_bytes = 0
        self._refused = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # A connection that never sends a byte is an idle keep-alive connection from the start.
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_read_deadline()
        if self.cycle is not None and not self.cycle.response_complete:
            self._cancel_handler(self.cycle.scope)
        super().connection_lost(exc)

    def _cancel_handler(self, scope: dict[str, Any]) -> None:
        task = scope.get(HANDLER_TASK_KEY)
        if task is None or task.done():
            return
        scope[DISCONNECTED_KEY] = True
        task.cancel()
        _GymHttpToolsProtocol.disconnects += 1
        count = _GymHttpToolsProtocol.disconnects
        if count == 1 or count % DISCONNECTS_LOGGED_EVERY == 0:
            host, port = scope.get("client") or ("-", 0)
            logger.info(
                '%s - "%s %s" 499 CLIENT DISCONNECTED (%d total, the handler was cancelled)',
                f"{host}:{port}", scope.get("method"), scope.get("path"), count,
            )  # fmt: skip

    def data_received(self, data: bytes) -> None:
        if not self._refused:
            super().data_received(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._headers_complete = False
        self._liveness_request = False
        self._body_bytes = 0
        self._cancel_read_deadline()
        self._read_deadline = self.loop.call_later(self.limits.read_timeout_s, self._request_too_slow)

    def on_headers_complete(self) -> None:
        declared = next((value for name, value in self.headers if name == b"content-length"), None)
        if declared is not None and declared.isdigit() and int(declared) > self.limits.max_body_bytes:
            self._refuse(
                413, "request_too_large", f"the body ({int(declared)} bytes) exceeds {self._limit_text()}"
            )
            return
        self._headers_complete = True
        if self._is_liveness_probe(declared):
            self._liveness_request = True
            return
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if self._refused:
            return
        self._body_bytes += len(body)
        if self._body_bytes > self.limits.max_body_bytes:
            self._refuse(413, "request_too_large", f"the body exceeds {self._limit_text()}")
            return
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._cancel_read_deadline()
        if self._liveness_request:
            self._answer_liveness()
        elif not self._refused:
            super().on_message_complete()

    def _is_liveness_probe(self, declared_length: bytes | None) -> bool:
        """`GET /` without a body, when no earlier request of this connection is still being answered
        (its answer must go out first)."""
        return (
            self.answers_liveness
            and self.parser.get_method() == b"GET"
            and httptools.parse_url(self.url).path == b"/"
            and declared_length in (None, b"0")
            and (self.cycle is None or self.cycle.response_complete)
            and not self.pipeline
            and not self.parser.should_upgrade()
        )

    def _answer_liveness(self) -> None:
        self._liveness_request = False
        keep_alive = self.parser.should_keep_alive() and self.parser.get_http_version() == "1.1"
        self.transport.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n%s\r\n%s"
            % (len(LIVENESS_BODY), b"" if keep_alive else b"connection: close\r\n", LIVENESS_BODY)
        )
        if not keep_alive:
            self.transport.close()
            return
        self._unset_keepalive_if_required()
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )

    def _request_too_slow(self) -> None:
        self._read_deadline = None
        part = "body" if self._headers_complete else "headers"
        self._refuse(
            408,
            "request_timeout",
            f"the request's {part} did not arrive within {self.limits.read_timeout_s:g} s "
            "(global_request_read_timeout_s)",
        )

    def _limit_text(self) -> str:
        return f"the limit of {self.limits.max_body_bytes} bytes (global_max_request_body_mb)"

    def _refuse(self, status: int, error_type: str, message: str) -> None:
        """Answer `status` unless the app already started answering, stop the request's handler, and close."""
        self._refused = True
        self._cancel_read_deadline()
        cycle = self.cycle if self._headers_complete and not self._liveness_request else None
        if cycle is not None:
            cycle.disconnected = True  # the handler's next receive() gets http.disconnect
            cycle.message_event.set()
        if self.transport.is_closing():
            return
        if cycle is None or not cycle.response_started:
            payload = orjson.dumps(error_body(error_type, status, message, self.server_label))
            self.transport.write(
                b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
                b"connection: close\r\n\r\n%s" % (status, _REASONS[status], len(payload), payload)
            )
        self.transport.close()

    def _cancel_read_deadline(self) -> None:
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None


_REASONS = {408: b"Request Timeout", 413: b"Content Too Large"}


class StartGate:
    """ASGI middleware pacing how many new requests begin per event-loop pass.

    While passes are quick, up to `per_pass` begin in each; once a pass takes longer than `slow_pass_s`,
    the loop holds more work in flight than the CPU keeps up with, and only one begins per pass until
    passes are quick again. Work in flight then shrinks to what the CPU can carry: throughput is the same
    (the CPU was the limit), requests wait here instead of in the loop's queue, and everything the loop
    does between passes (accepting connections, answering `GET /`) happens within about `slow_pass_s`.
    Waiting requests begin in arrival order; a request that has begun is never held back again.
    """

    def __init__(
        self, app: ASGIApp, per_pass: int = STARTS_PER_LOOP_PASS, slow_pass_s: float = SLOW_LOOP_PASS_S
    ) -> None:
        self.app = app
        self.per_pass = per_pass
        self.slow_pass_s = slow_pass_s
        self._allowance = per_pass
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._pass_end_scheduled_at: float | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope[HANDLER_TASK_KEY] = asyncio.current_task()  # what the protocol cancels on a disconnect
        try:
            if self._allowance > 0 and not self._waiting:
                self._allowance -= 1
            else:
                turn = asyncio.get_running_loop().create_future()
                self._waiting.append(turn)
                await turn
            self._schedule_pass_end()
            await self.app(scope, receive, send)
        except asyncio.CancelledError:
            if not scope.get(DISCONNECTED_KEY):
                raise  # a shutdown, not a client that went away: let it end the task
            # Nobody is left to answer: the request simply ends.

    def _schedule_pass_end(self) -> None:
        if self._pass_end_scheduled_at is None:
            loop = asyncio.get_running_loop()
            self._pass_end_scheduled_at = loop.time()
            loop.call_soon(self._end_pass)

    def _end_pass(self) -> None:
        """Runs in the pass after the one that scheduled it: how long that took says whether the loop is
        saturated; then the next waiting requests begin."""
        assert self._pass_end_scheduled_at is not None
        slow = asyncio.get_running_loop().time() - self._pass_end_scheduled_at > self.slow_pass_s
        self._pass_end_scheduled_at = None
        self._allowance = 1 if slow else self.per_pass
        while self._waiting and self._allowance > 0:
            turn = self._waiting.popleft()
            if not turn.done():  # a request whose client went away was cancelled while waiting
                turn.set_result(None)
                self._allowance -= 1
        if self._waiting:
            self._schedule_pass_end()
