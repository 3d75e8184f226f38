"""workplace_assistant: office tools (email, calendar, analytics, project tasks, CRM, company directory) over
per-session copies of shipped CSV tables, rewarded by comparing final states.

The model acts in its own copy of the office for one rollout (the session). `/verify` does not look at that
copy: it replays the rollout's function calls and the task's ground-truth calls on two fresh offices and
rewards 1.0 when the resulting tables agree, so any sequence of calls with the right effect is accepted and
read-only calls never matter. The replay is CPU work and runs in the shared process pool.
"""

import json
import logging
from typing import Any

from fastapi import Body, FastAPI, HTTPException, Request
from pydantic import BaseModel, Field, PrivateAttr

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseSeedSessionRequest,
    BaseSeedSessionResponse,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.cpu_pool import CPUCallTimeoutError, run_cpu_bound
from nemo_gym.pass_at_k_metrics import subset_pass_majority_metrics
from nemo_gym.reward_profile import highest_k_metrics
from nemo_gym.sessions import SessionStore, get_session_id
from resources_servers.workplace_assistant.workspace import UnknownToolError, Workspace, replay_reward

logger = logging.getLogger("workplace_assistant")

NOT_SEEDED = "Session not initialized. Please call seed_session first."


class WorkplaceAssistantConfig(BaseResourcesServerConfig):
    # A workspace shares the base rows and holds one list per table: a few tens of kB per session.
    max_sessions: int = Field(default=20_000, ge=1)
    verify_timeout_s: float = Field(default=30.0, gt=0)


class GroundTruthCall(BaseModel):
    name: str
    arguments: str | dict[str, Any] = "{}"


class WorkplaceVerifyRequest(BaseVerifyRequest):
    ground_truth: list[GroundTruthCall] | str
    id: int | str | None = None
    category: str | None = None
    environment_name: str | None = None


class WorkplaceVerifyResponse(BaseVerifyResponse):
    ground_truth: list[GroundTruthCall] | str
    id: int | str | None = None
    category: str | None = None
    environment_name: str | None = None


class ToolOutput(BaseModel):
    output: Any


def ground_truth_calls(ground_truth: list[GroundTruthCall] | str) -> list[tuple[str, Any]]:
    """The expected calls; a string holds the same list JSON-encoded (unparsable → no calls)."""
    if isinstance(ground_truth, str):
        try:
            decoded = json.loads(ground_truth)
        except ValueError:
            return []
        if not isinstance(decoded, list):
            return []
        return [
            (call["name"], call.get("arguments", "{}"))
            for call in decoded
            if isinstance(call, dict) and isinstance(call.get("name"), str)
        ]
    return [(call.name, call.arguments) for call in ground_truth]


def predicted_calls(body: BaseVerifyRequest) -> list[tuple[str, Any]]:
    return [(item.name, item.arguments) for item in body.response.output if item.type == "function_call"]


class WorkplaceAssistantResourcesServer(SimpleResourcesServer):
    config: WorkplaceAssistantConfig
    _store: SessionStore[Workspace] = PrivateAttr()

    def model_post_init(self, context: object) -> None:
        super().model_post_init(context)
        self._store = SessionStore(self.config.max_sessions)

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        # Registered last so /seed_session, /verify and /aggregate_metrics keep their own handlers.
        app.post("/{path}")(self.run_tool)
        return app

    async def seed_session(self, request: Request, body: BaseSeedSessionRequest) -> BaseSeedSessionResponse:
        """Every seed starts the session from the shipped data, discarding earlier changes."""
        self._store.put(get_session_id(request), Workspace())
        return BaseSeedSessionResponse()

    async def run_tool(
        self, path: str, request: Request, body: dict[str, Any] | None = Body(default=None)
    ) -> ToolOutput:
        """One tool call; tool-level failures are reported to the model as text, never as HTTP errors."""
        workspace = self._store.get(get_session_id(request))
        if workspace is None:
            raise HTTPException(status_code=400, detail=NOT_SEEDED)
        try:
            return ToolOutput(output=workspace.call(path, body or {}))
        except UnknownToolError:
            return ToolOutput(output=f"Error executing tool '{path}': no such tool")
        except Exception as error:
            return ToolOutput(output=f"Error executing tool '{path}': {error}")

    async def verify(self, request: Request, body: WorkplaceVerifyRequest) -> WorkplaceVerifyResponse:
        """Reward 1.0 iff replaying the rollout's calls and the ground truth gives equal tables; the session
        state is dropped. A replay past its deadline earns 0.0."""
        self._store.pop(get_session_id(request))
        try:
            reward = await run_cpu_bound(
                replay_reward,
                predicted_calls(body),
                ground_truth_calls(body.ground_truth),
                timeout_s=self.config.verify_timeout_s,
            )
        except CPUCallTimeoutError:
            logger.warning("state replay exceeded %s s; reward 0.0", self.config.verify_timeout_s)
            reward = 0.0
        return WorkplaceVerifyResponse(**body.model_dump(), reward=reward)

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """pass@k overall and per task category (email, calendar, CRM, ...)."""
        return subset_pass_majority_metrics(tasks, "category")

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        key = {name: value for name, value in agent_metrics.items() if name == "mean/reward"}
        key.update(highest_k_metrics(agent_metrics, "pass@{k}", "pass@1[avg-of-{k}]"))
        return key


if __name__ == "__main__":
    WorkplaceAssistantResourcesServer.run_webserver()
