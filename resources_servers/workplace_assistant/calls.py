"""The calls of workplace_assistant: what a tool route and `/verify` answer, and the two call lists
`/verify` replays (the rollout's function calls and the task's ground truth)."""

import json
from typing import Any

from pydantic import BaseModel

from nemo_gym.base_resources_server import BaseVerifyRequest, BaseVerifyResponse
from nemo_gym.openai_utils import NeMoGymResponse


class GroundTruthCall(BaseModel):
    name: str
    arguments: str | dict[str, Any] = "{}"


class ToolOutput(BaseModel):
    output: Any


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


def predicted_calls(response: NeMoGymResponse) -> list[tuple[str, Any]]:
    """The rollout's function calls, in order."""
    return [(item.name, item.arguments) for item in response.output if item.type == "function_call"]
