"""openenv: serves an OpenEnv environment (openenv-core 0.1 API) as a Gym resources server.

The config names the environment class and its action class by import path, so a new environment needs a
config and data, no code. One rollout is one session and one environment instance: `/seed_session` builds
the instance and calls `reset()` (the config's `reset_kwargs`, with a row's own `reset_kwargs` on top);
the single `step` tool (`POST /step`, the JSON body being the action's fields) validates the body against
the action class and runs one `step()`; `/verify` returns the reward the environment paid (the reset's
plus every step's, as NeMo Gym sums them) and closes the instance. OpenEnv's `step()` is synchronous, so
every call runs in a worker thread under `step_timeout_s`.
"""

import asyncio
import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from fastapi import FastAPI, HTTPException, Request
from fastapi.encoders import jsonable_encoder
from openenv_core.env_server import Action, Environment
from pydantic import ConfigDict, Field, PrivateAttr, TypeAdapter, ValidationError, field_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseSeedSessionRequest,
    BaseSeedSessionResponse,
    BaseVerifyRequest,
    BaseVerifyResponse,
    ResourcesCloseSessionRequest,
    ResourcesCloseSessionResponse,
    ReverifyMode,
    SimpleResourcesServer,
)
from nemo_gym.config.class_paths import class_at_path
from nemo_gym.http.sessions import get_session_id
from nemo_gym.wire.failure_kinds import SESSION_LOST, VERIFIER_ERROR

DEFAULT_ENV_CLASS = "resources_servers.openenv.envs.guess_number.GuessNumberEnvironment"
DEFAULT_ACTION_CLASS = "resources_servers.openenv.envs.guess_number.GuessAction"


class OpenEnvResourcesServerConfig(BaseResourcesServerConfig):
    REVERIFY_MODE: ClassVar[ReverifyMode] = ReverifyMode.UNSUPPORTED
    env_class: str = Field(default=DEFAULT_ENV_CLASS, description="dotted path of the OpenEnv Environment")
    action_class: str = Field(default=DEFAULT_ACTION_CLASS, description="dotted path of its Action dataclass")
    reset_kwargs: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of reset()")
    is_mcp: bool = Field(default=False, description="MCP environments (NeMo Gym) are not supported here")
    step_timeout_s: float = Field(default=30.0, gt=0, description="deadline for one reset() or step()")

    @field_validator("env_class")
    @classmethod
    def _env_importable(cls, value: str) -> str:
        class_at_path("env_class", value, Environment)
        return value

    @field_validator("action_class")
    @classmethod
    def _action_importable(cls, value: str) -> str:
        found = class_at_path("action_class", value, Action)
        if not dataclasses.is_dataclass(found):
            raise ValueError(f"action_class {value!r} is not a dataclass")
        return value

    @field_validator("is_mcp")
    @classmethod
    def _no_mcp(cls, value: bool) -> bool:
        if value:
            raise ValueError(
                "is_mcp: MCP environments need openenv-core >= 0.2 (mcp 2.x), which Gym's mcp<2 pin excludes"
            )
        return value


class OpenEnvSeedSessionRequest(BaseSeedSessionRequest):
    model_config = ConfigDict(extra="allow")
    reset_kwargs: dict[str, Any] = Field(default_factory=dict)


class OpenEnvVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")


class OpenEnvVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")
    episode_done: bool = False
    steps: int = 0


@dataclass
class EpisodeState:
    env: Environment
    total_reward: float = 0.0
    done: bool = False
    steps: int = 0
    failure: str | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def close_env(env: Environment) -> None:
    """OpenEnv environments may hold resources (a container, a process) behind an optional close()."""
    close = getattr(env, "close", None)
    if callable(close):
        close()


def reward_of(observation: Any) -> float:
    reward = getattr(observation, "reward", None)
    return 0.0 if reward is None else float(reward)


class OpenEnvResourcesServer(SimpleResourcesServer):
    config: OpenEnvResourcesServerConfig
    _env_class: Any = PrivateAttr(default=None)
    _action_class: Any = PrivateAttr(default=None)
    _action_adapter: Any = PrivateAttr(default=None)
    _action_fields: set[str] = PrivateAttr(default_factory=set)

    def model_post_init(self, context: Any) -> None:
        super().model_post_init(context)
        self._env_class = class_at_path("env_class", self.config.env_class, Environment)
        self._action_class = class_at_path("action_class", self.config.action_class, Action)
        self._action_adapter = TypeAdapter(self._action_class)
        self._action_fields = {f.name for f in dataclasses.fields(self._action_class)}

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        app.post("/step")(self.step)
        return app

    async def _in_thread(
        self, state: EpisodeState | None, what: str, fn: Any, *args: Any, **kwargs: Any
    ) -> Any:
        """Runs one synchronous environment call under the deadline. A call past it cannot be interrupted
        (its thread runs on), so the episode is ended and its grade marked."""
        try:
            return await asyncio.wait_for(asyncio.to_thread(fn, *args, **kwargs), self.config.step_timeout_s)
        except TimeoutError:
            reason = f"{what} exceeded step_timeout_s={self.config.step_timeout_s}s"
            if state is not None:
                state.failure, state.done = reason, True
            raise HTTPException(504, reason) from None

    async def seed_session(
        self, request: Request, body: OpenEnvSeedSessionRequest
    ) -> BaseSeedSessionResponse:
        env = self._env_class()
        kwargs = {**self.config.reset_kwargs, **body.reset_kwargs}
        try:
            first = await self._in_thread(None, "reset()", env.reset, **kwargs)
        except (TypeError, ValueError) as error:
            raise HTTPException(422, f"reset_kwargs refused by {self._env_class.__name__}: {error}") from None
        state = EpisodeState(env=env, total_reward=reward_of(first), done=bool(getattr(first, "done", False)))
        previous = self.sessions.get(get_session_id(request))
        self.sessions.put(get_session_id(request), state)
        if previous is not None:
            close_env(previous.env)
        return BaseSeedSessionResponse()

    def _action(self, body: Any) -> Action:
        """The action built from the body, or a 422 naming the offending field."""
        if not isinstance(body, dict):
            raise HTTPException(422, "the body must be a JSON object of the action's fields")
        unknown = sorted(set(body) - self._action_fields)
        if unknown:
            expected = ", ".join(sorted(self._action_fields - {"metadata"}))
            raise HTTPException(422, f"unknown action field {unknown[0]!r} (expected: {expected})")
        try:
            return self._action_adapter.validate_python(body)
        except ValidationError as error:
            problems = [
                f"field {'.'.join(str(p) for p in e['loc']) or '(body)'!r}: {e['msg']}"
                for e in error.errors()
            ]
            raise HTTPException(
                422, f"invalid {self._action_class.__name__}: " + "; ".join(problems)
            ) from None

    async def step(self, request: Request) -> dict[str, Any]:
        """One tool call = one OpenEnv step. Answers the observation's fields (done, reward, ...)."""
        state: EpisodeState | None = self.sessions.get(get_session_id(request))
        if state is None:
            raise HTTPException(404, "no environment for this session: call /seed_session first")
        try:
            body = await request.json()
        except ValueError:
            raise HTTPException(422, "the body must be a JSON object of the action's fields") from None
        action = self._action(body)
        async with state.lock:
            if state.done:
                raise HTTPException(409, "the episode has ended")
            try:
                observation = await self._in_thread(state, "step()", state.env.step, action)
            except HTTPException:
                raise
            except Exception as error:  # the environment's own refusal of this action
                raise HTTPException(422, f"the environment refused the action: {error}") from None
            state.total_reward += reward_of(observation)
            state.done = bool(getattr(observation, "done", False))
            state.steps += 1
        if dataclasses.is_dataclass(observation):
            return jsonable_encoder(dataclasses.asdict(observation))
        return {"result": str(observation), "reward": reward_of(observation), "done": state.done}

    async def verify(self, request: Request, body: OpenEnvVerifyRequest) -> OpenEnvVerifyResponse:
        """The environment's own total reward; a lost session or a timed-out call is marked, never a 0."""
        state: EpisodeState | None = self.sessions.pop(get_session_id(request))
        grade: dict[str, Any] = {"mask_sample": False, "failure_kind": None, "failure_reason": None}
        if state is None:
            grade = {
                "mask_sample": True,
                "failure_kind": SESSION_LOST,
                "failure_reason": "no environment for this rollout's session (never seeded, or evicted)",
            }
        elif state.failure is not None:
            grade = {"mask_sample": True, "failure_kind": VERIFIER_ERROR, "failure_reason": state.failure}
        if state is not None and state.failure is None:
            close_env(state.env)
        grade |= {
            "reward": state.total_reward if state is not None else 0.0,
            "episode_done": state is not None and state.done,
            "steps": state.steps if state is not None else 0,
        }
        return OpenEnvVerifyResponse(**{**body.model_dump(), **grade})

    async def close_resources_session(
        self, body: ResourcesCloseSessionRequest
    ) -> ResourcesCloseSessionResponse:
        """NeMo Gym 0.7's `/close_session`: also closes the session's environment instance."""
        state: EpisodeState | None = self.sessions.pop(body.resources_session_id)
        if state is not None and state.failure is None:
            close_env(state.env)
        return await super().close_resources_session(body)


if __name__ == "__main__":
    OpenEnvResourcesServer.run_webserver()
