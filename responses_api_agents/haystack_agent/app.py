"""HaystackAgent: a serialized Haystack pipeline's `Agent` is the rollout loop.

The pipeline (`pipeline_yaml`) is loaded once at start. Its Agent (`agent_component_name`) must use
`NeMoGymResponsesChatGenerator` (chat_generator.py), so every model call is a turn of this agent's
`model_server`. A rollout: `/seed_session` on the resources server; the row's prompt becomes Haystack
messages and the row's function tools become request-scoped Haystack tools that call the resources
server's `POST /<tool>` routes (a refusal is the tool's output, as in simple_agent); Haystack's Agent runs its
loop (tool calls, exit conditions, `max_agent_steps`); the trajectory is rebuilt from the model's own
output items (token ids kept) and the tool results; `/verify` scores it.
"""

from __future__ import annotations

import os

# Haystack reports usage to its vendor unless told not to, at import time: set before it is imported.
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from haystack import Pipeline  # noqa: E402
from haystack.components.agents import Agent  # noqa: E402
from haystack.dataclasses import ChatMessage  # noqa: E402
from haystack.tools import Tool  # noqa: E402
from pydantic import Field, PrivateAttr, model_validator  # noqa: E402

from nemo_gym.agents.rollout_agent import (  # noqa: E402
    RESERVED_ROUTES,
    TOOL_NAME,
    Rollout,
    RolloutAgentConfig,
    summed_usage,
    text_prompt,
)
from nemo_gym.http.errors import GymError  # noqa: E402
from nemo_gym.text.extraction import one_line  # noqa: E402
from responses_api_agents.haystack_agent.chat_generator import (  # noqa: E402
    CURRENT_ROLLOUT,
    TURN_META_KEY,
    ModelTurns,
    NeMoGymResponsesChatGenerator,
    tool_text,
)
from responses_api_agents.simple_agent.app import SimpleAgent  # noqa: E402

FOLDER = Path(__file__).resolve().parent
# Settings of a row's Responses request that go with every model call the pipeline makes.
FORWARDED_PARAMS = (
    "temperature",
    "top_p",
    "max_output_tokens",
    "tool_choice",
    "parallel_tool_calls",
    "reasoning",
)


class HaystackAgentConfig(RolloutAgentConfig):
    pipeline_yaml: str = Field(
        default="pipelines/pipeline.yaml", description="serialized Haystack pipeline, relative to this folder"
    )
    agent_component_name: str = Field(default="agent", description="the pipeline's Agent component")

    @model_validator(mode="after")
    def _pipeline_loads(self) -> HaystackAgentConfig:
        """A pipeline that cannot run stops the start with one line naming the file and the problem."""
        path = FOLDER / self.pipeline_yaml
        try:
            load_agent(path, self.agent_component_name)
        except Exception as error:
            raise ValueError(f"pipeline_yaml {path}: {one_line(str(error))}") from error
        return self


class HaystackAgent(SimpleAgent):
    """simple_agent's routes (seed, loop, verify; cookies; deadline) around Haystack's loop."""

    config: HaystackAgentConfig

    _agent: Agent | None = PrivateAttr(default=None)

    def setup_webserver(self):
        """Load the pipeline before the server answers, so a broken one stops the start in one line."""
        self._agent = load_agent(FOLDER / self.config.pipeline_yaml, self.config.agent_component_name)
        return super().setup_webserver()

    async def _loop(self, params: dict[str, Any], rollout: Rollout) -> Rollout:
        messages = [chat_message(message) for message in text_prompt(params.get("input", []))]
        tools = [self._resources_tool(declared, rollout) for declared in params.get("tools") or []]
        turns = ModelTurns(
            call=lambda turn_params: self._model_turn(turn_params, rollout),
            generation_kwargs={key: params[key] for key in FORWARDED_PARAMS if key in params},
        )
        token = CURRENT_ROLLOUT.set(turns)
        try:
            # An empty list would ask Haystack to pick tools by name; a task without tools is a plain chat.
            result = await self._agent.run_async(messages=messages, tools=tools or None)
        except Exception as error:
            raise (turns.failure or error) from error
        finally:
            CURRENT_ROLLOUT.reset(token)
        if not turns.turns:
            raise GymError(502, "no_model_turn", "the pipeline's Agent ended without calling the model")
        usage = None
        for turn in turns.turns:
            usage = summed_usage(usage, turn.get("usage"))
        output = trajectory(result.get("messages") or [], turns.turns)
        rollout.response = {**turns.turns[-1], "output": output, "usage": usage}
        return rollout

    async def _model_turn(self, params: dict[str, Any], rollout: Rollout) -> dict[str, Any]:
        turn, rollout.model_cookies = await self.model_turn(
            self.config.model_server.name, params, rollout.model_cookies
        )
        return turn

    def _resources_tool(self, declared: dict[str, Any], rollout: Rollout) -> Tool:
        """A function tool of the row as a Haystack tool calling the resources server in this rollout."""
        name = declared.get("name") or ""
        if declared.get("type") != "function" or name in RESERVED_ROUTES or not TOOL_NAME.match(name):
            raise GymError(
                422, "unsupported_tool", f"not a function tool of the resources server: {declared!r}"
            )

        async def call(**arguments: Any) -> str:
            return (await self.call_tool(rollout, name, arguments)).decode(errors="replace")

        try:
            return Tool(
                name=name,
                description=declared.get("description") or name,
                parameters=declared.get("parameters") or {"type": "object", "properties": {}},
                async_function=call,
            )
        except ValueError as error:  # Haystack checks the parameters are a JSON schema
            raise GymError(422, "invalid_tool", f"tool {name!r}: {error}") from error


def load_agent(path: Path, component_name: str) -> Agent:
    """The pipeline file's Agent component, checked to call the Gym model server, warmed up."""
    # Haystack builds only classes of modules it trusts; ours is the one this agent adds.
    pipeline = Pipeline.loads(path.read_text(), allowed_modules=[NeMoGymResponsesChatGenerator.__module__])
    agent = pipeline.get_component(component_name)
    if not isinstance(agent, Agent):
        raise ValueError(
            f"agent_component_name: {component_name!r} in {path} is a {type(agent).__name__}, not an Agent"
        )
    if not isinstance(agent.chat_generator, NeMoGymResponsesChatGenerator):
        raise ValueError(
            f"{path}: the Agent's chat_generator must be "
            "responses_api_agents.haystack_agent.chat_generator.NeMoGymResponsesChatGenerator"
        )
    if agent.user_prompt:
        raise ValueError(
            f"{path}: set the Agent's user_prompt to null; the row's input is the whole user turn"
        )
    agent.warm_up()
    return agent


def chat_message(message: dict[str, str]) -> ChatMessage:
    """A text message of the row's prompt as a Haystack message."""
    if message["role"] in ("system", "developer"):
        return ChatMessage.from_system(message["content"])
    if message["role"] == "assistant":
        return ChatMessage.from_assistant(message["content"])
    return ChatMessage.from_user(message["content"])


def trajectory(messages: list[ChatMessage], turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Everything after the prompt in Gym items: each model turn's own output items, each tool result as
    the `function_call_output` of its call."""
    items: list[dict[str, Any]] = []
    for message in messages:
        if TURN_META_KEY in message.meta:
            items.extend(turns[message.meta[TURN_META_KEY]].get("output") or [])
        for result in message.tool_call_results:
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": result.origin.id or "",
                    "output": tool_text(result.result),
                }
            )
    return items


if __name__ == "__main__":
    HaystackAgent.run_webserver()
