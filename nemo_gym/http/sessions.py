"""Per-rollout sessions carried in a signed cookie.

The cookie name is `<ServerClass>___<instance>`, as the reference system names it, so callers that thread
cookies through a rollout keep working. The signing secret, however, is a random value shared by the
processes of one deployment (handed down in NEMO_GYM_SESSION_SECRET), not the public cookie name, so a
client cannot forge or replay another deployment's session: a cookie that fails the signature check is
simply a new session.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import secrets
import time
import uuid
from collections import OrderedDict
from typing import Any, Generic, TypeVar

import orjson
from fastapi import FastAPI, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from nemo_gym.telemetry.metrics import record_sessions

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


class SignedSessionMiddleware:
    """`request.session` kept in a signed cookie, with a session id always present.

    The cookie value is `<payload>.<issued_at>.<signature>`: the session dict as base64url JSON, the Unix
    time it was signed, and base64url HMAC-SHA256 with the deployment's secret over `<cookie name>=` and the
    first two parts.
    A missing, expired, tampered or foreign cookie starts a new session. The cookie is re-signed and re-sent
    on every answer, so a caller that threads cookies always holds the current one.

    Written as one plain ASGI layer (no per-request cookie objects or signer objects) because every call
    of every rollout passes through it on each server it touches.
    """

    def __init__(
        self, app: ASGIApp, cookie_name: str, secret: str, max_age_s: int = SESSION_MAX_AGE_S
    ) -> None:
        self.app = app
        self.cookie_name = cookie_name
        self._cookie_prefix = f"{cookie_name}=".encode()
        self._mac = hmac.new(secret.encode(), digestmod=hashlib.sha256)
        # The name is signed too: one server's cookie value is not a valid session at another server.
        self._mac.update(self._cookie_prefix)
        self.max_age_s = max_age_s
        self._attributes = f"; path=/; Max-Age={max_age_s}; httponly; samesite=lax"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        session = self._load(self._incoming_value(scope["headers"]))
        if not session.get(SESSION_ID_KEY):
            session[SESSION_ID_KEY] = uuid.uuid4().hex
        scope["session"] = session

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                header = f"{self.cookie_name}={self.sign(scope['session'])}{self._attributes}"
                message["headers"] = [*message.get("headers", ()), (b"set-cookie", header.encode("latin-1"))]
            await send(message)

        await self.app(scope, receive, send_with_cookie)

    def sign(self, session: dict[str, Any]) -> str:
        payload = base64.urlsafe_b64encode(orjson.dumps(session)).rstrip(b"=")
        signed_part = payload + b"." + str(int(time.time())).encode()
        return (signed_part + b"." + self._signature(signed_part)).decode()

    def _signature(self, signed_part: bytes) -> bytes:
        mac = self._mac.copy()  # the keyed state is computed once; copying it is cheaper than re-keying
        mac.update(signed_part)
        return base64.urlsafe_b64encode(mac.digest()).rstrip(b"=")

    def _incoming_value(self, headers: list[tuple[bytes, bytes]]) -> bytes | None:
        for name, value in headers:
            if name == b"cookie":
                for pair in value.split(b";"):
                    pair = pair.strip()
                    if pair.startswith(self._cookie_prefix):
                        return pair[len(self._cookie_prefix) :].strip(b'"')
        return None

    def _load(self, value: bytes | None) -> dict[str, Any]:
        if not value:
            return {}
        signed_part, _, signature = value.rpartition(b".")
        payload, _, issued_at = signed_part.partition(b".")
        if not hmac.compare_digest(signature, self._signature(signed_part)):
            return {}
        try:
            if time.time() - int(issued_at) > self.max_age_s:
                return {}
            session = orjson.loads(base64.urlsafe_b64decode(payload + b"=" * (-len(payload) % 4)))
        except (ValueError, orjson.JSONDecodeError):
            return {}
        return session if isinstance(session, dict) else {}


def install_session_middleware(app: FastAPI, cookie_name: str, secret: str) -> None:
    app.add_middleware(SignedSessionMiddleware, cookie_name=cookie_name, secret=secret)


def get_session_id(request: Request) -> str:
    return request.session[SESSION_ID_KEY]


class SessionStore(Generic[StateT]):
    """Per-session state of a resources server: session id -> state, least recently used first.

    Holding more than `max_sessions` evicts the oldest session (memory stays bounded when rollouts never
    reach `/verify`); the first eviction is logged, since it means rollouts outnumber the cap or are being
    abandoned, and a rollout still using an evicted session loses its state. A server runs one event loop
    and no method awaits, so no lock is needed. `kind` names its sessions in `/metrics`.
    """

    def __init__(self, max_sessions: int, kind: str = "resources") -> None:
        self.max_sessions = max_sessions
        self.kind = kind
        self.evictions = 0
        self._states: OrderedDict[str, StateT] = OrderedDict()
        # Ids closed explicitly (`/close_session`), as many as states at most, the oldest forgotten first.
        self._closed: OrderedDict[str, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._states)

    def get(self, session_id: str) -> StateT | None:
        if session_id not in self._states:
            return None
        self._states.move_to_end(session_id)
        return self._states[session_id]

    def put(self, session_id: str, state: StateT) -> None:
        opened = session_id not in self._states
        self._states[session_id] = state
        self._states.move_to_end(session_id)
        evicted = 0
        while len(self._states) > self.max_sessions:
            self._states.popitem(last=False)
            evicted += 1
            self.evictions += 1
            if self.evictions == 1:
                logger.warning(
                    "session store reached max_sessions=%d; evicting the least recently used session "
                    "(a rollout still running with it loses its state). Raise max_sessions if this is "
                    "not expected.",
                    self.max_sessions,
                )
        record_sessions(self.kind, opened=int(opened), evicted=evicted)

    def pop(self, session_id: str) -> StateT | None:
        if session_id not in self._states:
            return None
        record_sessions(self.kind, closed=1)
        return self._states.pop(session_id)

    def close(self, session_id: str) -> None:
        """Release a session's state and remember that it was closed (closing twice is closing once)."""
        self.pop(session_id)
        self._closed[session_id] = None
        self._closed.move_to_end(session_id)
        while len(self._closed) > self.max_sessions:
            self._closed.popitem(last=False)

    def is_closed(self, session_id: str) -> bool:
        return session_id in self._closed
