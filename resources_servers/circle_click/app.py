"""circle_click: a vision-language model clicks the circle of the asked colour in a picture.

The model answers by calling the `click(x, y)` tool with pixel coordinates (origin top-left). The first
`click` call of the response is the one graded: reward 1.0 when the point lies inside (or on the edge of)
a circle of `target_color`, else 0.0. A response without a click, or whose click arguments are not two
numbers, earns 0.0 with no clicked point.
"""

import json
import math
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from resources_servers.circle_click.task_data import Circle, TaskData

CLICK_TOOL = "click"


class CircleClickConfig(BaseResourcesServerConfig):
    pass


class ClickRequest(BaseModel):
    x: int
    y: int


class ClickResponse(BaseModel):
    x: int
    y: int


class CircleClickVerifyRequest(TaskData, BaseVerifyRequest):
    pass


class CircleClickVerifyResponse(CircleClickVerifyRequest, BaseVerifyResponse):
    clicked_x: float | None
    clicked_y: float | None
    hit: bool


def first_click(output: list[Any]) -> tuple[float, float] | None:
    """(x, y) of the first `click` call; None when there is none or its arguments are not two numbers.

    Only the first call counts, so a model cannot sweep the picture with many clicks."""
    call = next(
        (
            item
            for item in output
            if getattr(item, "type", None) == "function_call" and item.name == CLICK_TOOL
        ),
        None,
    )
    if call is None:
        return None
    try:
        arguments = json.loads(call.arguments)
    except ValueError:
        return None
    if not isinstance(arguments, dict):
        return None
    x, y = arguments.get("x"), arguments.get("y")
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in (x, y))
    return (float(x), float(y)) if numbers else None


def inside(x: float, y: float, circle: Circle) -> bool:
    return (x - circle.x) ** 2 + (y - circle.y) ** 2 <= circle.radius**2


class CircleClickResourcesServer(SimpleResourcesServer):
    config: CircleClickConfig

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        app.post("/click")(self.click)
        return app

    async def click(self, body: ClickRequest) -> ClickResponse:
        """Click at pixel (x, y) of the picture; answers the point clicked."""
        return ClickResponse(x=body.x, y=body.y)

    async def verify(self, body: CircleClickVerifyRequest) -> CircleClickVerifyResponse:
        point = first_click(body.response.output)
        targets = [circle for circle in body.circles if circle.color == body.target_color]
        hit = point is not None and any(inside(*point, circle) for circle in targets)
        return CircleClickVerifyResponse(
            **body.model_dump(),
            reward=1.0 if hit else 0.0,
            clicked_x=point[0] if point else None,
            clicked_y=point[1] if point else None,
            hit=hit,
        )


if __name__ == "__main__":
    CircleClickResourcesServer.run_webserver()
