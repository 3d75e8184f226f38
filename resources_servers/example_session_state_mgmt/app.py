"""example_session_state_mgmt: a per-rollout counter, the minimal example of state kept between tool calls.

Each rollout is one session (the signed session cookie); its counter lives in the base server's session
store (`self.sessions`). Unlike NeMo Gym's version, the state cannot grow without bound: `/verify` drops
the counter, and the store is an LRU capped at `max_sessions`, so rollouts that never reach verification
(failed, timed out, abandoned) are eventually evicted instead of leaking.
"""

from fastapi import FastAPI, Request
from pydantic import BaseModel

from nemo_gym.base_resources_server import (
    BaseSeedSessionRequest,
    BaseSeedSessionResponse,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.http.sessions import get_session_id


class SeedCounterRequest(BaseSeedSessionRequest):
    initial_count: int


class IncrementCounterRequest(BaseModel):
    count: int


class IncrementCounterResponse(BaseModel):
    success: bool


class CounterValueResponse(BaseModel):
    count: int


class CounterVerifyRequest(BaseVerifyRequest):
    expected_count: int


class SessionStateResourcesServer(SimpleResourcesServer):
    """Its config is the base one: `max_sessions` caps the session store."""

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        app.post("/increment_counter")(self.increment_counter)
        app.post("/get_counter_value")(self.get_counter_value)
        return app

    async def seed_session(self, request: Request, body: SeedCounterRequest) -> BaseSeedSessionResponse:
        """Set-default: a session that already has a counter keeps it, so a repeated seed cannot reset it."""
        session_id = get_session_id(request)
        current = self.sessions.get(session_id)
        self.sessions.put(session_id, body.initial_count if current is None else current)
        return BaseSeedSessionResponse()

    async def increment_counter(
        self, request: Request, body: IncrementCounterRequest
    ) -> IncrementCounterResponse:
        session_id = get_session_id(request)
        self.sessions.put(session_id, (self.sessions.get(session_id) or 0) + body.count)
        return IncrementCounterResponse(success=True)

    async def get_counter_value(self, request: Request) -> CounterValueResponse:
        """An unseeded session reads 0 without creating state, so a stray read cannot fill the store."""
        count = self.sessions.get(get_session_id(request))
        return CounterValueResponse(count=0 if count is None else count)

    async def verify(self, request: Request, body: CounterVerifyRequest) -> BaseVerifyResponse:
        """1.0 iff this session has a counter equal to `expected_count`; the session's state is dropped."""
        count = self.sessions.pop(get_session_id(request))
        reward = 1.0 if count is not None and count == body.expected_count else 0.0
        return BaseVerifyResponse(**body.model_dump(exclude={"expected_count"}), reward=reward)


if __name__ == "__main__":
    SessionStateResourcesServer.run_webserver()
