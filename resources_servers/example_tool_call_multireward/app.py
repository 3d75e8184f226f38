"""example_tool_call_multireward: one tool-call task scored by three independent 0/1 components.

The reward is their sum (0-3), so a trainer can tell a well-formed but wrong call from a right call
wrapped in chatter, and the components can be weighted or logged separately. The server has no tool
routes: only the call the model makes is judged, never its result.
"""

from pydantic import BaseModel, Field

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from resources_servers.example_tool_call_multireward.scoring import (
    ExpectedCall,
    PredictedCall,
    correctness_score,
    format_score,
    parse_arguments,
    schema_score,
)


class MultiRewardConfig(BaseResourcesServerConfig):
    pass


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


class MultiRewardResourcesServer(SimpleResourcesServer):
    config: MultiRewardConfig

    async def verify(self, body: MultiRewardVerifyRequest) -> MultiRewardVerifyResponse:
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
