"""workplace_assistant: office tools (email, calendar, analytics, project tasks, CRM, company directory) over
per-session copies of shipped CSV tables, rewarded by comparing final states.

The model acts in its own copy of the office for one rollout (the session). `/verify` does not look at that
copy: it replays the rollout's function calls and the task's ground-truth calls on two fresh offices and
rewards 1.0 when the resulting tables agree, so any sequence of calls with the right effect is accepted and
read-only calls never matter. The replay is CPU work and runs in the shared process pool.
"""

from typing import Any, ClassVar

from fastapi import Body, FastAPI, HTTPException, Request
from pydantic import Field

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseSeedSessionRequest,
    BaseSeedSessionResponse,
    SimpleResourcesServer,
)
from nemo_gym.envkit.pass_at_k_metrics import PassAtK
from nemo_gym.http.sessions import get_session_id
from nemo_gym.serving.cpu_pool import run_cpu_bound
from resources_servers.workplace_assistant import calls
from resources_servers.workplace_assistant.workspace import Workspace, replay_reward

NOT_SEEDED = "Session not initialized. Please call seed_session first."


class WorkplaceAssistantConfig(BaseResourcesServerConfig):
    # A workspace shares the base rows and holds one list per table: a few tens of kB per session.
    max_sessions: int = Field(default=20_000, ge=1)
    OLD_KEY_NAMES: ClassVar[dict[str, str]] = {"verify_timeout_s": "grading_timeout_s"}
    grading_timeout_s: float = Field(default=30.0, gt=0, description="deadline of one state replay")


class WorkplaceAssistantResourcesServer(SimpleResourcesServer):
    config: WorkplaceAssistantConfig
    pass_at_k = PassAtK(subset_key="category")  # overall and per task category (email, calendar, CRM, ...)
    key_metric_patterns = ("mean/reward", "pass@{k}/*", "pass@1[avg-of-{k}]/*")

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        # Registered last so /seed_session, /verify and /aggregate_metrics keep their own handlers.
        app.post("/{path}")(self.run_tool)
        return app

    async def seed_session(self, request: Request, body: BaseSeedSessionRequest) -> BaseSeedSessionResponse:
        """Every seed starts the session from the shipped data, discarding earlier changes."""
        self.sessions.put(get_session_id(request), Workspace())
        return BaseSeedSessionResponse()

    async def run_tool(
        self, path: str, request: Request, body: dict[str, Any] | None = Body(None)
    ) -> calls.ToolOutput:
        """One tool call; tool-level failures are reported to the model as text, never as HTTP errors."""
        workspace = self.sessions.get(get_session_id(request))
        if workspace is None:
            raise HTTPException(status_code=400, detail=NOT_SEEDED)
        return calls.ToolOutput(output=workspace.answer(path, body or {}))

    async def verify(
        self, request: Request, body: calls.WorkplaceVerifyRequest
    ) -> calls.WorkplaceVerifyResponse:
        """Reward 1.0 iff replaying the rollout's calls and the ground truth gives equal tables; the session
        state is dropped. A replay past its deadline earns 0.0."""
        self.sessions.pop(get_session_id(request))
        reward = await run_cpu_bound(
            replay_reward,
            calls.predicted_calls(body.response),
            calls.ground_truth_calls(body.ground_truth),
            timeout_s=self.config.grading_timeout_s,
            on_timeout=0.0,
        )
        return calls.WorkplaceVerifyResponse(**body.model_dump(), reward=reward)


if __name__ == "__main__":
    WorkplaceAssistantResourcesServer.run_webserver()
