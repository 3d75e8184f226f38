"""AviaryAgent: runs an Aviary (FutureHouse `fhaviary`) episode served by `resources_servers/aviary`.

The environment lives in the resources server: `/seed_session` builds it from the row, each tool is a route
that runs one Aviary `step()` and answers `{"output", "reward", "done"}`, and `/verify` pays the rewards the
environment paid. This agent is the episode loop around it: a model turn, each of its tool calls run as
one step (the model sees the tool's text), until a step says the episode is done, the model stops calling
tools (`done_if_no_tool_calls`), the turn budget (`max_steps`) or the context budget
(`max_total_sequence_length`) is spent. Tool calls are read and refused exactly as simple_agent does.
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import Request
from pydantic import Field, field_validator

from nemo_gym.agents.rollout_agent import (
    Rollout,
    RolloutRunRequest,
    declared_tool_names,
    input_items,
    marked_incomplete,
    summed_usage,
)
from responses_api_agents.simple_agent.app import DEFAULT_MAX_STEPS, SimpleAgent, SimpleAgentConfig

# Where the model's input after each step goes, with `return_transitions`.
TRANSITIONS_KEY = "transitions"
NO_TOOL_CALL_NUDGE = (
    "You did not call a tool. Every step of this task is a tool call: call one of the tools you were "
    "given, with its name and arguments exactly as declared."
)


class AviaryAgentConfig(SimpleAgentConfig):
    return_transitions: bool = Field(
        default=True,
        description="also answer `transitions`: the model's input after each step (the output stays flat)",
    )
    max_total_sequence_length: int | None = Field(
        default=None,
        gt=0,
        description="stop before a model call once the last turn's total tokens reach this",
    )
    done_if_no_tool_calls: bool = Field(
        default=True, description="a turn without tool calls ends the episode; false asks the model again"
    )
    collapse_old_env_states: bool = Field(
        default=False,
        description="not supported: resources_servers/aviary sends no environment-state messages",
    )
    old_env_state_message: str = Field(
        default="[Previous environment state - hidden]",
        description="what collapsed states would read; kept for NeMo Gym configs, as collapsing is refused",
    )

    @field_validator("collapse_old_env_states")
    @classmethod
    def _no_env_states_to_collapse(cls, value: bool) -> bool:
        if value:
            raise ValueError(
                "resources_servers/aviary answers each tool with its text only, so there are no environment "
                "state messages to collapse; set collapse_old_env_states: false"
            )
        return value


class AviaryAgent(SimpleAgent):
    """simple_agent's routes (seed, loop, verify; cookies; deadline) around the episode loop."""

    config: AviaryAgentConfig

    async def _run(self, request: Request, body: RolloutRunRequest) -> bytes:
        row = body.model_dump(mode="json", exclude_unset=True)
        rollout = await self._loop(row["responses_create_params"], await self.seeded_rollout(request, row))
        transitions = rollout.response.pop(TRANSITIONS_KEY, None)
        verified = await self.verified(row, rollout.response, rollout)
        if transitions is None:
            return verified
        return orjson.dumps({**orjson.loads(verified), TRANSITIONS_KEY: transitions})

    async def _loop(self, params: dict[str, Any], rollout: Rollout) -> Rollout:
        """`params` is the caller's freshly dumped body; it is read, never changed. With
        `return_transitions`, the response holds them too (`/run` moves them next to it)."""
        prompt = input_items(params)
        declared_tools = declared_tool_names(params)
        done, stop_reason = False, None
        new_items: list[dict[str, Any]] = []
        transitions: list[list[dict[str, Any]]] = []
        usage: dict[str, Any] | None = None
        for _ in range(self.config.max_steps or DEFAULT_MAX_STEPS):
            if self._context_spent(rollout.response):
                stop_reason = "max_total_sequence_length"
                break
            turn, rollout.model_cookies = await self.model_turn(
                self.config.model_server.name,
                {**params, "input": [*prompt, *new_items]},
                rollout.model_cookies,
            )
            output = turn.get("output") or []
            new_items.extend(output)
            usage = summed_usage(usage, turn.get("usage"))
            rollout.response = turn
            if turn.get("incomplete_details"):
                break
            calls = [item for item in output if item.get("type") == "function_call"]
            if not calls and self.config.done_if_no_tool_calls:
                break
            if not calls:
                new_items.append(_user_message(NO_TOOL_CALL_NUDGE))
            for call in calls:
                item, ended = stepped(await self.tool_call_output(call, declared_tools, rollout))
                new_items.append(item)
                done = done or ended
            transitions.append([*prompt, *new_items])
            if done:
                break
        rollout.response = {**rollout.response, "output": new_items, "usage": usage}
        if stop_reason is not None:
            message = f"the episode stopped before a model call: {stop_reason} was reached"
            rollout.response = marked_incomplete(rollout.response, stop_reason, message)
        if self.config.return_transitions:
            rollout.response[TRANSITIONS_KEY] = transitions
        return rollout

    def _context_spent(self, last_turn: dict[str, Any]) -> bool:
        limit = self.config.max_total_sequence_length
        total = ((last_turn or {}).get("usage") or {}).get("total_tokens") or 0
        return limit is not None and total >= limit


def stepped(item: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """A tool's `function_call_output` with the tool's text in place of the step's answer, and whether the
    step ended the episode. A refused call (any other answer) stays as the refusal, for the model to read."""
    try:
        answer = orjson.loads(item["output"])
    except orjson.JSONDecodeError:
        return item, False
    if not isinstance(answer, dict) or not {"output", "done"} <= answer.keys():
        return item, False
    return {**item, "output": str(answer["output"])}, bool(answer["done"])


def _user_message(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "type": "message"}


if __name__ == "__main__":
    AviaryAgent.run_webserver()
