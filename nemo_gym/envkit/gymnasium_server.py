"""Gymnasium-style multi-turn environments: `/reset` opens an episode, each `/step` answers one model turn.

A `GymnasiumServer` replaces `/seed_session` + `/verify` with the reset/step protocol that
`responses_api_agents/gymnasium_agent` drives. The agent POSTs the task row to `/reset` and shows the
observation it gets to the model; then, for every model reply, it POSTs the row plus that reply to `/step`
and gets the next observation, a reward, and whether the episode is over (`terminated`: the task reached an
end; `truncated`: it was cut short, e.g. out of turns). A step answers the model's tool calls through
`info["tool_outputs"] = [{"call_id", "output"}]`; the agent adds them as `function_call_output` items.

A subclass implements `reset` and `step` and keeps what an episode needs in `episode_state(session_id)`: a
dict the base opens at reset (keyed by the session cookie), hands back at every step, and drops when a step
ends the episode. Episodes are bounded in number (`max_episodes`, least recently used dropped first) and
in idle time (`episode_ttl_s`), so rollouts that never finish cannot grow memory without end. A step on a
session with no episode in progress is a 409 saying so.

Extra row keys (everything but `responses_create_params` and `response`) reach the hooks as `metadata`;
`parse_metadata` validates them into a model, refusing bad rows with a 422 instead of a crash.
`EnvSession` is a client of one episode; `replay_episode` plays a recorded rollout through an environment
again, without a model.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from nemo_gym.http.client import get_response_json, request, response_cookies
from nemo_gym.http.errors import GymError
from nemo_gym.http.sessions import SessionStore, get_session_id
from nemo_gym.serving.resources_server import BaseResourcesServerConfig, SimpleResourcesServer
from nemo_gym.serving.servers import new_app
from nemo_gym.wire.responses import NeMoGymResponse
from nemo_gym.wire.rows import BaseRunRequest
from nemo_gym.wire.sessions import ResourcesCloseSessionRequest, ResourcesCloseSessionResponse
from nemo_gym.wire.validation_errors import describe_validation_error

# A few hundred bytes per episode for the shipped environments: the default stays far below 100 MB.
DEFAULT_MAX_EPISODES = 100_000
# Longer than any step takes to come back (a model turn is bounded by the rollout deadline, 30 min).
DEFAULT_EPISODE_TTL_S = 3600.0
MAX_REPORTED_PROBLEMS = 3

TaskModel = TypeVar("TaskModel", bound=BaseModel)
StepResult = tuple[str | None, float, bool, bool, dict[str, Any]]


class GymnasiumServerConfig(BaseResourcesServerConfig):
    max_episodes: int = Field(
        default=DEFAULT_MAX_EPISODES, ge=1, description="episodes kept at once; the least recently used go"
    )
    episode_ttl_s: float = Field(
        default=DEFAULT_EPISODE_TTL_S, gt=0, description="an episode idle this long is dropped"
    )

    @field_validator("num_workers")
    @classmethod
    def _one_process(cls, value: int | None) -> int | None:
        if value is not None and value > 1:
            raise ValueError("episodes live in one process's memory: a second worker would not see them")
        return value


class EnvResetRequest(BaseRunRequest):
    """A task row; its keys besides `responses_create_params` are the episode's metadata."""

    model_config = ConfigDict(extra="allow")


class EnvResetResponse(BaseModel):
    observation: str | None = None
    info: dict[str, Any] = Field(default_factory=dict)


class EnvStepRequest(EnvResetRequest):
    """The task row again, plus the model's reply to act on."""

    response: NeMoGymResponse


class EnvStepResponse(BaseModel):
    observation: str | None = None
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = Field(default_factory=dict)


class EnvToolOutput(BaseModel):
    """One answered tool call, as a step lists it in `info["tool_outputs"]`."""

    call_id: str
    output: str


def extract_text(response: NeMoGymResponse) -> str:
    """What the model said: the text of its assistant messages, joined (reasoning and tool calls left out)."""
    return response.output_text


def parse_metadata(model: type[TaskModel], metadata: dict[str, Any]) -> TaskModel:
    """The row's task fields as `model`; a row that does not fit is the caller's error (422), not ours."""
    try:
        return model.model_validate(metadata)
    except ValidationError as error:
        problems = describe_validation_error(error, limit=MAX_REPORTED_PROBLEMS, root="row")
        raise GymError(
            422, "invalid_task", f"the row's task fields do not fit this environment: {problems}"
        ) from error


@dataclass
class _Episode:
    touched_at: float
    state: dict[str, Any] = field(default_factory=dict)


class EpisodeStore:
    """State of the episodes in progress by session id, at most `max_episodes` and none idle past `ttl_s`.

    Capacity is enforced on every start (least recently used first, see `SessionStore`); an episode idle
    too long is dropped when its session next asks for it.
    """

    def __init__(self, max_episodes: int, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._episodes: SessionStore[_Episode] = SessionStore(max_episodes, kind="episode")

    def __len__(self) -> int:
        return len(self._episodes)

    def start(self, session_id: str) -> dict[str, Any]:
        """A fresh, empty state for the session, replacing any episode it had."""
        episode = _Episode(touched_at=self._clock())
        self._episodes.put(session_id, episode)
        return episode.state

    def get(self, session_id: str) -> dict[str, Any] | None:
        episode = self._episodes.get(session_id)
        if episode is None:
            return None
        now = self._clock()
        if now - episode.touched_at > self.ttl_s:
            self._episodes.pop(session_id)
            return None
        episode.touched_at = now
        return episode.state

    def end(self, session_id: str) -> None:
        self._episodes.pop(session_id)


class GymnasiumServer(SimpleResourcesServer):
    """Base of reset/step environments: routes `/reset`, `/step`, `/close_session` and `/aggregate_metrics`."""

    config: GymnasiumServerConfig
    _episodes: EpisodeStore = PrivateAttr()

    def model_post_init(self, context: Any) -> None:
        super().model_post_init(context)
        self._episodes = EpisodeStore(self.config.max_episodes, self.config.episode_ttl_s)

    def setup_webserver(self) -> FastAPI:
        """No `/seed_session` or `/verify`: the episode starts at `/reset` and steps earn the reward."""
        app = new_app()
        self.setup_session_middleware(app)
        app.post("/reset")(self.reset_route)
        app.post("/step")(self.step_route)
        app.post("/close_session")(self.close_resources_session)
        app.post("/aggregate_metrics")(self.aggregate_metrics)
        return app

    # ---- hooks ----------------------------------------------------------------------------------------

    async def reset(self, metadata: dict[str, Any], session_id: str) -> tuple[str | None, dict[str, Any]]:
        """Start the episode (its state is `episode_state(session_id)`, empty); answer (observation, info)."""
        raise NotImplementedError(f"{type(self).__name__} must implement reset()")

    async def step(self, action: NeMoGymResponse, metadata: dict[str, Any], session_id: str) -> StepResult:
        """Apply one model reply; answer (observation, reward, terminated, truncated, info)."""
        raise NotImplementedError(f"{type(self).__name__} must implement step()")

    def episode_state(self, session_id: str) -> dict[str, Any]:
        """The state of the session's episode in progress (a 409 when there is none)."""
        state = self._episodes.get(session_id)
        if state is None:
            raise GymError(
                409,
                "no_active_episode",
                "this session has no episode in progress: POST /reset first and send the session cookie "
                "it set with every /step. An episode ends when a step answers terminated or truncated, "
                f"and is dropped after {self.config.episode_ttl_s:g}s without a step.",
            )
        return state

    # ---- routes ---------------------------------------------------------------------------------------

    async def close_resources_session(
        self, body: ResourcesCloseSessionRequest
    ) -> ResourcesCloseSessionResponse:
        """NeMo Gym 0.7's `/close_session`: the session's episode goes at once, and a later `/reset` of that
        id is refused (a closed session stays closed). Repeating it, or closing an unknown id, answers the
        same."""
        self._episodes.end(body.resources_session_id)
        return await super().close_resources_session(body)

    async def reset_route(self, request: Request, body: EnvResetRequest) -> EnvResetResponse:
        session_id = get_session_id(request)
        if self.sessions.is_closed(session_id):
            raise GymError(409, "session_closed", "this session was closed; start a new one to play")
        self._episodes.start(session_id)
        try:
            observation, info = await self.reset(body.model_extra or {}, session_id)
        except BaseException:
            self._episodes.end(session_id)
            raise
        return EnvResetResponse(observation=observation, info=info)

    async def step_route(self, request: Request, body: EnvStepRequest) -> EnvStepResponse:
        session_id = get_session_id(request)
        self.episode_state(session_id)
        observation, reward, terminated, truncated, info = await self.step(
            body.response, body.model_extra or {}, session_id
        )
        if terminated or truncated:
            self._episodes.end(session_id)
        return EnvStepResponse(
            observation=observation, reward=reward, terminated=terminated, truncated=truncated, info=info
        )


# ---- replaying recorded rollouts ---------------------------------------------------------------------------


def model_turns(output: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """A gymnasium rollout's `response.output` split back into the model's replies, one per step.

    Between replies the agent adds only user messages (observations) and `function_call_output` items (tool
    outputs), so each maximal run of other items is one reply. (A reply with no output items leaves no trace.)
    """
    turns: list[list[dict[str, Any]]] = []
    in_turn = False
    for item in output:
        kind = item.get("type", "message")
        if kind == "function_call_output" or (kind == "message" and item.get("role") == "user"):
            in_turn = False
            continue
        if not in_turn:
            turns.append([])
            in_turn = True
        turns[-1].append(item)
    return turns


@dataclass
class EnvSession:
    """A client of one episode of the environment at `base_url`, sending back the session cookie it was
    given, as the gymnasium agent does."""

    base_url: str
    cookies: dict[str, str] = field(default_factory=dict)

    async def post(self, path: str, body: Any) -> tuple[int, Any]:
        """(status, parsed body) of any answer, errors included."""
        answer = await request("POST", self.base_url + path, json=body, cookies=self.cookies, _internal=True)
        self.cookies.update(response_cookies(answer))
        return answer.status, await get_response_json(answer)

    async def reset(self, row: dict[str, Any]) -> EnvResetResponse:
        return EnvResetResponse.model_validate(await self._ok("/reset", row))

    async def step(self, row: dict[str, Any], response: dict[str, Any]) -> EnvStepResponse:
        return EnvStepResponse.model_validate(await self._ok("/step", {**row, "response": response}))

    async def _ok(self, path: str, body: Any) -> Any:
        status, answer = await self.post(path, body)
        if status != 200:
            raise GymError(status, "env_call_failed", f"{self.base_url}{path} answered {status}: {answer}")
        return answer


async def replay_episode(
    base_url: str, row: dict[str, Any], response: dict[str, Any]
) -> tuple[EnvResetResponse, list[EnvStepResponse]]:
    """Reset the environment at `base_url` with `row`, then step it with each model reply of a recorded
    `response` (see `model_turns`): what the environment answers now to the recorded actions, to compare
    with what was recorded."""
    session = EnvSession(base_url)
    reset = await session.reset(row)
    steps = [
        await session.step(row, {**response, "output": turn}) for turn in model_turns(response["output"])
    ]
    return reset, steps
