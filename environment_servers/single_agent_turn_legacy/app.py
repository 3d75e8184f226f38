"""single_agent_turn_legacy: the single-agent-turn episode behind 0.4's flat `/run`.

A flat task row comes in (as a 0.4 collector or trainer sends it to an agent), runs as one typed episode
(see `single_agent_turn`), and goes back as a flat result: the verify answer plus `agent_ref`, or, for a
failed episode, a row of `_ng_failure_*` keys (still HTTP 200) that collectors file as a failure. An
episode body is taken too.
"""

from __future__ import annotations

from typing import Any

from fastapi import Body, FastAPI
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from nemo_gym.agents.single_agent_turn import (
    SingleAgentTurnEnvironmentServer,
    SingleAgentTurnEnvironmentServerConfig,
)
from nemo_gym.server_utils import new_app
from nemo_gym.wire.episodes import SingleAgentTurnRequest, materialize_task

FAILURE_CLASS = "environment_server_failed"


class SingleAgentTurnLegacyEnvironmentServer(SingleAgentTurnEnvironmentServer):
    config: SingleAgentTurnEnvironmentServerConfig

    def setup_webserver(self) -> FastAPI:
        super().setup_webserver()  # sets up the admission limit
        app = new_app()
        app.post("/run")(self.run_flat)
        app.post("/aggregate_metrics")(self.aggregate_metrics)
        return app

    async def run_flat(self, body: dict[str, Any] = Body()) -> dict[str, Any]:
        """A flat row (or an episode body) in, a flat result or failure row out."""
        try:
            episode = SingleAgentTurnRequest.model_validate(
                body if "episode_id" in body and "task" in body else self.episode_of(body)
            )
        except ValidationError as error:
            raise RequestValidationError(
                [{**problem, "loc": ("body", *problem["loc"])} for problem in error.errors()]
            ) from None
        except ValueError as error:
            raise RequestValidationError(
                [{"type": "value_error", "loc": ("body",), "msg": str(error)}]
            ) from None
        answer = await self.run_request(episode)
        agent_ref = {"name": self.config.agent_server.name}
        if answer.result is not None:
            result = answer.result.model_dump(mode="json")
            if result.get("ng_agent_observations") is None:
                result.pop("ng_agent_observations", None)
            return {**result, "agent_ref": agent_ref}
        failure = answer.failure
        flat = {
            "_ng_failure_class": FAILURE_CLASS,
            "_ng_failure_terminal": failure.terminal,
            "_ng_failure_message": failure.failure_reason,
            "_ng_failure_stage": failure.stage,
            "agent_ref": agent_ref,
        }
        if failure.partial_response is not None:
            flat["_ng_failure_partial_response"] = failure.partial_response.model_dump(mode="json")
        return flat

    def episode_of(self, row: dict[str, Any]) -> dict[str, Any]:
        """A flat row as an episode request (ValueError naming the key that does not fit)."""
        known = {
            self.config.resources_server.name,
            self.config.agent_server.name,
            self.config.name,
        }
        taskset = row.get("task_source") or self.config.resources_server.name
        if taskset not in known:
            raise ValueError(f"task_source {taskset!r} is none of {sorted(known)}")
        agent_ref = row.get("agent_ref")
        if isinstance(agent_ref, dict) and agent_ref.get("name") not in (None, self.config.agent_server.name):
            raise ValueError(
                f"agent_ref {agent_ref.get('name')!r} is not this server's agent "
                f"{self.config.agent_server.name!r}"
            )
        attempt = row.get("_ng_attempt_index", 0)
        if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 0:
            raise ValueError(f"_ng_attempt_index must be a non-negative integer, got {attempt!r}")
        rollout_id = (
            row.get("_ng_rollout_id") or f"{row.get('_ng_task_index')}-{row.get('_ng_rollout_index')}"
        )
        return {
            "episode_id": {"rollout_id": rollout_id, "attempt": attempt},
            "task": materialize_task(row, taskset=taskset, task_index=row.get("_ng_task_index")),
        }


if __name__ == "__main__":
    SingleAgentTurnLegacyEnvironmentServer.run_webserver()
