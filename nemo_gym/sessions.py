"""Per-rollout sessions carried in a signed cookie.

The cookie name is `<ServerClass>___<instance>`, as the reference system names it, so callers that thread
cookies through a rollout keep working. The signing secret, however, is a random value shared by the
processes of one deployment (handed down in NEMO_GYM_SESSION_SECRET), not the public cookie name, so a
client cannot forge or replay another deployment's session: a cookie that fails the signature check is
simply a new session.
"""

from __future__ import annotations

import logging
import os
import secrets
import uuid
from collections import OrderedDict
from typing import Generic, TypeVar

from fastapi import FastAPI, Request
from starlette.middleware.sessions import SessionMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

logger = logging.getLogger("nemo_gym.sessions")
StateT = TypeVar("StateT")

SESSION_SECRET_ENV_VAR_NAME = "NEMO_GYM_SESSION_SECRET"
SESSION_ID_KEY = "session_id"
SESSION_MAX_AGE_S = 14 * 24 * 3600

_process_secret: str | None = None


def deployment_session_secret() -> str:
    """The deployment's signing secret, or a random one for a server started on its own."""
    global _process_secret
    from_env = os.environ.get(SESSION_SECRET_ENV_VAR_NAME)
    if from_env:
        return from_env
    if _process_secret is None:
        _process_secret = new_session_secret()
    return _process_secret


def new_session_secret() -> str:
    """A fresh signing secret; the launcher makes one per deployment and hands it to every server."""
    return secrets.token_hex(32)


def session_cookie_name(server_class_name: str, instance_name: str) -> str:
    return f"{server_class_name}___{instance_name}"


class _SessionIdMiddleware:
    """Give every request a session id, reassigning it each time so the cookie is always re-sent."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            session = scope["session"]
            session[SESSION_ID_KEY] = session.get(SESSION_ID_KEY) or uuid.uuid4().hex
        await self.app(scope, receive, send)


def install_session_middleware(app: FastAPI, cookie_name: str, secret: str) -> None:
    app.add_middleware(_SessionIdMiddleware)
    app.add_middleware(
        SessionMiddleware, secret_key=secret, session_cookie=cookie_name, max_age=SESSION_MAX_AGE_S
    )


def get_session_id(request: Request) -> str:
    return request.session[SESSION_ID_KEY]


class SessionStore(Generic[StateT]):
    """Per-session state of a resources server: session id -> state, least recently used first.

    Holding more than `max_sessions` evicts the oldest session (memory stays bounded when rollouts never
    reach `/verify`); the first eviction is logged, since it means rollouts outnumber the cap or are being
    abandoned, and a rollout still using an evicted session loses its state. A server runs one event loop
    and no method awaits, so no lock is needed.
    """

    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self.evictions = 0
        self._states: OrderedDict[str, StateT] = OrderedDict()

    def __len__(self) -> int:
        return len(self._states)

    def get(self, session_id: str) -> StateT | None:
        if session_id not in self._states:
            return None
        self._states.move_to_end(session_id)
        return self._states[session_id]

    def put(self, session_id: str, state: StateT) -> None:
        self._states[session_id] = state
        self._states.move_to_end(session_id)
        while len(self._states) > self.max_sessions:
            self._states.popitem(last=False)
            self.evictions += 1
            if self.evictions == 1:
                logger.warning(
                    "session store reached max_sessions=%d; evicting the least recently used session "
                    "(a rollout still running with it loses its state). Raise max_sessions if this is "
                    "not expected.",
                    self.max_sessions,
                )

    def pop(self, session_id: str) -> StateT | None:
        return self._states.pop(session_id, None)
