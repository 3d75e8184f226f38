"""Per-rollout sessions carried in a signed cookie.

The cookie name is `<ServerClass>___<instance>`, as the reference system names it, so callers that thread
cookies through a rollout keep working. The signing secret, however, is a random value shared by the
processes of one deployment (handed down in NEMO_GYM_SESSION_SECRET), not the public cookie name, so a
client cannot forge or replay another deployment's session: a cookie that fails the signature check is
simply a new session.
"""

from __future__ import annotations

import os
import secrets
import uuid

from fastapi import FastAPI, Request
from starlette.middleware.sessions import SessionMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

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
