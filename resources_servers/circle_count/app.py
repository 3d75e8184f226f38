"""circle_count: a vision-language model counts the circles of one colour in a picture.

The row lists every circle drawn (`circles`) and the colour asked about (`target_color`); the answer is
the number in the model's last `\\boxed{}`. The expected count is taken from the list rather than stored,
so a row cannot disagree with its own picture description. Reward 1.0 for the exact count, else 0.0.
"""

import re

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.text.extraction import last_boxed
from resources_servers.circle_count.task_data import TaskData

COUNT = re.compile(r"\s*(\d{1,6})\s*")


class CircleCountConfig(BaseResourcesServerConfig):
    pass


class CircleCountVerifyRequest(TaskData, BaseVerifyRequest):
    pass


class CircleCountVerifyResponse(CircleCountVerifyRequest, BaseVerifyResponse):
    predicted_count: int | None
    expected_count: int
    correct: bool


def read_count(text: str) -> int | None:
    """The whole number in the last `\\boxed{}`; None when there is no box or it holds anything else."""
    boxed = last_boxed(text)
    match = COUNT.fullmatch(boxed) if boxed is not None else None
    return int(match.group(1)) if match else None


class CircleCountResourcesServer(SimpleResourcesServer):
    config: CircleCountConfig

    async def verify(self, body: CircleCountVerifyRequest) -> CircleCountVerifyResponse:
        expected = sum(1 for circle in body.circles if circle.color == body.target_color)
        predicted = read_count(body.response.output_text)
        correct = predicted == expected
        return CircleCountVerifyResponse(
            **body.model_dump(),
            reward=1.0 if correct else 0.0,
            predicted_count=predicted,
            expected_count=expected,
            correct=correct,
        )


if __name__ == "__main__":
    CircleCountResourcesServer.run_webserver()
