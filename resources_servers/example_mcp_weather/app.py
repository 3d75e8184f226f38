"""example_mcp_weather: a weather tool served over MCP, rewarded only when it ran in the rollout's own session.

With `expose_tools_over_mcp: true` the base server publishes `get_weather` at `/mcp` (Streamable HTTP), and
each seed answer carries a signed per-session token; a call made with that token runs in that session. The
seed stores the task's city; the tool records each call in the session. `/verify` pays 1.0 when, in this
rollout's session, the tool was called for the expected city and the final answer repeats the sentence it
returned. A session the server no longer holds (never seeded, or evicted) cannot say whether the tool ran:
the rollout is masked as `session_lost` rather than scored 0.
"""

from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from pydantic import BaseModel, ConfigDict, Field

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseSeedSessionRequest,
    BaseSeedSessionResponse,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.http.sessions import get_session_id
from nemo_gym.wire.failure_kinds import SESSION_LOST

DEFAULT_CITY = "Paris"


def weather_sentence(city: str) -> str:
    """The tool's fixed forecast: deterministic, so the answer can be checked against it."""
    return f"The weather in {city} is sunny and 72 F."


class ExampleMCPWeatherResourcesServerConfig(BaseResourcesServerConfig):
    pass


class VerifierMetadata(BaseModel):
    model_config = ConfigDict(extra="allow")

    expected_city: str = Field(default=DEFAULT_CITY, min_length=1)


class ExampleMCPWeatherSeedSessionRequest(BaseSeedSessionRequest):
    model_config = ConfigDict(extra="allow")

    verifier_metadata: VerifierMetadata | None = None


class GetWeatherRequest(BaseModel):
    city: str = Field(min_length=1)


class GetWeatherResponse(BaseModel):
    city: str
    weather: str


class ExampleMCPWeatherVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")

    verifier_metadata: VerifierMetadata | None = None


class ExampleMCPWeatherVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    expected_weather: str
    tool_call_seen: bool
    final_response_mentions_weather: bool


@dataclass
class WeatherSession:
    expected_city: str | None
    cities_asked: list[str] = field(default_factory=list)


def expected_city(metadata: VerifierMetadata | None) -> str:
    return (metadata or VerifierMetadata()).expected_city


def final_text(body: BaseVerifyRequest) -> str:
    return "\n".join(
        part.text
        for item in body.response.output
        if item.type == "message" and item.role == "assistant"
        for part in item.content
        if getattr(part, "text", None) is not None
    )


class ExampleMCPWeatherResourcesServer(SimpleResourcesServer):
    config: ExampleMCPWeatherResourcesServerConfig

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        app.post("/get_weather")(self.get_weather)
        return app

    async def seed_session(
        self, request: Request, body: ExampleMCPWeatherSeedSessionRequest
    ) -> BaseSeedSessionResponse:
        """Open the rollout's session; a repeated seed keeps the calls already made."""
        session_id = get_session_id(request)
        state = self.sessions.get(session_id) or WeatherSession(expected_city=None)
        state.expected_city = expected_city(body.verifier_metadata)
        self.sessions.put(session_id, state)
        return BaseSeedSessionResponse()

    async def get_weather(self, request: Request, body: GetWeatherRequest) -> GetWeatherResponse:
        """Get the weather report for a city."""
        session_id = get_session_id(request)
        state = self.sessions.get(session_id) or WeatherSession(expected_city=None)
        state.cities_asked.append(body.city)
        self.sessions.put(session_id, state)
        return GetWeatherResponse(city=body.city, weather=weather_sentence(body.city))

    async def verify(
        self, request: Request, body: ExampleMCPWeatherVerifyRequest
    ) -> ExampleMCPWeatherVerifyResponse:
        """Graded from this session's record of tool calls, which is then dropped."""
        city = expected_city(body.verifier_metadata)
        expected_weather = weather_sentence(city)
        mentions = expected_weather.casefold() in final_text(body).casefold()
        state: WeatherSession | None = self.sessions.pop(get_session_id(request))
        grade: dict[str, Any] = {"mask_sample": False, "failure_kind": None, "failure_reason": None}
        if state is None:
            grade = {
                "mask_sample": True,
                "failure_kind": SESSION_LOST,
                "failure_reason": "no tool record for this rollout's session (never seeded, or evicted): "
                "whether get_weather ran in it is unknown",
            }
        # The sentence follows from the city, so the city (in any case) is what the call must match.
        seen = state is not None and any(asked.casefold() == city.casefold() for asked in state.cities_asked)
        grade |= {
            "reward": float(seen and mentions),
            "expected_weather": expected_weather,
            "tool_call_seen": seen,
            "final_response_mentions_weather": mentions,
        }
        # The row's own fields ride along (extra keys allowed), the grade's replacing any of the same name,
        # so a recorded rollout sent back to /verify is graded afresh.
        return ExampleMCPWeatherVerifyResponse(**{**body.model_dump(), **grade})


if __name__ == "__main__":
    ExampleMCPWeatherResourcesServer.run_webserver()
