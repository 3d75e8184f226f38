"""NeMo Gym 0.7's agent sessions: an environment server seeds a session on the agent (naming the episode
and granting it tools), drives one `/v1/responses` turn with the session's cookie, then closes it and gets
a receipt (the resources cookies its tools ended with).

The table enforces the protocol's rules so a retried or late call can never act on the wrong episode:
a seed is idempotent for the same body and refused for another; a closed id stays closed (its receipt is
replayed to a retried close for `receipt_window_s`, then refused); closing an id never seeded leaves a
receipt, so a seed arriving late cannot open it. Everything is bounded by `max_sessions`.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from nemo_gym.http.errors import GymError
from nemo_gym.telemetry.metrics import record_sessions
from nemo_gym.wire.sessions import (
    AgentCloseSessionRequest,
    AgentCloseSessionResponse,
    AgentSeedSessionRequest,
    AgentSeedSessionResponse,
    DirectHTTPToolAccess,
    EpisodeId,
    ToolAccess,
)

# NeMo Gym's key of the agent session id in the agent's signed session cookie.
AGENT_SESSION_COOKIE_KEY = "agent_session_id"
DEFAULT_RECEIPT_WINDOW_S = 300.0
DEFAULT_MAX_AGENT_SESSIONS = 100_000


@dataclass
class AgentSession:
    """An open agent session: its seed, the tools it may use, and the resources cookies as they stand."""

    seed: AgentSeedSessionRequest
    tool_accesses: list[ToolAccess]
    resources_cookies: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        grant = self.tool_grant
        if isinstance(grant, DirectHTTPToolAccess) and not self.resources_cookies:
            self.resources_cookies = dict(grant.cookies)  # the session's cookies start as the grant's

    @property
    def tool_grant(self) -> ToolAccess | None:
        """The grant tools are called through (an agent's loop takes one)."""
        return self.tool_accesses[0] if self.tool_accesses else None


@dataclass
class _Receipt:
    answer: AgentCloseSessionResponse
    episode_id: EpisodeId
    expires_at: float


def conflict(message: str) -> GymError:
    return GymError(409, "agent_session_conflict", message)


class AgentSessionTable:
    """The agent sessions of one agent process (they live in its memory: one worker only)."""

    def __init__(
        self,
        configured_accesses: list[ToolAccess] | None = None,
        *,
        max_sessions: int = DEFAULT_MAX_AGENT_SESSIONS,
        receipt_window_s: float = DEFAULT_RECEIPT_WINDOW_S,
    ) -> None:
        self.configured_accesses = list(configured_accesses or [])
        self.max_sessions = max_sessions
        self.receipt_window_s = receipt_window_s
        self._open: OrderedDict[str, AgentSession] = OrderedDict()
        self._receipts: OrderedDict[str, _Receipt] = OrderedDict()
        self._expired_receipts: OrderedDict[str, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._open)

    def seed(self, body: AgentSeedSessionRequest, cookie_session: dict[str, Any]) -> AgentSeedSessionResponse:
        """Open the session (or answer again for an identical retry) and bind it to the caller's cookie."""
        self._forget_expired_receipts()
        session_id = body.agent_session_id
        bound = cookie_session.get(AGENT_SESSION_COOKIE_KEY)
        if bound is not None and bound != session_id:
            raise conflict("agent_session_id does not match the session cookie")
        if session_id in self._receipts or session_id in self._expired_receipts:
            raise conflict("Agent session is already closed")
        existing = self._open.get(session_id)
        if existing is not None and existing.seed != body:
            raise conflict("agent_session_id is already bound to another seed request")
        if existing is None:
            accesses = self.effective_accesses(body.tool_accesses)
            self._open[session_id] = AgentSession(body, accesses)
            evicted = 0
            while len(self._open) > self.max_sessions:
                self._open.popitem(last=False)
                evicted += 1
            record_sessions("agent", opened=1, evicted=evicted)
        cookie_session[AGENT_SESSION_COOKIE_KEY] = session_id
        return AgentSeedSessionResponse(agent_session_id=session_id)

    def effective_accesses(self, requested: list[ToolAccess]) -> list[ToolAccess]:
        """The configured grants, each replaced by a requested one of the same name, plus the new ones."""
        by_name = {grant.name: grant for grant in self.configured_accesses}
        by_name.update({grant.name: grant for grant in requested})
        return list(by_name.values())

    def active(self, cookie_session: dict[str, Any]) -> AgentSession | None:
        """The open session the caller's cookie names; None when the cookie names none."""
        session_id = cookie_session.get(AGENT_SESSION_COOKIE_KEY)
        if session_id is None:
            return None
        if not isinstance(session_id, str):
            raise conflict("Invalid agent session marker")
        session = self._open.get(session_id)
        if session is None:
            raise conflict("Unknown or closing agent_session_id")
        return session

    def close(
        self, body: AgentCloseSessionRequest, cookie_session: dict[str, Any]
    ) -> AgentCloseSessionResponse:
        """Close the session and keep its receipt; a retried close gets the same receipt."""
        self._forget_expired_receipts()
        session_id = body.agent_session_id
        bound = cookie_session.get(AGENT_SESSION_COOKIE_KEY)
        if bound is not None and bound != session_id:
            raise conflict("agent_session_id does not match the session cookie")
        receipt = self._receipts.get(session_id)
        if receipt is not None:
            if receipt.episode_id != body.episode_id:
                raise conflict("episode_id does not match the seeded agent session")
            return receipt.answer
        if session_id in self._expired_receipts:
            raise conflict("Agent close receipt has expired")
        session = self._open.get(session_id)
        if session is not None and session.seed.episode_id != body.episode_id:
            raise conflict("episode_id does not match the seeded agent session")
        if self._open.pop(session_id, None) is not None:
            record_sessions("agent", closed=1)
        answer = AgentCloseSessionResponse(
            agent_session_id=session_id,
            resources_cookies=session.resources_cookies
            if session and isinstance(session.tool_grant, DirectHTTPToolAccess)
            else None,
        )
        self._receipts[session_id] = _Receipt(
            answer, body.episode_id, time.monotonic() + self.receipt_window_s
        )
        while len(self._receipts) > self.max_sessions:
            self._remember_expired(self._receipts.popitem(last=False)[0])
        return answer

    def _forget_expired_receipts(self) -> None:
        now = time.monotonic()
        while self._receipts:
            session_id, receipt = next(iter(self._receipts.items()))
            if receipt.expires_at > now:
                return
            del self._receipts[session_id]
            self._remember_expired(session_id)

    def _remember_expired(self, session_id: str) -> None:
        self._expired_receipts[session_id] = None
        while len(self._expired_receipts) > self.max_sessions:
            self._expired_receipts.popitem(last=False)
