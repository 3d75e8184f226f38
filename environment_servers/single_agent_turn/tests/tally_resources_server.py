"""A resources server for episode tests: a per-session tally (`/add`), a reward for reaching the row's
`expected_total`, faults on request (`fail_at: seed | verify | close`), and `GET /_sessions` reporting
which sessions were seeded and closed, so a test can see that cleanup happened."""

from fastapi import FastAPI, HTTPException, Request
from pydantic import BaseModel, PrivateAttr

from nemo_gym.base_resources_server import (
    BaseSeedSessionRequest,
    BaseSeedSessionResponse,
    BaseVerifyRequest,
    BaseVerifyResponse,
    ResourcesCloseSessionRequest,
    ResourcesCloseSessionResponse,
    SimpleResourcesServer,
)
from nemo_gym.sessions import get_session_id


class TallySeed(BaseSeedSessionRequest):
    fail_at: str | None = None


class Addend(BaseModel):
    n: int


class TallyVerifyRequest(BaseVerifyRequest):
    expected_total: int
    fail_at: str | None = None


class TallyResourcesServer(SimpleResourcesServer):
    _seeded: list[str] = PrivateAttr(default_factory=list)
    _closed: list[str] = PrivateAttr(default_factory=list)
    _faults: dict[str, str] = PrivateAttr(default_factory=dict)

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        app.post("/add")(self.add)
        app.get("/_sessions")(self.report)
        return app

    async def seed_session(self, request: Request, body: TallySeed) -> BaseSeedSessionResponse:
        session_id = get_session_id(request)
        self._seeded.append(session_id)
        if body.fail_at:
            self._faults[session_id] = body.fail_at
        if body.fail_at == "seed":
            raise HTTPException(status_code=503, detail="seed refused on purpose")
        self.sessions.put(session_id, 0)
        return BaseSeedSessionResponse()

    async def add(self, request: Request, body: Addend) -> dict[str, int]:
        session_id = get_session_id(request)
        total = (self.sessions.get(session_id) or 0) + body.n
        self.sessions.put(session_id, total)
        return {"total": total}

    async def verify(self, request: Request, body: TallyVerifyRequest) -> BaseVerifyResponse:
        if body.fail_at == "verify":
            raise HTTPException(status_code=400, detail="verify refused on purpose")
        total = self.sessions.get(get_session_id(request))
        reward = 1.0 if total == body.expected_total else 0.0
        return BaseVerifyResponse(**body.model_dump(exclude={"expected_total", "fail_at"}), reward=reward)

    async def close_resources_session(
        self, body: ResourcesCloseSessionRequest
    ) -> ResourcesCloseSessionResponse:
        self._closed.append(body.resources_session_id)
        if self._faults.get(body.resources_session_id) == "close":
            raise HTTPException(status_code=500, detail="close refused on purpose")
        return await super().close_resources_session(body)

    async def report(self) -> dict[str, list[str]]:
        return {"seeded": self._seeded, "closed": self._closed}


if __name__ == "__main__":
    TallyResourcesServer.run_webserver()
