"""What a person wants to see of one stored rollout, cut out of its JSON line.

A results line is the agent's `/run` answer (the request it sent, the Responses API `response`, the
reward and whatever else `/verify` returned) stamped with its task, rollout and agent; a failures line
says which rollout failed, how and on which attempt. Both the terminal view (`gym show`) and the page
(`gym view`) read them through these functions, so they always agree on what a rollout contains.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from nemo_gym.collection.records import agent_name_of
from nemo_gym.config.jsonl import FAILURE_CLASS_KEY, ROLLOUT_INDEX_KEY, TASK_INDEX_KEY
from nemo_gym.config.server_refs import AGENT_REF_KEY
from nemo_gym.text.extraction import one_line

PREVIEW_CHARS = 120
# Keys of a results line that are not what `/verify` returned.
TRANSPORT_KEYS = frozenset({"responses_create_params", "response", AGENT_REF_KEY})
TOKEN_KEYS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs")


class RolloutSummary(NamedTuple):
    """One row of a rollout list."""

    task: int | None
    rollout: int | None
    agent: str | None
    reward: float | None
    input_tokens: int | None
    output_tokens: int | None
    tool_calls: int
    failure: str | None
    preview: str


def integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def agent_of(record: dict[str, Any]) -> str | None:
    """The agent's name, when the line names one as text (the list sorts and filters by it)."""
    name = agent_name_of(record)
    return name if isinstance(name, str) else None


def is_failure(record: dict[str, Any]) -> bool:
    return FAILURE_CLASS_KEY in record


def failure_class(record: dict[str, Any]) -> str | None:
    """Why a rollout did not count as a clean success: the collector's class for a failure record; for a
    result, a judge that could not grade it, a response cut short, or an upstream error."""
    if is_failure(record):
        return str(record[FAILURE_CLASS_KEY])
    judge = record.get("judge_failure")
    if isinstance(judge, dict):
        return f"judge_{judge.get('kind', 'failure')}"
    response = record.get("response")
    if not isinstance(response, dict):
        return None
    if response.get("error"):
        return "response_error"
    details = response.get("incomplete_details")
    if isinstance(details, dict) and details.get("reason"):
        return f"incomplete_{details['reason']}"
    return None


def output_items(record: dict[str, Any]) -> list[dict[str, Any]]:
    response = record.get("response")
    output = response.get("output") if isinstance(response, dict) else None
    return [item for item in output if isinstance(item, dict)] if isinstance(output, list) else []


def usage_of(record: dict[str, Any]) -> tuple[int | None, int | None]:
    response = record.get("response")
    usage = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(usage, dict):
        return None, None
    return integer(usage.get("input_tokens")), integer(usage.get("output_tokens"))


def summarize(record: dict[str, Any]) -> RolloutSummary:
    input_tokens, output_tokens = usage_of(record)
    items = output_items(record)
    if is_failure(record):
        preview = str(record.get("_ng_failure_message", ""))
    else:
        preview = final_answer(items) or ""
    return RolloutSummary(
        task=integer(record.get(TASK_INDEX_KEY)),
        rollout=integer(record.get(ROLLOUT_INDEX_KEY)),
        agent=agent_of(record),
        reward=None if is_failure(record) else number(record.get("reward")),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        tool_calls=sum(1 for item in items if item.get("type") == "function_call"),
        failure=failure_class(record),
        preview=one_line(preview, PREVIEW_CHARS),
    )


# ---- the conversation ------------------------------------------------------------------------------------


def content_text(content: Any) -> str:
    """The text of a message's content: a string, or parts (text kept, images and files named)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else str(content)
    pieces = []
    for part in content:
        if not isinstance(part, dict):
            pieces.append(str(part))
        elif isinstance(part.get("text"), str):
            pieces.append(part["text"])
        elif isinstance(part.get("refusal"), str):
            pieces.append(f"[refusal] {part['refusal']}")
        elif part.get("type") == "input_image":
            pieces.append("[image]")
        elif part.get("type") == "input_file":
            pieces.append(f"[file {part.get('filename') or part.get('file_id') or ''}]".replace(" ]", "]"))
    return "\n".join(pieces)


def reasoning_text(item: dict[str, Any]) -> str:
    parts = [*(item.get("summary") or []), *(item.get("content") or [])]
    return "\n".join(
        part["text"] for part in parts if isinstance(part, dict) and isinstance(part.get("text"), str)
    )


def token_data(item: dict[str, Any]) -> dict[str, list[Any]] | None:
    found = {key: item[key] for key in TOKEN_KEYS if isinstance(item.get(key), list)}
    return found or None


def turn(item: dict[str, Any], source: str) -> dict[str, Any]:
    """One conversation step of an input or output item, as the views show it."""
    kind = item.get("type") or ("message" if "role" in item else "other")
    shown: dict[str, Any] = {"source": source}
    if kind == "message":
        shown |= {
            "kind": "message",
            "role": str(item.get("role", "")),
            "text": content_text(item.get("content")),
        }
    elif kind == "reasoning":
        shown |= {"kind": "reasoning", "text": reasoning_text(item)}
    elif kind == "function_call":
        shown |= {
            "kind": "tool_call",
            "name": str(item.get("name", "")),
            "arguments": str(item.get("arguments", "")),
            "call_id": str(item.get("call_id", "")),
        }
    elif kind == "function_call_output":
        output = item.get("output")
        shown |= {
            "kind": "tool_output",
            "call_id": str(item.get("call_id", "")),
            "text": output if isinstance(output, str) else content_text(output),
        }
    else:
        shown |= {"kind": "other", "type": str(kind), "item": item}
    if tokens := token_data(item):
        shown["tokens"] = tokens
    return shown


def conversation(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The whole exchange in order: instructions, the input items, then what the agent produced. The last
    assistant message of the output is marked `final` (the answer `/verify` graded)."""
    params = record.get("responses_create_params")
    params = params if isinstance(params, dict) else {}
    steps: list[dict[str, Any]] = []
    if isinstance(params.get("instructions"), str) and params["instructions"]:
        steps.append({"source": "input", "kind": "message", "role": "system", "text": params["instructions"]})
    given = params.get("input")
    if isinstance(given, str):
        steps.append({"source": "input", "kind": "message", "role": "user", "text": given})
    elif isinstance(given, list):
        steps += [turn(item, "input") for item in given if isinstance(item, dict)]
    produced = [turn(item, "output") for item in output_items(record)]
    answers = [step for step in produced if step["kind"] == "message" and step["role"] == "assistant"]
    if answers:
        answers[-1]["final"] = True
    return steps + produced


def final_answer(items: list[dict[str, Any]]) -> str | None:
    for item in reversed(items):
        if item.get("type", "message") == "message" and item.get("role") == "assistant":
            return content_text(item.get("content"))
    return None


def verify_fields(record: dict[str, Any]) -> dict[str, Any]:
    """What `/verify` returned besides the trajectory (reward first), or a failure record's own fields."""
    fields = {
        key: value
        for key, value in record.items()
        if key not in TRANSPORT_KEYS and not key.startswith("_ng_")
    }
    if "reward" in fields:
        fields = {"reward": fields.pop("reward"), **fields}
    return fields


def failure_fields(record: dict[str, Any]) -> dict[str, Any]:
    return {
        key.removeprefix("_ng_failure_"): value
        for key, value in record.items()
        if key.startswith("_ng_failure_")
    }


def detail(record: dict[str, Any], task_row: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything the rollout view shows of one line. A failure record holds no conversation: `task_row`
    (its line of the materialized inputs) shows at least what was asked."""
    summary = summarize(record)
    return {
        "summary": summary._asdict(),
        "conversation": conversation(task_row if is_failure(record) and task_row else record),
        "verify": {} if is_failure(record) else verify_fields(record),
        "failure": failure_fields(record) if is_failure(record) else None,
    }
