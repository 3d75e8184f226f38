"""SimpleAgent: the multi-turn tool-calling loop (model turn, run its tool calls, repeat), then verify.

Compatible with NeMo Gym's simple_agent (same routes, request and response shapes, cookie threading),
with these changes: the loop has a default step cap; a tool
call the environment cannot serve (unknown tool, reserved route, bad arguments, a 4xx/5xx answer) is
fed back to the model as the tool's output instead of failing the rollout; a rollout has a deadline;
and `/run` runs the loop in-process instead of calling its own `/v1/responses` over HTTP. The plumbing
around the loop (model calls, cookies, usage sums, deadline, concurrency cap, the metrics proxy) is the
core's `nemo_gym.agents.rollout_agent`.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request, Response
from pydantic import Field

from nemo_gym.agents.rollout_agent import (
    Rollout,
    RolloutAgent,
    RolloutAgentConfig,
    RolloutRunRequest,
    declared_tool_names,
    input_items,
    marked_incomplete,
    summed_usage,
)
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming

DEFAULT_MAX_STEPS = 50
SimpleAgentRunRequest = RolloutRunRequest


class ConversationView:
    """What the model is shown before each of its calls. This one shows the whole conversation; an agent
    that rewrites the context first (simple_agent_with_compaction) returns its own from
    `SimpleAgent.conversation_view`, so the loop itself is written once."""

    async def request(
        self, params: dict[str, Any], conversation: list[dict[str, Any]], rollout: Rollout
    ) -> dict[str, Any] | None:
        """The body of the next model call, given the whole conversation so far; None ends the rollout
        before that call (the view marks why in `finished`)."""
        return {**params, "input": conversation}

    def answered(self, turn: dict[str, Any]) -> None:
        """The model's answer to the last body `request` gave."""

    def finished(self, response: dict[str, Any]) -> dict[str, Any]:
        """The rollout's response (every item of the conversation after the input), as the view adds to it."""
        return response


class SimpleAgentConfig(RolloutAgentConfig):
    max_steps: int | None = Field(
        default=None, ge=0, description=f"model calls per rollout; null or 0 means {DEFAULT_MAX_STEPS}"
    )


class SimpleAgent(RolloutAgent):
    config: SimpleAgentConfig

    # ---- routes -----------------------------------------------------------------------------------------

    async def responses(
        self, request: Request, response: Response, body: NeMoGymResponseCreateParamsNonStreaming
    ) -> NeMoGymResponse:
        """The loop without seeding or verifying; the caller's cookies reach both servers."""
        return await self.loop_responses(
            request, response, body.model_dump(mode="json", exclude_unset=True), self._loop
        )

    async def run(self, request: Request, body: SimpleAgentRunRequest) -> Response:
        """One rollout: seed the session, run the loop, verify; the verify answer is returned as is."""
        return Response(await self.as_rollout(self._run(request, body)), media_type="application/json")

    # ---- the rollout ------------------------------------------------------------------------------------

    def conversation_view(self, params: dict[str, Any]) -> ConversationView:
        """The view of one rollout, made fresh for it; `params` is the caller's body, read only."""
        return ConversationView()

    async def _run(self, request: Request, body: SimpleAgentRunRequest) -> bytes:
        return await self.seeded_loop_verified(request, body, self._loop)

    async def _loop(self, params: dict[str, Any], rollout: Rollout) -> Rollout:
        """`params` is the caller's freshly dumped body; it is read, never changed."""
        original_input = input_items(params)
        declared_tools = declared_tool_names(params)
        view = self.conversation_view(params)
        new_items: list[dict[str, Any]] = []
        usage: dict[str, Any] | None = None
        for _ in range(self.config.max_steps or DEFAULT_MAX_STEPS):
            body = await view.request(params, [*original_input, *new_items], rollout)
            if body is None:
                break
            turn, rollout.model_cookies = await self.model_turn(
                self.config.model_server.name, body, rollout.model_cookies
            )
            view.answered(turn)
            output = turn.get("output") or []
            new_items.extend(output)
            usage = summed_usage(usage, turn.get("usage"))
            rollout.response = turn
            if turn.get("incomplete_details"):
                break
            calls = [item for item in output if item.get("type") == "function_call"]
            if not calls:
                rollout.response = _marked_if_unanswered(turn)
                break
            for call in calls:
                new_items.append(await self.tool_call_output(call, declared_tools, rollout))
        rollout.response = view.finished({**rollout.response, "output": new_items, "usage": usage})
        return rollout


def _marked_if_unanswered(turn: dict[str, Any]) -> dict[str, Any]:
    """A last turn with no assistant message ends the rollout as NeMo Gym 0.7 does: `incomplete`, with
    the reason in the metadata, so a trainer can tell a cut-off thought from an answer."""
    output = turn.get("output") or []
    if any(item.get("type") == "message" for item in output):
        return turn
    reason, message = (
        ("incomplete_reasoning", "the model's last turn holds reasoning but no message or tool call")
        if output
        else ("empty_output", "the model's last turn has no output")
    )
    return marked_incomplete(turn, reason, message)


if __name__ == "__main__":
    SimpleAgent.run_webserver()
