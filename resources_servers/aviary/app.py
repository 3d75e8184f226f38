"""aviary: serves an Aviary (FutureHouse `fhaviary`) environment as a Gym resources server.

One rollout is one session and one environment instance: `/seed_session` builds the configured
`env_class` from the row's `env_kwargs` and calls its `reset()`; every tool the environment offers is a
route (`POST /<tool name>`, the JSON body being the tool's arguments), which runs as one Aviary `step()`
with a single tool call; `/verify` returns the sum of the rewards the environment itself paid. NeMo Gym
drives the same environments through its own Aviary agent (`/step` with a list of tool calls); here the
tools are plain Gym tool routes, so `simple_agent` (or any Gym agent) runs them.
"""

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any, ClassVar

from aviary.core import Environment, Tool, ToolCall, ToolCallFunction, ToolRequestMessage
from fastapi import FastAPI, HTTPException, Request
from pydantic import ConfigDict, Field, field_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseSeedSessionRequest,
    BaseSeedSessionResponse,
    BaseVerifyRequest,
    BaseVerifyResponse,
    ReverifyMode,
    SimpleResourcesServer,
)
from nemo_gym.config.class_paths import class_at_path
from nemo_gym.http.sessions import get_session_id
from nemo_gym.wire.failure_kinds import SESSION_LOST, VERIFIER_ERROR

DEFAULT_ENV_CLASS = "resources_servers.aviary.gsm8k_env.CalculatorEnv"
JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


class AviaryResourcesServerConfig(BaseResourcesServerConfig):
    REVERIFY_MODE: ClassVar[ReverifyMode] = ReverifyMode.UNSUPPORTED
    env_class: str = Field(default=DEFAULT_ENV_CLASS, description="dotted path of the Aviary Environment")
    step_timeout_s: float = Field(default=30.0, gt=0, description="deadline for one environment step")

    @field_validator("env_class")
    @classmethod
    def _importable(cls, value: str) -> str:
        class_at_path("env_class", value, Environment)
        return value


class AviarySeedSessionRequest(BaseSeedSessionRequest):
    model_config = ConfigDict(extra="allow")
    task_idx: int | None = None
    env_kwargs: dict[str, Any]


class AviaryVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")


class AviaryVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")
    episode_done: bool = False
    steps: int = 0


@dataclass
class EpisodeState:
    env: Environment
    tools: dict[str, Tool]
    total_reward: float = 0.0
    done: bool = False
    steps: int = 0
    failure: str | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def argument_errors(tool: Tool, arguments: dict[str, Any]) -> list[str]:
    """Checks the arguments against the tool's own JSON schema (top level): a wrong call is refused with
    the field named instead of reaching the environment and failing inside it."""
    schema = tool.info.parameters
    properties = schema.properties if schema is not None else {}
    required = schema.required if schema is not None else []
    errors = [f"missing required argument {name!r}" for name in required if name not in arguments]
    for name, value in arguments.items():
        if name not in properties:
            errors.append(f"unknown argument {name!r} (expected: {', '.join(sorted(properties)) or 'none'})")
            continue
        expected = JSON_TYPES.get(properties[name].get("type", ""), ())
        if expected and (
            not isinstance(value, expected) or (isinstance(value, bool) and bool not in expected)
        ):
            errors.append(f"argument {name!r} must be of type {properties[name]['type']}")
    return errors


class AviaryResourcesServer(SimpleResourcesServer):
    config: AviaryResourcesServerConfig

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        # Registered last so the kit's own routes (seed_session, verify, ...) keep precedence.
        app.post("/{tool_name}")(self.call_tool)
        return app

    async def seed_session(self, request: Request, body: AviarySeedSessionRequest) -> BaseSeedSessionResponse:
        env_class = class_at_path("env_class", self.config.env_class, Environment)
        try:
            env = env_class(**body.env_kwargs)
        except TypeError as error:
            raise HTTPException(422, f"env_kwargs do not fit {env_class.__name__}: {error}") from None
        _, tools = await asyncio.wait_for(env.reset(), self.config.step_timeout_s)
        self.sessions.put(
            get_session_id(request), EpisodeState(env=env, tools={t.info.name: t for t in tools})
        )
        return BaseSeedSessionResponse()

    async def call_tool(self, tool_name: str, request: Request) -> dict[str, Any]:
        """One tool call = one Aviary step. Returns the tool's output and the step's reward/done."""
        state: EpisodeState | None = self.sessions.get(get_session_id(request))
        if state is None:
            raise HTTPException(404, "no environment for this session: call /seed_session first")
        tool = state.tools.get(tool_name)
        if tool is None:
            raise HTTPException(
                404, f"unknown tool {tool_name!r}; available: {', '.join(sorted(state.tools))}"
            )
        try:
            arguments = await request.json()
        except ValueError:
            raise HTTPException(422, "the body must be a JSON object of the tool's arguments") from None
        if not isinstance(arguments, dict):
            raise HTTPException(422, "the body must be a JSON object of the tool's arguments")
        errors = argument_errors(tool, arguments)
        if errors:
            raise HTTPException(422, f"invalid arguments for {tool_name}: " + "; ".join(errors))
        async with state.lock:
            if state.done:
                raise HTTPException(409, "the episode has ended (an answer was submitted)")
            call = ToolCall(
                id=f"call_{uuid.uuid4().hex[:12]}",
                function=ToolCallFunction(name=tool_name, arguments=arguments),
            )
            try:
                observations, reward, done, _ = await asyncio.wait_for(
                    state.env.step(ToolRequestMessage(content=None, tool_calls=[call])),
                    self.config.step_timeout_s,
                )
            except TimeoutError:
                state.failure = f"{tool_name} step exceeded {self.config.step_timeout_s}s"
                raise HTTPException(504, state.failure) from None
            state.total_reward += float(reward)
            state.done = bool(done)
            state.steps += 1
        output = "\n".join(str(o.content) for o in observations if o.content is not None)
        return {"output": output, "reward": float(reward), "done": state.done}

    async def verify(self, request: Request, body: AviaryVerifyRequest) -> AviaryVerifyResponse:
        """The environment's own total reward; a lost session or a timed-out step is marked, never a 0."""
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
        if state is not None:
            await state.env.close()
        grade |= {
            "reward": state.total_reward if state is not None else 0.0,
            "episode_done": state is not None and state.done,
            "steps": state.steps if state is not None else 0,
        }
        return AviaryVerifyResponse(**{**body.model_dump(), **grade})


if __name__ == "__main__":
    AviaryResourcesServer.run_webserver()
