"""Serving a buffered model answer as Server-Sent Events.

A model server never streams tokens: its upstream call is made whole (so token ids, capture, retries and
deadlines behave exactly as without `stream`), and the finished answer is then written as the event
sequence a streaming client expects. While the answer is not there yet, the client gets nothing for up
to one keep-alive interval; an answer (or an error) within that interval goes out as usual, an error
with its own HTTP status and body. A longer call starts the stream with `: keep-alive` comments every
interval, so a proxy or client read timeout does not cut it; an error after that point can only be told
inside the stream, as the dialect's error event.

The work is cancelled when the client goes away (the serving protocol cancels the request's task, and
with it the call awaited here) and ends with the caller's deadline like any other call.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, TypeVar

import orjson
from fastapi.responses import StreamingResponse

logger = logging.getLogger("nemo_gym.model_streaming")

Answer = TypeVar("Answer")

SSE_MEDIA_TYPE = "text/event-stream"
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
KEEPALIVE_COMMENT = b": keep-alive\n\n"
DEFAULT_KEEPALIVE_INTERVAL_S = 15.0


def sse_event(event: str, data: Any) -> bytes:
    """One named event (`event:` line and its JSON `data:` line)."""
    return b"event: " + event.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def sse_data(data: Any) -> bytes:
    """One unnamed event carrying JSON (the Chat Completions chunk framing)."""
    return b"data: " + orjson.dumps(data) + b"\n\n"


def event_stream(chunks: AsyncIterator[bytes] | Iterable[bytes]) -> StreamingResponse:
    return StreamingResponse(chunks, media_type=SSE_MEDIA_TYPE, headers=SSE_HEADERS)


async def stream_when_ready(
    call: Awaitable[Answer],
    render: Callable[[Answer], Iterable[bytes]],
    render_failure: Callable[[BaseException], Iterable[bytes]],
    keepalive_interval_s: float,
) -> StreamingResponse:
    """The SSE answer of `call`: `render(answer)` once it is done; an error raised within the first
    keep-alive interval is raised here (the caller answers it with its status), a later one becomes
    `render_failure(error)` inside the stream already started."""
    task = asyncio.ensure_future(call)
    try:
        await asyncio.wait({task}, timeout=keepalive_interval_s)
    except BaseException:  # the client went away, or the server stops: the call goes with it
        task.cancel()
        raise
    if task.done():
        return event_stream(render(task.result()))
    return event_stream(_kept_alive(task, render, render_failure, keepalive_interval_s))


async def _kept_alive(
    task: asyncio.Future[Answer],
    render: Callable[[Answer], Iterable[bytes]],
    render_failure: Callable[[BaseException], Iterable[bytes]],
    keepalive_interval_s: float,
) -> AsyncIterator[bytes]:
    try:
        while not task.done():
            yield KEEPALIVE_COMMENT
            await asyncio.wait({task}, timeout=keepalive_interval_s)
    finally:
        task.cancel()  # a no-op once done; otherwise the stream was closed under it
    error = task.exception()
    if error is None:
        for chunk in render(task.result()):
            yield chunk
        return
    logger.warning("the answer failed after its stream had started: %s: %s", type(error).__name__, error)
    for chunk in render_failure(error):
        yield chunk
