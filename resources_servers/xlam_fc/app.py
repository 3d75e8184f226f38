"""xlam_fc: reward a model for issuing exactly the function calls a task expects (Salesforce xLAM 60k).

The tools in a task are only schemas: this server implements none of them, so a call the model makes
reaches no route (the agent feeds the 404 back). What counts is the set of `function_call` items in the
final response, matched against the row's `expected_answers`.
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
from nemo_gym.reward_profile import compute_pass_majority_metrics, default_key_metrics, highest_k_metrics


class XlamFcConfig(BaseResourcesServerConfig):
    pass


class FunctionCall(BaseModel):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class XlamFcVerifyRequest(BaseVerifyRequest):
    expected_answers: list[FunctionCall]


class XlamFcVerifyResponse(BaseVerifyResponse):
    num_expected: int
    num_predicted: int
    num_correct: int
    predicted_calls: list[FunctionCall]


def parse_arguments(arguments: str) -> dict[str, Any]:
    """A call's JSON arguments as a dict; anything that is not a JSON object counts as no arguments."""
    try:
        parsed = json.loads(arguments)
    except (json.JSONDecodeError, TypeError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def predicted_calls(response: NeMoGymResponse) -> list[FunctionCall]:
    """Every function call of the response, in output order."""
    return [
        FunctionCall(name=item.name, arguments=parse_arguments(item.arguments))
        for item in response.output
        if getattr(item, "type", None) == "function_call"
    ]


def call_matches(expected: FunctionCall, predicted: FunctionCall) -> bool:
    """Same name and every expected argument present with an equal value; extra predicted ones are allowed."""
    if expected.name != predicted.name:
        return False
    return all(
        key in predicted.arguments and predicted.arguments[key] == value
        for key, value in expected.arguments.items()
    )


def count_matches(expected: list[FunctionCall], predicted: list[FunctionCall]) -> int:
    """Greedy one-to-one matching: each expected call takes the first still-unused predicted call it matches."""
    used = [False] * len(predicted)
    matched = 0
    for want in expected:
        for index, got in enumerate(predicted):
            if not used[index] and call_matches(want, got):
                used[index] = True
                matched += 1
                break
    return matched


class XlamFcResourcesServer(SimpleResourcesServer):
    config: XlamFcConfig

    async def verify(self, request: Request, body: XlamFcVerifyRequest) -> XlamFcVerifyResponse:
        """1.0 iff every expected call is matched and nothing else was called (no calls expected: no calls made)."""
        predicted = predicted_calls(body.response)
        num_correct = count_matches(body.expected_answers, predicted)
        num_expected, num_predicted = len(body.expected_answers), len(predicted)
        reward = 1.0 if num_correct == num_expected == num_predicted else 0.0
        return XlamFcVerifyResponse(
            **body.model_dump(exclude={"expected_answers"}),
            reward=reward,
            num_expected=num_expected,
            num_predicted=num_predicted,
            num_correct=num_correct,
            predicted_calls=predicted,
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """pass@k over the exact-match reward: how often some of k rollouts gets all calls right."""
        return compute_pass_majority_metrics(tasks)

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        return {
            **default_key_metrics(agent_metrics),
            **highest_k_metrics(agent_metrics, "pass@1[avg-of-{k}]", "pass@{k}"),
        }


if __name__ == "__main__":
    XlamFcResourcesServer.run_webserver()
