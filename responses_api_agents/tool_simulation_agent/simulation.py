"""What the tool simulator is asked, and how its answer becomes a tool's output (or is refused as unusable)."""

from __future__ import annotations

from typing import Any

import orjson

from nemo_gym.agents.rollout_agent import marked_incomplete

DEFAULT_TOOL_SIMULATION_PROMPT = (
    "You play the tools of a software environment. You get the tool's definition, the conversation so far "
    "and one call the assistant made. Reply with exactly what that tool would return for this call, "
    "consistent with every earlier tool result in the conversation, in the tool's own format (usually "
    "JSON). Reply with the output alone: no explanation, no code fences."
)
UNUSABLE_SIMULATION = "tool_simulation_failed"


def simulation_request(
    prompt: str, params: dict[str, Any], conversation: list[dict[str, Any]], call: dict[str, Any]
) -> dict[str, Any]:
    """The simulator's `/v1/responses` body: the prompt as system message, then one user message holding
    the called tool's definition (when the task declares it), the conversation and the call, as JSON. No
    tools are offered, so the simulator answers in text."""
    definition = next(
        (tool for tool in params.get("tools") or [] if tool.get("name") == call.get("name")), None
    )
    case: dict[str, Any] = {} if definition is None else {"tool": definition}
    case |= {
        "conversation": conversation,
        "call": {"name": call.get("name"), "arguments": call.get("arguments")},
    }
    return {
        "input": [
            {"role": "system", "content": prompt, "type": "message"},
            {"role": "user", "content": orjson.dumps(case).decode(), "type": "message"},
        ]
    }


def simulated_output(turn: dict[str, Any]) -> tuple[str, str | None]:
    """The text of the simulator's answer, and why it cannot stand for a tool's output (None if it can):
    it was cut off, or it holds no text (nothing, reasoning only, or a tool call of its own)."""
    output = turn.get("output") or []
    text = "".join(
        part.get("text") or ""
        for item in output
        if item.get("type") == "message"
        for part in item.get("content") or []
        if isinstance(part, dict) and part.get("type") == "output_text"
    )
    if details := turn.get("incomplete_details"):
        return text, f"the tool simulator's answer was cut off ({details.get('reason') or 'no reason given'})"
    if not text.strip():
        kinds = [item.get("type") for item in output]
        return text, f"the tool simulator's answer holds no text (output items: {kinds})"
    return text, None


def marked_unusable(response: dict[str, Any], problem: str) -> dict[str, Any]:
    """The rollout's response, ended early because a simulated tool output could not be used."""
    return marked_incomplete(response, UNUSABLE_SIMULATION, problem)
