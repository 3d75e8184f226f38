"""What a coding-agent CLI's run produced, in Gym's terms: the trajectory each CLI agent's parser builds
from the CLI's output or session (output items, usage, how the run ended), the item shapes those parsers
share, and the token ids of the run's model calls put on the items they generated."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

# Output items a model call generates (tool results are the CLI's).
GENERATED_TYPES = frozenset({"message", "function_call", "reasoning"})


def attach_token_ids(output: list[dict[str, Any]], calls: list[dict[str, Any] | None]) -> str:
    """Put each model call's token fields on the last item it generated, as the model servers do: the
    output's turns (runs of generated items between tool results) are the calls, in order. Says whether
    that was done (`attached`), the model server had none (`unavailable`), or turns and calls did not
    line up one to one (`unmatched`: then nothing is attached rather than something wrong)."""
    if not calls or not any(calls):
        return "unavailable"
    turns: list[dict[str, Any]] = []  # the last generated item of each turn
    in_turn = False
    for item in output:
        generated = item.get("type") in GENERATED_TYPES
        if generated and in_turn:
            turns[-1] = item
        elif generated:
            turns.append(item)
        in_turn = generated or (in_turn and item.get("type") != "function_call_output")
    if len(turns) != len(calls) or not all(calls):
        return "unmatched"
    for item, fields in zip(turns, calls, strict=True):
        item.update(fields)
    return "attached"


@dataclass
class Trajectory:
    """What a CLI run produced, in Gym's terms."""

    output: list[dict[str, Any]]
    usage: dict[str, Any]
    # Whether the CLI reported the end of its run (a final answer, or a turn limit reached).
    finished: bool
    # The error the CLI reported (a failed model call, ...), if any: the rollout then fails with it.
    error: str | None = None
    # What the CLI said of its run (its outcome, e.g. that it hit max turns; its session id), as strings.
    metadata: dict[str, str] = field(default_factory=dict)


def json_events(stdout: str) -> list[dict[str, Any]]:
    """The JSON objects of a CLI's one-event-a-line output; other lines (warnings it printed) are skipped."""
    events = []
    for line in stdout.splitlines():
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def assistant_message(text: str, item_id: str) -> dict[str, Any]:
    """A Responses output message item holding `text`."""
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def tool_call_items(call_id: str, name: str, arguments: str, output: str) -> list[dict[str, Any]]:
    """A tool call the CLI ran and its result, as a Responses function_call / function_call_output pair."""
    return [
        {"id": call_id, "type": "function_call", "call_id": call_id, "name": name, "arguments": arguments,
         "status": "completed"},
        {"type": "function_call_output", "call_id": call_id, "output": output},
    ]  # fmt: skip


def usage_of(input_tokens: int, output_tokens: int, cached: int = 0, reasoning: int = 0) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input_tokens + output_tokens,
    }
