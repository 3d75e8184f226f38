"""xlam_fc: reward a model for issuing exactly the function calls a task expects (Salesforce xLAM 60k).

The tools in a task are only schemas: this server implements none of them, so a call the model makes
reaches no route (the agent feeds the 404 back). What counts is the set of `function_call` items in the
final response, matched against the row's `expected_answers`.
"""

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.envkit.pass_at_k_metrics import PassAtK
from resources_servers.xlam_fc.matching import FunctionCall, count_matches, predicted_calls


class XlamFcConfig(BaseResourcesServerConfig):
    pass


class XlamFcVerifyRequest(BaseVerifyRequest):
    expected_answers: list[FunctionCall]


class XlamFcVerifyResponse(BaseVerifyResponse):
    num_expected: int
    num_predicted: int
    num_correct: int
    predicted_calls: list[FunctionCall]


class XlamFcResourcesServer(SimpleResourcesServer):
    config: XlamFcConfig
    pass_at_k = PassAtK()  # how often some of k rollouts gets all calls right
    key_metric_patterns = ("mean/*", "pass@1[avg-of-{k}]/*", "pass@{k}/*")

    async def verify(self, body: XlamFcVerifyRequest) -> XlamFcVerifyResponse:
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


if __name__ == "__main__":
    XlamFcResourcesServer.run_webserver()
