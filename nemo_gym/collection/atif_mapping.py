"""One Gym rollout as an ATIF trajectory, and the rollout's response rebuilt from that trajectory.

The request's `instructions` and `input` items and the response's `output` items become ATIF steps in order:
system and developer messages are `system` steps, user messages `user` steps, and each model turn (its
reasoning, assistant message and function calls, then the outputs of those calls) one `agent` step, with
`reasoning_content`, `message`, `tool_calls` and `observation`. A turn's training token fields go to the
step's `metrics` (`prompt_token_ids`, `completion_token_ids`, `logprobs`; `routed_experts` in its `extra`).

What ATIF has no field for is kept in `extra`, so that the response comes back item for item: each step's
`extra.gym_items` lists its items without the parts the step's own fields carry (ids, status, annotations,
and anything unusual in full), and the root `extra.gym` holds the rollout's indices, agent, reward, the
step where the response starts and the response without its `output`.
"""

from __future__ import annotations

from typing import Any

import orjson

from nemo_gym.config.jsonl import ROLLOUT_INDEX_KEY, TASK_INDEX_KEY
from nemo_gym.config.server_refs import AGENT_REF_KEY
from nemo_gym.wire.atif_v1_7 import (
    AtifAgent,
    AtifFinalMetrics,
    AtifMetrics,
    AtifStep,
    AtifTrajectory,
)

GYM_EXTRA_KEY = "gym"
ITEMS_KEY = "gym_items"
TOKEN_FIELDS_MARK = "_atif_token_fields"
TOKEN_FIELDS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs")
SYSTEM_ROLES = ("system", "developer")


class UnmappableRollout(ValueError):
    """A rollout that has no faithful trajectory (no response, no reward, ...): the reason, one line."""


def trajectory_of(row: dict[str, Any], session_id: str, agent_version: str) -> AtifTrajectory:
    """The trajectory of one stored rollout (a line of what `gym eval run` writes)."""
    response = row.get("response")
    if not isinstance(response, dict) or not isinstance(response.get("output"), list):
        raise UnmappableRollout("no response with an output list (a failed rollout?)")
    reward = row.get("reward")
    if isinstance(reward, bool) or not isinstance(reward, int | float):
        raise UnmappableRollout("no numeric reward (a rollout that was not verified?)")
    agent_ref = row.get(AGENT_REF_KEY)
    if not isinstance(agent_ref, dict) or not isinstance(agent_ref.get("name"), str):
        raise UnmappableRollout(f"no {AGENT_REF_KEY}.name to name the trajectory's agent by")
    params = row.get("responses_create_params")
    request_items = _request_items(params if isinstance(params, dict) else {})
    steps = _Steps()
    for item in request_items:
        steps.add(item)
    first_response_step = len(steps.steps) + 1
    steps.start_new()
    for item in response["output"]:
        steps.add(item)
    task, rollout = row.get(TASK_INDEX_KEY), row.get(ROLLOUT_INDEX_KEY)
    model = response.get("model") if isinstance(response.get("model"), str) else None
    envelope = {key: value for key, value in response.items() if key != "output"}
    built = steps.finished()
    return AtifTrajectory(
        session_id=session_id,
        trajectory_id=f"{task}-{rollout}",
        agent=AtifAgent(name=agent_ref["name"], version=agent_version, model_name=model),
        steps=built,
        final_metrics=_final_metrics(response.get("usage"), len(built)),
        extra={
            GYM_EXTRA_KEY: {
                TASK_INDEX_KEY: task,
                ROLLOUT_INDEX_KEY: rollout,
                AGENT_REF_KEY: agent_ref,
                "reward": reward,
                "first_response_step": first_response_step,
                "response": envelope,
            }
        },
    )


def response_of(trajectory: AtifTrajectory) -> dict[str, Any]:
    """The rollout's response as it was stored, rebuilt from the steps the export wrote for its output."""
    gym = _gym_extra(trajectory)
    output: list[dict[str, Any]] = []
    for step in trajectory.steps[gym["first_response_step"] - 1 :]:
        output += _items_of(step)
    return {**gym["response"], "output": output}


def stored_rollout_of(trajectory: AtifTrajectory) -> dict[str, Any]:
    """What reverify needs of the stored rollout: its indices, agent, recorded reward and response."""
    gym = _gym_extra(trajectory)
    keys = (TASK_INDEX_KEY, ROLLOUT_INDEX_KEY, AGENT_REF_KEY, "reward")
    return {**{key: gym[key] for key in keys}, "response": response_of(trajectory)}


def _gym_extra(trajectory: AtifTrajectory) -> dict[str, Any]:
    gym = (trajectory.extra or {}).get(GYM_EXTRA_KEY)
    wanted = (TASK_INDEX_KEY, ROLLOUT_INDEX_KEY, AGENT_REF_KEY, "reward", "first_response_step", "response")
    if not isinstance(gym, dict) or any(key not in gym for key in wanted):
        raise UnmappableRollout(
            f"extra.{GYM_EXTRA_KEY} lacks what the response is rebuilt from; use a file `gym eval export` wrote"
        )
    return gym


def _request_items(params: dict[str, Any]) -> list[dict[str, Any]]:
    """The request as items: `instructions` first (as a system message), then `input`."""
    items: list[dict[str, Any]] = []
    instructions = params.get("instructions")
    if isinstance(instructions, str) and instructions:
        items.append({"role": "system", "content": instructions, "type": "message"})
    given = params.get("input")
    if isinstance(given, str):
        items.append({"role": "user", "content": given, "type": "message"})
    elif isinstance(given, list):
        items += [item for item in given if isinstance(item, dict)]
    return items


class _Steps:
    """Builds the step list item by item; a model turn's items gather in one agent step."""

    def __init__(self) -> None:
        self.steps: list[dict[str, Any]] = []
        self.current: dict[str, Any] | None = None

    def start_new(self) -> None:
        self.current = None

    def add(self, item: dict[str, Any]) -> None:
        kind = item.get("type", "message")
        role = item.get("role")
        if kind == "message" and role != "assistant":
            step = self._open("system" if role in SYSTEM_ROLES else "user")
            step["message"], skeleton = _text_and_skeleton(item, "content")
            step[ITEMS_KEY].append(skeleton)
            self.current = None  # a turn of its own: the next model item opens an agent step
            return
        step = self._agent_step_for(kind)
        if kind == "message":
            step["message"], skeleton = _text_and_skeleton(item, "content")
        elif kind == "reasoning":
            step["reasoning_content"], skeleton = _text_and_skeleton(item, "summary")
        elif kind == "function_call":
            skeleton = _add_tool_call(step, item)
        elif kind == "function_call_output":
            skeleton = _add_observation(step, item)
        else:  # an item type ATIF has no field for: kept whole
            skeleton = dict(item)
        step[ITEMS_KEY].append(_move_token_fields(step, skeleton))

    def _agent_step_for(self, kind: str) -> dict[str, Any]:
        """The current agent step, or a new one when `kind` starts the next model turn."""
        step = self.current
        if step is not None and step["source"] == "agent":
            has = {
                "reasoning": step.get("reasoning_content") is not None,
                "message": any(item.get("type", "message") == "message" for item in step[ITEMS_KEY]),
                "calls": bool(step.get("tool_calls")),
                "results": bool(step.get("observation")),
            }
            starts_turn = {
                "reasoning": any(has.values()),
                "message": has["message"] or has["calls"] or has["results"],
                "function_call": has["results"],
            }
            if not starts_turn.get(kind, False):
                return step
        return self._open("agent")

    def _open(self, source: str) -> dict[str, Any]:
        self.current = {"step_id": len(self.steps) + 1, "source": source, "message": "", ITEMS_KEY: []}
        self.steps.append(self.current)
        return self.current

    def finished(self) -> list[AtifStep]:
        built = []
        for step in self.steps:
            fields = {key: value for key, value in step.items() if key != ITEMS_KEY}
            built.append(AtifStep.model_validate({**fields, "extra": {ITEMS_KEY: step[ITEMS_KEY]}}))
        return built


def _text_and_skeleton(item: dict[str, Any], key: str) -> tuple[str, dict[str, Any]]:
    """The text of a message's content (or a reasoning item's summary) and the item without it. A plain
    string or a single text part moves to the step; several parts stay in the item too, joined in the step."""
    value = item.get(key)
    skeleton = {name: part for name, part in item.items() if name != key}
    if isinstance(value, str):
        return value, skeleton
    parts = value if isinstance(value, list) else []
    texts = [part["text"] for part in parts if isinstance(part, dict) and isinstance(part.get("text"), str)]
    if len(parts) == 1 and len(texts) == 1:
        skeleton[key] = [{name: field for name, field in parts[0].items() if name != "text"}]
        return texts[0], skeleton
    return "\n\n".join(texts), {**skeleton, key: value}


def _add_tool_call(step: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    """Adds the call to the step; the item keeps its arguments only when ATIF's object cannot give the
    exact text back (spacing, invalid JSON, a non-object)."""
    text = item.get("arguments") or ""
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError:
        parsed = None
    arguments = parsed if isinstance(parsed, dict) else {}
    step.setdefault("tool_calls", []).append(
        {
            "tool_call_id": str(item.get("call_id")),
            "function_name": str(item.get("name")),
            "arguments": arguments,
        }
    )
    skeleton = {key: value for key, value in item.items() if key not in ("call_id", "name", "arguments")}
    if orjson.dumps(arguments).decode() != text:
        skeleton["arguments"] = text
    return skeleton


def _add_observation(step: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    """Adds the call's output to the step; it names its call when the step made that call."""
    call_id = item.get("call_id")
    made = {call["tool_call_id"] for call in step.get("tool_calls", [])}
    output = item.get("output")
    result: dict[str, Any] = {"content": output if isinstance(output, str) else orjson.dumps(output).decode()}
    skeleton = {key: value for key, value in item.items() if key != "output"}
    if call_id in made:
        result["source_call_id"] = call_id
        skeleton.pop("call_id")
    if not isinstance(output, str):
        skeleton["output"] = output
    step.setdefault("observation", {"results": []})["results"].append(result)
    return skeleton


def _move_token_fields(step: dict[str, Any], skeleton: dict[str, Any]) -> dict[str, Any]:
    """The first item of a turn carrying training token fields gives them to the step's metrics."""
    if "metrics" in step or not all(isinstance(skeleton.get(key), list) for key in TOKEN_FIELDS):
        return skeleton
    prompt, generated, log_probs = (skeleton[key] for key in TOKEN_FIELDS)
    metrics: dict[str, Any] = {
        "prompt_tokens": len(prompt),
        "completion_tokens": len(generated),
        "prompt_token_ids": prompt,
        "completion_token_ids": generated,
        "logprobs": log_probs,
    }
    if skeleton.get("routed_experts") is not None:
        metrics["extra"] = {"routed_experts": skeleton["routed_experts"]}
    step["metrics"] = metrics
    moved = (*TOKEN_FIELDS, "routed_experts")
    return {**{key: value for key, value in skeleton.items() if key not in moved}, TOKEN_FIELDS_MARK: True}


def _final_metrics(usage: Any, total_steps: int) -> AtifFinalMetrics:
    if not isinstance(usage, dict):
        return AtifFinalMetrics(total_steps=total_steps)
    details = usage.get("input_tokens_details")
    return AtifFinalMetrics(
        total_prompt_tokens=usage.get("input_tokens"),
        total_completion_tokens=usage.get("output_tokens"),
        total_cached_tokens=details.get("cached_tokens") if isinstance(details, dict) else None,
        total_steps=total_steps,
    )


# ---- back from ATIF ---------------------------------------------------------------------------------------


def _items_of(step: AtifStep) -> list[dict[str, Any]]:
    """A step's items with the parts its fields carry put back, in the order they were stored."""
    skeletons = (step.extra or {}).get(ITEMS_KEY)
    if not isinstance(skeletons, list):
        raise UnmappableRollout(f"step {step.step_id}: no extra.{ITEMS_KEY} to rebuild its items from")
    calls = iter(step.tool_calls or [])
    results = iter(step.observation.results if step.observation else [])
    items = []
    for skeleton in skeletons:
        item = dict(skeleton)
        kind = item.get("type", "message")
        if kind == "message":
            _put_text(item, "content", step.message)
        elif kind == "reasoning":
            _put_text(item, "summary", step.reasoning_content or "")
        elif kind == "function_call":
            call = next(calls)
            item = {**item, "call_id": call.tool_call_id, "name": call.function_name}
            item.setdefault("arguments", orjson.dumps(call.arguments).decode())
        elif kind == "function_call_output":
            result = next(results)
            item.setdefault("output", result.content)
            if result.source_call_id is not None:
                item["call_id"] = result.source_call_id
        if item.pop(TOKEN_FIELDS_MARK, False):
            item.update(_token_fields(step.metrics))
        items.append(item)
    return items


def _put_text(item: dict[str, Any], key: str, text: str) -> None:
    """Undoes `_text_and_skeleton`: a missing value was a string, a one-part list lost its text."""
    value = item.get(key)
    if key not in item:
        item[key] = text
    elif isinstance(value, list) and len(value) == 1 and "text" not in value[0]:
        item[key] = [{**value[0], "text": text}]


def _token_fields(metrics: AtifMetrics | None) -> dict[str, Any]:
    if metrics is None:
        raise UnmappableRollout("an item marked as carrying token fields, in a step without metrics")
    fields: dict[str, Any] = {
        "prompt_token_ids": metrics.prompt_token_ids,
        "generation_token_ids": metrics.completion_token_ids,
        "generation_log_probs": metrics.logprobs,
    }
    if metrics.extra and "routed_experts" in metrics.extra:
        fields["routed_experts"] = metrics.extra["routed_experts"]
    return fields
