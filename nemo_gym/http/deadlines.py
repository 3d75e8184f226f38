"""A call's remaining time budget, carried down the chain of servers it reaches.

A rollout's budget is set where it starts (the collector's `--rollout-timeout`, the agent's
`rollout_deadline_s`). Every HTTP call made while a budget is active waits no longer than what is left of
it, and tells its peer how long that is in the `X-Gym-Deadline-S` header; the peer's servers take it up
for the duration of the request (`CallerDeadlineMiddleware`). So a model call made by an agent whose caller
has 20 s left gives up after 20 s, instead of after its own default deadline while nobody waits any more.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from contextvars import ContextVar

from starlette.types import ASGIApp, Receive, Scope, Send

DEADLINE_HEADER = "X-Gym-Deadline-S"
_DEADLINE_HEADER_KEY = DEADLINE_HEADER.lower().encode()

# The monotonic time at which the current call's budget runs out; None when nobody set one.
_deadline: ContextVar[float | None] = ContextVar("gym_call_deadline", default=None)


def remaining_s() -> float | None:
    """Seconds left of the current budget (0 when spent), or None when there is none."""
    deadline = _deadline.get()
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def bounded(deadline_s: float) -> float:
    """`deadline_s`, cut to what is left of the current budget."""
    left = remaining_s()
    return deadline_s if left is None else min(deadline_s, left)


@contextlib.contextmanager
def budget(seconds: float) -> Iterator[float]:
    """Within the block, calls have at most `seconds` (and never more than an outer budget left them).
    Yields the budget in force, in seconds."""
    with detached_budget(bounded(seconds)) as seconds_in_force:
        yield seconds_in_force


@contextlib.contextmanager
def detached_budget(seconds: float) -> Iterator[float]:
    """Within the block, calls have `seconds` whatever an outer budget has left: for cleanup that must run
    after the work it cleans up ran out of time."""
    token = _deadline.set(time.monotonic() + seconds)
    try:
        yield seconds
    finally:
        _deadline.reset(token)


def announced(seconds: float) -> str:
    """The header value for `seconds` left, rounded up to the millisecond: the peer's budget then ends
    after the caller's own (never before it), so the caller's deadline, not the peer's, ends the call."""
    return f"{math.ceil(seconds * 1000) / 1000:.3f}"


def parse_header(value: bytes | str) -> float | None:
    """The budget a caller announced; None for a value that is not a finite, non-negative number."""
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


class CallerDeadlineMiddleware:
    """Pure ASGI middleware: a request that carries `X-Gym-Deadline-S` runs within that budget."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for name, value in scope["headers"]:
                if name == _DEADLINE_HEADER_KEY:
                    seconds = parse_header(value)
                    if seconds is not None:
                        with budget(seconds):
                            await self.app(scope, receive, send)
                        return
                    break
        await self.app(scope, receive, send)
