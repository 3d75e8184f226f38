"""gui_coordinate: GUI grounding, a vision-language model points at the screen element an instruction names.

The answer is `<point>(x, y)</point>` with whole numbers on a 0-1000 scale of the image's width and
height (square brackets around the pair are allowed); the first such tag of the final text is read.
The target, `expected_answer`, is "x,y" in fractions of 0-1. The reward falls off quadratically with the
distance d between them: (1 - d / max_dist)^2 while d < max_dist, else 0.0, so a near miss still teaches.
"""

import math
import re
from typing import Any

from pydantic import Field, field_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseRunRequest,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)

POINT = re.compile(r"<point>\s*\[?\s*\(\s*(\d{1,7})\s*,\s*(\d{1,7})\s*\)\s*\]?\s*</point>")
POINT_SCALE = 1000.0


def parse_target(text: str) -> tuple[float, float]:
    """ "x,y" as two finite numbers; anything else is a malformed row."""
    parts = text.split(",")
    if len(parts) != 2:
        raise ValueError('expected_answer must be "x,y"')
    x, y = (float(part) for part in parts)
    if not (math.isfinite(x) and math.isfinite(y)):
        raise ValueError("expected_answer must be two finite numbers")
    return x, y


class GuiCoordinateResourcesServerConfig(BaseResourcesServerConfig):
    pass


class GuiCoordinateRunRequest(BaseRunRequest):
    expected_answer: str
    max_dist: float = Field(default=0.15, gt=0, allow_inf_nan=False)
    metadata: dict[str, Any] | None = None

    @field_validator("expected_answer")
    @classmethod
    def _a_point(cls, value: str) -> str:
        parse_target(value)
        return value


class GuiCoordinateVerifyRequest(GuiCoordinateRunRequest, BaseVerifyRequest):
    pass


class GuiCoordinateVerifyResponse(GuiCoordinateVerifyRequest, BaseVerifyResponse):
    extracted_x: float | None
    extracted_y: float | None
    distance: float | None


def parse_point(text: str) -> tuple[float, float] | None:
    """The first `<point>(x, y)</point>` scaled to 0-1, or None when there is none."""
    match = POINT.search(text)
    return (int(match.group(1)) / POINT_SCALE, int(match.group(2)) / POINT_SCALE) if match else None


def falloff_reward(distance: float, max_dist: float) -> float:
    return (1.0 - distance / max_dist) ** 2 if distance < max_dist else 0.0


def assistant_text(body: BaseVerifyRequest) -> str:
    """Every assistant message text of the response, in order (tool outputs and reasoning left out)."""
    texts = [
        part.text
        for item in body.response.output
        if item.type == "message" and item.role == "assistant"
        for part in item.content
        if getattr(part, "text", None) is not None
    ]
    return "\n".join(texts)


class GuiCoordinateResourcesServer(SimpleResourcesServer):
    config: GuiCoordinateResourcesServerConfig

    async def verify(self, body: GuiCoordinateVerifyRequest) -> GuiCoordinateVerifyResponse:
        target = parse_target(body.expected_answer)
        point = parse_point(assistant_text(body))
        distance = math.dist(point, target) if point is not None else None
        return GuiCoordinateVerifyResponse(
            **body.model_dump(),
            reward=falloff_reward(distance, body.max_dist) if distance is not None else 0.0,
            extracted_x=point[0] if point else None,
            extracted_y=point[1] if point else None,
            distance=distance,
        )


if __name__ == "__main__":
    GuiCoordinateResourcesServer.run_webserver()
