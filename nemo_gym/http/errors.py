"""One error format for every Gym server.

A failure inside a handler becomes `{"error": {"type", "status", "message", "server", "cause"}}` with the
original status kept: a 400 from a model upstream is still a 400 at the agent's `/run`, and the inner
server's own error object is nested as `cause` (parsed JSON, never an escaped string). Request
validation keeps FastAPI's standard 422 `{"detail": [...]}` body, which callers already parse.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from nemo_gym.http.client import HTTPStatusError, RequestFailedError
from nemo_gym.text.redaction import without_url_passwords

logger = logging.getLogger("nemo_gym.errors")

MAX_CAUSE_TEXT_CHARS = 4000
_STATUS_FOR_FAILED_REQUEST = {"connection": 502, "timeout": 504, "bad_upstream_response": 502}


def error_body(error_type: str, status: int, message: str, server: str, cause: Any = None) -> dict[str, Any]:
    """The error object every Gym server answers and logs; a URL in the message never shows its password."""
    shown = without_url_passwords(message)
    return {
        "error": {"type": error_type, "status": status, "message": shown, "server": server, "cause": cause}
    }


class GymError(Exception):
    """An error a handler raises on purpose, answered with its own status, type and message."""

    def __init__(self, status: int, error_type: str, message: str, cause: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.message = message
        self.cause = cause


def _inner_cause(body: bytes) -> Any:
    """The inner server's error as data: its own envelope's `error` object, other JSON, or text."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body[:MAX_CAUSE_TEXT_CHARS].decode("utf-8", errors="replace")
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict) and len(parsed) == 1:
        return parsed["error"]
    return parsed


def exception_to_error_body(error: BaseException, server: str) -> dict[str, Any]:
    """Map an exception raised in a handler to the error body, keeping statuses of inner calls."""
    if isinstance(error, HTTPStatusError):
        return error_body(
            "inner_server_error",
            error.status,
            f"{server} got HTTP {error.status} calling {error.url}",
            server,
            _inner_cause(error.response_content),
        )
    if isinstance(error, RequestFailedError):
        status = _STATUS_FOR_FAILED_REQUEST.get(error.kind, 502)
        return error_body(error.kind, status, str(error), server)
    if isinstance(error, GymError):
        return error_body(error.error_type, error.status, error.message, server, error.cause)
    if _nested_too_deeply(error):
        return error_body(
            "nested_too_deeply", 422, "the request body nests arrays or objects too deeply", server
        )
    return error_body("internal_error", 500, f"{type(error).__name__}: {error}", server)


def _nested_too_deeply(error: BaseException) -> bool:
    """A body within the parser's depth limit can still be too deep for what handles it: validation and
    the JSON writer recurse (orjson writes at most 255 levels)."""
    if isinstance(error, RecursionError):
        return True
    return isinstance(error, orjson.JSONEncodeError) and "Recursion limit" in str(error)


def _retry_after(error: Exception) -> list[tuple[bytes, bytes]]:
    """A peer's `Retry-After` goes back with its status: a 429 passed on is only useful with its wait."""
    if isinstance(error, HTTPStatusError) and error.headers and (value := error.headers.get("Retry-After")):
        return [(b"retry-after", value.encode("latin-1", errors="replace"))]
    return []


class ErrorEnvelopeMiddleware:
    """Pure ASGI middleware turning an escaped exception into the error body (if nothing was sent yet)."""

    def __init__(self, app: ASGIApp, server_label: str) -> None:
        self.app = app
        self.server_label = server_label

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        response_started = False

        async def tracking_send(message: Message) -> None:
            nonlocal response_started
            if message["type"] == "http.response.start":
                response_started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as error:
            if response_started:
                raise
            body = exception_to_error_body(error, self.server_label)
            status = body["error"]["status"]
            if status >= 500 and not isinstance(error, HTTPStatusError | RequestFailedError | GymError):
                logger.exception("%s: unhandled error on %s", self.server_label, scope.get("path"))
            else:
                # One line, classified, with the status answered: the failure is the peer's, not a bug here.
                logger.warning("%s: %s (%d)", self.server_label, body["error"]["message"], status)
            payload = orjson.dumps(body)
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
            ]
            await send(
                {"type": "http.response.start", "status": status, "headers": headers + _retry_after(error)}
            )
            await send({"type": "http.response.body", "body": payload})
