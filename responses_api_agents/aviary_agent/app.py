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
from fastapi import Request, Response
from pydantic import Field, field_validator

from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from nemo_gym.rollout_agent import Rollout, RolloutRunRequest, summed_usage
from responses_api_agents.simple_agent.app import DEFAULT_MAX_STEPS, SimpleAgent, SimpleAgentConfig

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
    old_env_state_message: str = Field(default="[Previous environment state - hidden]")

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
    config: AviaryAgentConfig

    async def responses(
        self, request: Request, response: Response, body: NeMoGymResponseCreateParamsNonStreaming
    ) -> NeMoGymResponse:
        """The episode without seeding or verifying; the caller's cookies reach both servers."""
        episode = await self.as_rollout(
            self._episode(body.model_dump(mode="json", exclude_unset=True), self.session_rollout(request))
        )
        self.end_session_rollout(episode.rollout)
        for name, value in {**episode.rollout.resources_cookies, **episode.rollout.model_cookies}.items():
            response.set_cookie(name, value)
        return NeMoGymResponse.model_validate(episode.rollout.response)

    async def _run(self, request: Request, body: RolloutRunRequest) -> bytes:
        row = body.model_dump(mode="json", exclude_unset=True)
        episode = await self._episode(row["responses_create_params"], await self.seeded_rollout(request, row))
        verified = await self.verified(row, episode.rollout.response, episode.rollout)
        if not self.config.return_transitions:
            return verified
        return orjson.dumps({**orjson.loads(verified), "transitions": episode.transitions})

    async def _episode(self, params: dict[str, Any], rollout: Rollout) -> Episode:
        """`params` is the caller's freshly dumped body; it is read, never changed."""
        prompt = params.get("input", [])
        if isinstance(prompt, str):
            prompt = [_user_message(prompt)]
        declared_tools = {
            tool.get("name") for tool in params.get("tools") or [] if tool.get("type") == "function"
        }
        episode = Episode(rollout)
        new_items: list[dict[str, Any]] = []
        usage: dict[str, Any] | None = None
        for _ in range(self.config.max_steps or DEFAULT_MAX_STEPS):
            if self._context_spent(rollout.response):
                episode.stop("max_total_sequence_length", "the last turn reached max_total_sequence_length")
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
                item = await self._tool_output(call, declared_tools, rollout)
                new_items.append(episode.stepped(item))
            episode.transitions.append([*prompt, *new_items])
            if episode.done:
                break
        rollout.response = {**rollout.response, "output": new_items, "usage": usage, **episode.metadata()}
        return episode

    def _context_spent(self, last_turn: dict[str, Any]) -> bool:
        limit = self.config.max_total_sequence_length
        total = ((last_turn or {}).get("usage") or {}).get("total_tokens") or 0
        return limit is not None and total >= limit


class Episode:
    """What one episode produced besides the trajectory: whether a step ended it, why it stopped early,
    and the model's input after each step."""

    def __init__(self, rollout: Rollout) -> None:
        self.rollout = rollout
        self.done = False
        self.transitions: list[list[dict[str, Any]]] = []
        self.stop_reason: tuple[str, str] | None = None

    def stepped(self, item: dict[str, Any]) -> dict[str, Any]:
        """A tool's `function_call_output`, its text in place of the step's answer; `done` noted. A refused
        call (any other answer) stays as the refusal, for the model to read."""
        try:
            answer = orjson.loads(item["output"])
        except orjson.JSONDecodeError:
            return item
        if not isinstance(answer, dict) or not {"output", "done"} <= answer.keys():
            return item
        self.done = self.done or bool(answer["done"])
        return {**item, "output": str(answer["output"])}

    def stop(self, reason: str, message: str) -> None:
        self.stop_reason = (reason, message)

    def metadata(self) -> dict[str, Any]:
        """An episode cut short by the context budget ends `incomplete`, the reason in the metadata."""
        if self.stop_reason is None:
            return {}
        reason, message = self.stop_reason
        metadata = {**(self.rollout.response.get("metadata") or {})}
        metadata |= {"ng_termination_reason": reason, "ng_termination_message": message}
        return {"status": "incomplete", "metadata": metadata}


def _user_message(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "type": "message"}


if __name__ == "__main__":
    AviaryAgent.run_webserver()
