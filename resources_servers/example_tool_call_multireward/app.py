"""example_tool_call_multireward: one tool-call task scored by three independent 0/1 components.

The reward is their sum (0-3), so a trainer can tell a well-formed but wrong call from a right call
wrapped in chatter, and the components can be weighted or logged separately. The server has no tool
routes: only the call the model makes is judged, never its result.
"""

import json
from typing import Any

from fastapi import Request
from pydantic import BaseModel, Field

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.openai_utils import NeMoGymResponse


class MultiRewardConfig(BaseResourcesServerConfig):
    pass


class ExpectedCall(BaseModel):
    """The call the task wants. An empty object (no `name`) can never be matched."""

    name: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)


class PredictedCall(BaseModel):
    name: str
    arguments: dict[str, Any]


class MultiRewardVerifyRequest(BaseVerifyRequest):
    expected_call: ExpectedCall = Field(default_factory=ExpectedCall)


class RewardComponents(BaseModel):
    correctness: float
    schema_valid: float
    format: float


class MultiRewardVerifyResponse(BaseVerifyResponse):
    reward_components: RewardComponents
    correctness: float
    schema_valid: float
    format: float
    predicted_calls: list[PredictedCall]


def parse_arguments(arguments: str) -> dict[str, Any] | None:
    """The call's arguments as an object, or None when they are not a JSON object."""
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def required_parameters(tools: list[Any], name: str) -> list[str]:
    """`parameters.required` of the function tool called `name`; an unknown tool requires nothing."""
    for tool in tools:
        if isinstance(tool, dict) and tool.get("type") == "function" and tool.get("name") == name:
            return list((tool.get("parameters") or {}).get("required") or [])
    return []


def format_score(response: NeMoGymResponse) -> float:
    """1.0 for exactly one function call and no message at all (the task asks for a bare call)."""
    calls = sum(item.type == "function_call" for item in response.output)
    messages = sum(item.type == "message" for item in response.output)
    return float(calls == 1 and messages == 0)


def schema_score(first_call: Any, tools: list[Any]) -> float:
    """1.0 when the first call's arguments are an object holding every required parameter of its tool."""
    if first_call is None:
        return 0.0
    arguments = parse_arguments(first_call.arguments)
    if arguments is None:
        return 0.0
    return float(all(key in arguments for key in required_parameters(tools, first_call.name)))


def correctness_score(predicted: list[PredictedCall], expected: ExpectedCall) -> float:
    """1.0 when some call has the expected name and every expected argument; extra arguments are allowed."""
    if expected.name is None:
        return 0.0
    return float(
        any(
            call.name == expected.name
            and all(
                key in call.arguments and call.arguments[key] == value
                for key, value in expected.arguments.items()
            )
            for call in predicted
        )
    )


class MultiRewardResourcesServer(SimpleResourcesServer):
    config: MultiRewardConfig

    async def verify(self, request: Request, body: MultiRewardVerifyRequest) -> MultiRewardVerifyResponse:
        """reward = correctness + schema_valid + format; each component is 0.0 or 1.0."""
        calls = [item for item in body.response.output if item.type == "function_call"]
        predicted = [
            PredictedCall(name=call.name, arguments=parse_arguments(call.arguments) or {}) for call in calls
        ]
        components = RewardComponents(
            correctness=correctness_score(predicted, body.expected_call),
            schema_valid=schema_score(calls[0] if calls else None, body.responses_create_params.tools),
            format=format_score(body.response),
        )
        return MultiRewardVerifyResponse(
            responses_create_params=body.responses_create_params,
            response=body.response,
            reward=components.correctness + components.schema_valid + components.format,
            reward_components=components,
            predicted_calls=predicted,
            **components.model_dump(),
        )


if __name__ == "__main__":
    MultiRewardResourcesServer.run_webserver()
