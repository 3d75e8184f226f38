"""simple_agent, plus `GET /_agent_sessions`: the agent sessions it opened and closed, so a test can see
that every episode's cleanup reached the agent."""

from fastapi import FastAPI, Request
from pydantic import PrivateAttr

from nemo_gym.base_responses_api_agent import (
    AgentCloseSessionRequest,
    AgentCloseSessionResponse,
    AgentSeedSessionRequest,
    AgentSeedSessionResponse,
)
from responses_api_agents.simple_agent.app import SimpleAgent


class RecordingAgent(SimpleAgent):
    _opened: list[str] = PrivateAttr(default_factory=list)
    _closed: list[str] = PrivateAttr(default_factory=list)

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        app.get("/_agent_sessions")(self.report)
        return app

    async def seed_agent_session(
        self, request: Request, body: AgentSeedSessionRequest
    ) -> AgentSeedSessionResponse:
        answer = await super().seed_agent_session(request, body)
        self._opened.append(body.agent_session_id)
        return answer

    async def close_agent_session(
        self, request: Request, body: AgentCloseSessionRequest
    ) -> AgentCloseSessionResponse:
        self._closed.append(body.agent_session_id)
        return await super().close_agent_session(request, body)

    async def report(self) -> dict[str, object]:
        return {"opened": self._opened, "closed": self._closed, "open_now": len(self.agent_sessions)}


if __name__ == "__main__":
    RecordingAgent.run_webserver()
