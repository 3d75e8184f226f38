"""What the tool simulator and the judge are shown, and how their answers are read.

A simulated tool result must be one JSON object that fits the tool's `returns` schema (when the task gives
one); a near-JSON answer is mended with json-repair first. Anything else becomes a tool error the policy
sees, so a broken simulator shows up as an error in the trajectory, never as a made-up result.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

import jsonschema
import yaml
from json_repair import repair_json
from pydantic import BaseModel, ConfigDict, Field

from nemo_gym.config_types import ConfigError

Verdict = Literal["pass", "fail"]
VERDICT_LINE = re.compile(r"VERDICT\s*:\s*\**\s*(PASS|FAIL)\b", re.IGNORECASE)
FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(.*?)\n?```\s*$", re.DOTALL)


class ToolSpec(BaseModel):
    """One generated tool of a task: NeMo Gym's rows give `parameters`/`params` and `description`/`doc`."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1)
    description: str | None = None
    doc: str | None = None
    parameters: dict[str, Any] | None = None
    params: dict[str, Any] | None = None
    returns: dict[str, Any] | None = None

    @property
    def summary(self) -> str:
        return self.description or self.doc or ""

    @property
    def parameter_schema(self) -> dict[str, Any]:
        return self.parameters or self.params or {"type": "object", "properties": {}}


class CustomerScenario(BaseModel):
    model_config = ConfigDict(extra="allow")

    customer_persona: str | None = None
    reason_for_contact: str | None = None
    customer_details: str | None = None
    unknown_info: str | None = None
    task_instructions: str | None = None
    outside_policy_scope: bool | None = None


class ConversationTask(BaseModel):
    """The row fields the environment reads (NeMo Gym's names); everything else passes through."""

    model_config = ConfigDict(extra="allow")

    id: str | int | None = None
    domain_name: str | None = None
    policy: str = ""
    tools: list[ToolSpec] = Field(min_length=1)
    customer_scenario: CustomerScenario


def load_prompt(folder: Path, path: str, key: str, placeholders: tuple[str, ...]) -> str:
    """The `user` prompt of a YAML file, checked to fill with `placeholders` so a broken file stops the
    server at start instead of failing every episode."""
    full_path = Path(path) if Path(path).is_absolute() else folder / path
    try:
        prompt = yaml.safe_load(full_path.read_text(encoding="utf-8"))["user"]
        prompt.format(**dict.fromkeys(placeholders, ""))
    except OSError as error:
        raise ConfigError(f"{key}: cannot read {full_path} ({error.strerror})") from None
    except (yaml.YAMLError, TypeError, KeyError, IndexError, ValueError, AttributeError) as error:
        raise ConfigError(
            f"{key}: {full_path} must be YAML with a `user` prompt using only the placeholders "
            f"{', '.join('{' + p + '}' for p in placeholders)} (literal braces doubled): {error!r}"
        ) from None
    return prompt


def scenario_notes(scenario: CustomerScenario) -> str:
    """The simulated user's private brief: who they are and what they want (the policy never sees it)."""
    parts = [
        ("You are", scenario.customer_persona),
        ("You are contacting support to", scenario.reason_for_contact),
        ("Your details", scenario.customer_details),
        ("What you do not know", scenario.unknown_info),
        ("How to behave", scenario.task_instructions),
    ]
    return "\n".join(f"{label}: {text}" for label, text in parts if text)


def pretty(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def parse_arguments(tool: ToolSpec, raw: str) -> tuple[dict[str, Any] | None, str | None]:
    """The policy's call arguments, or why they are unusable (not a JSON object, or off the schema)."""
    try:
        arguments = json.loads(raw or "{}")
    except json.JSONDecodeError as error:
        return None, f"arguments of {tool.name} are not valid JSON: {error.msg}"
    if not isinstance(arguments, dict):
        return None, f"arguments of {tool.name} must be a JSON object"
    problem = schema_problem(tool.parameter_schema, arguments)
    if problem is not None:
        return None, f"arguments of {tool.name} do not fit its parameters: {problem}"
    return arguments, None


def schema_problem(schema: dict[str, Any], value: Any) -> str | None:
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as error:
        where = "/".join(str(part) for part in error.absolute_path) or "(top level)"
        return f"{where}: {error.message[:200]}"
    except jsonschema.SchemaError:
        return None  # a task's own schema is broken: nothing to hold the value to
    return None


def read_json(text: str) -> tuple[Any, bool]:
    """(value, repaired) of a model's JSON answer: one code fence unwrapped, then strict JSON, else what
    json-repair makes of it (None for an empty answer; an empty value when nothing could be mended)."""
    body = text.strip()
    fenced = FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        return json.loads(body), False
    except json.JSONDecodeError:
        return (repair_json(body, return_objects=True) if body else None), True


def parse_tool_result(tool: ToolSpec, text: str) -> tuple[dict[str, Any] | None, bool, str | None]:
    """(result, repaired, problem): the simulator's JSON object, whether json-repair had to mend it, or why
    it is unusable."""
    result, repaired = read_json(text)
    if not isinstance(result, dict) or (repaired and not result):
        return None, repaired, "the tool simulator did not answer with a JSON object"
    if tool.returns:
        problem = schema_problem(tool.returns, result)
        if problem is not None:
            return None, repaired, f"the tool simulator's result does not fit the returns schema: {problem}"
    return result, repaired, None


def parse_verdict(judge_text: str) -> Verdict | None:
    """The last `VERDICT: PASS|FAIL` line of the judge's answer; None when there is none."""
    found = VERDICT_LINE.findall(judge_text)
    return found[-1].lower() if found else None  # type: ignore[return-value]


def render_transcript(events: list[dict[str, Any]]) -> str:
    """The policy's side of the episode as the judge reads it: its messages, its calls and their results."""
    lines = []
    for number, event in enumerate(events, 1):
        if event["kind"] == "agent_message":
            lines.append(f"[{number}] AGENT MESSAGE: {event['text']}")
        else:
            lines.append(f"[{number}] TOOL CALL {event['name']}({event['arguments']}) -> {event['output']}")
    return "\n".join(lines) if lines else "(the agent did nothing)"


def tool_catalog(tools: list[ToolSpec]) -> str:
    return "\n".join(f"- {tool.name}: {tool.summary}" for tool in tools)
