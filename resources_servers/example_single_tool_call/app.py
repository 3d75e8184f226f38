"""example_single_tool_call: one `get_weather` tool and a verifier that rewards every rollout.

The smallest useful environment: it exercises the tool-calling plumbing (schema, route, output fed back to
the model) without judging the answer, so it is a smoke test for a training or serving setup.
"""

from fastapi import FastAPI
from pydantic import BaseModel

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)


class SingleToolCallConfig(BaseResourcesServerConfig):
    pass


class GetWeatherRequest(BaseModel):
    city: str


class GetWeatherResponse(BaseModel):
    city: str
    weather_description: str


class SingleToolCallResourcesServer(SimpleResourcesServer):
    config: SingleToolCallConfig

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        app.post("/get_weather")(self.get_weather)
        return app

    async def get_weather(self, body: GetWeatherRequest) -> GetWeatherResponse:
        """A fixed forecast: the point is that the model calls the tool, not what the tool says."""
        return GetWeatherResponse(city=body.city, weather_description=f"The weather in {body.city} is cold.")

    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        """Every rollout earns 1.0: nothing about the answer is checked."""
        return BaseVerifyResponse(**body.model_dump(), reward=1.0)


if __name__ == "__main__":
    SingleToolCallResourcesServer.run_webserver()
