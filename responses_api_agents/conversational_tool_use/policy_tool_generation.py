"""Policy and tool generation (NeMo Gym 0.7's `conversational_tool_use/policy_tool_generation`): for one
domain, write the policy a customer-service representative follows and the tools it may call, and keep
the pair only if it passes the checks; otherwise try again, up to `max_retries` more times.

One attempt: the policy (Markdown between `<policy>` tags) from the domain, its applications, the profile
(`general` or `proactive`) and a sampled 2025 date; the tools (one JSON object per line between `<tools>`
tags: `name`, `doc`, `params` and `returns` JSON Schemas) for that policy; with `use_refinement`, the
policy revised against the tools, then the tools against the revised policy. The tools must each have a
name and a description, valid schemas, and be at least `minimum_tool_count` (and one); then
`cohesion_judge_count` judge calls (at most `max_judge_concurrency` at once) each say whether policy and
tools fit together (`<judgment>true</judgment>`), and a failure fraction above
`cohesion_max_failure_fraction` rejects the attempt. A tool line that is near-JSON is mended with
json-repair; an answer missing its tags rejects the attempt at that stage, with the reason in the trace.

`result` holds the accepted policy, tools and `tools_jsonl`, and `rows`: the scenario-generation row for
them. When no attempt is accepted the reward is 0.0 and `generation_failure` names the last stage that
failed (NeMo Gym raises an error instead).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import re
from typing import Any, Literal
from zoneinfo import ZoneInfo

import jsonschema.validators
from pydantic import BaseModel, ConfigDict, Field, model_validator

from nemo_gym.config_types import ModelServerRef
from nemo_gym.envkit.gymnasium_server import parse_metadata
from resources_servers.conversational_tool_use_simulation.simulation import read_json
from responses_api_agents.conversational_tool_use.generation import (
    GenerationAgent,
    GenerationAgentConfig,
    GenerationCall,
    generation_result,
    rollout_rng,
)

PROFILE_GUIDANCE = {
    "general": "The representative handles what customers ask for, within the rules.",
    "proactive": "The representative also anticipates needs: it checks related records and offers help the "
    "customer did not ask for yet, within the rules.",
}
POLICY_PROMPT = (
    "Write the policy that customer-service representatives of a business in the domain '{domain}' follow "
    "when they help customers over chat. The business supports these applications: {applications}. The "
    "current date is {timestamp}. {guidance} State the rules precisely: what must be verified before an "
    "action, limits and eligibility, and when to transfer the customer to a human. Answer in Markdown "
    "between <policy> and </policy>."
)
TOOLS_PROMPT = (
    "Here is the policy of a customer-service representative:\n<policy>\n{policy}\n</policy>\n\n"
    "Write the tools the representative needs to apply it (look-ups and actions on the business's "
    "records). Answer between <tools> and </tools>, one JSON object per line with the keys name, doc, "
    "params (a JSON Schema of the arguments) and returns (a JSON Schema of the result)."
)
POLICY_REFINE_PROMPT = (
    "Revise this policy so that every rule can be applied with the tools below and nothing refers to a "
    "tool that does not exist.\n<policy>\n{policy}\n</policy>\n<tools>\n{tools}\n</tools>\n"
    "Answer with the whole revised policy between <policy> and </policy>."
)
TOOLS_REFINE_PROMPT = (
    "Revise these tools so that they cover everything the policy needs, with precise schemas.\n"
    "<policy>\n{policy}\n</policy>\n<tools>\n{tools}\n</tools>\n"
    "Answer with the whole revised tool list between <tools> and </tools>, one JSON object per line."
)
COHESION_PROMPT = (
    "Do this policy and these tools form one coherent customer-service setting, where every rule can be "
    "followed with the tools and every tool serves the policy?\n<policy>\n{policy}\n</policy>\n"
    "<tools>\n{tools}\n</tools>\nExplain briefly, then answer <judgment>true</judgment> or "
    "<judgment>false</judgment>."
)
# A sampled current date's time zone, weighted roughly by US population (NeMo Gym samples US zones too).
TIME_ZONES = {"America/New_York": 47, "America/Chicago": 33, "America/Denver": 6, "America/Los_Angeles": 13,
              "America/Phoenix": 1}  # fmt: skip
NEXT_AGENT = {"type": "responses_api_agents", "name": "conversational_tool_use_scenario_generation"}
REFERENCE_KEYS = ("initial_reference_count", "policy_refine_reference_count", "golden_reference_count")


class PolicyToolGenerationAgentConfig(GenerationAgentConfig):
    policy_model_server: ModelServerRef = Field(description="writes and revises the policy and the tools")
    model_server: ModelServerRef | None = Field(default=None, description="set from policy_model_server")
    judge_model_server: ModelServerRef | None = Field(
        default=None, description="judges; default the writer's"
    )
    max_retries: int = Field(default=20, ge=0, description="attempts after the first")
    use_refinement: bool = True
    minimum_tool_count: int = Field(default=0, ge=0)
    cohesion_judge_count: int = Field(default=3, ge=0, description="judge calls per attempt; 0: no check")
    cohesion_max_failure_fraction: float = Field(default=0.5, ge=0.0, le=1.0)
    max_judge_concurrency: int | None = Field(default=None, ge=1)
    random_seed: int | None = None
    initial_reference_count: int = Field(default=0, ge=0)
    policy_refine_reference_count: int = Field(default=0, ge=0)
    golden_reference_count: int = Field(default=0, ge=0)
    golden_max_failure_fraction: float = Field(default=0.5, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _writer_is_the_policy_model(self) -> PolicyToolGenerationAgentConfig:
        """`/v1/responses` and every writing call go to `policy_model_server` (NeMo Gym's key)."""
        self.model_server = self.policy_model_server
        return self

    @model_validator(mode="after")
    def _no_references(self) -> PolicyToolGenerationAgentConfig:
        """NeMo Gym's reference policies come from a download this project does not ship."""
        if used := [key for key in REFERENCE_KEYS if getattr(self, key)]:
            raise ValueError(
                f"{', '.join(used)}: the golden policy/tool references are a NeMo Gym download not shipped "
                "here; set them to 0"
            )
        return self


class PolicyToolDomain(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1)
    applications: list[Any] = Field(default_factory=list)


class PolicyToolRequest(BaseModel):
    profile: Literal["general", "proactive"]
    domain: PolicyToolDomain


class Rejected(Exception):
    def __init__(self, stage: str, detail: str) -> None:
        super().__init__(detail)
        self.stage, self.detail = stage, detail


class PolicyToolGenerationAgent(GenerationAgent):
    config: PolicyToolGenerationAgentConfig

    async def generate(self, row: dict[str, Any], cookies: dict[str, str]) -> dict[str, Any]:
        task = parse_metadata(PolicyToolRequest, row)
        rng = rollout_rng(self.config.random_seed, row, "profile", "domain")
        attempts: list[dict[str, Any]] = []
        accepted = None
        for number in range(1, self.config.max_retries + 2):
            record: dict[str, Any] = {"attempt": number, "timestamp": _timestamp(rng), "calls": []}
            attempts.append(record)
            try:
                accepted = await self._attempt(task, record, cookies)
            except Rejected as rejection:
                record.update(accepted=False, failure_stage=rejection.stage, failure_detail=rejection.detail)
                continue
            record["accepted"] = True
            break
        for record in attempts:  # each call as it ended up: read, and marked where it could not be
            record["calls"] = [call.model_dump(mode="json") for call in record["calls"]]
        trace = {
            "profile": task.profile,
            "domain_name": task.domain.name,
            "max_attempts": self.config.max_retries + 1,
            **self.config.model_dump(
                include={
                    "use_refinement",
                    "minimum_tool_count",
                    "cohesion_judge_count",
                    "cohesion_max_failure_fraction",
                    "max_judge_concurrency",
                    "random_seed",
                }
            ),  # fmt: skip
            "attempts": attempts,
        }
        if accepted is None:
            last = attempts[-1]
            failure = (
                f"no attempt of {len(attempts)} was accepted; the last failed at {last['failure_stage']}: "
                f"{last['failure_detail']}"
            )
            response = last["calls"][-1]["response"] if last["calls"] else None
            result = {"accepted": False, "profile": task.profile, "domain": task.domain.model_dump()}
            return generation_result(row, response, result, trace, failure)
        policy, tools, response = accepted
        result = {
            "accepted": True,
            "profile": task.profile,
            "domain": task.domain.model_dump(),
            "attempt_count": len(attempts),
            "policy_md": policy,
            "tools": tools,
            "tools_jsonl": "".join(json.dumps(tool) + "\n" for tool in tools),
            "rows": [
                {
                    "responses_create_params": {"input": []},
                    "profile": task.profile,
                    "domain_name": domain_slug(task.domain.name),
                    "policy": policy,
                    "tools": tools,
                    "agent_ref": NEXT_AGENT,
                }
            ],
        }
        return generation_result(row, response, result, trace, None)

    async def _attempt(
        self, task: PolicyToolRequest, record: dict[str, Any], cookies: dict[str, str]
    ) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
        """(policy, tools, the last tools answer) of an accepted attempt; `Rejected` says where one failed."""
        writer = self.config.policy_model_server

        async def write(phase: str, prompt: str) -> GenerationCall:
            call = await self.call(writer, phase, [{"role": "user", "content": prompt}], cookies)
            record["calls"].append(call)
            return call

        applications = json.dumps(task.domain.applications, ensure_ascii=False)
        policy = _policy(await write("policy_v1", POLICY_PROMPT.format(
            domain=task.domain.name, applications=applications, timestamp=record["timestamp"],
            guidance=PROFILE_GUIDANCE[task.profile])), "policy_v1")  # fmt: skip
        tools_call = await write("tools_v1", TOOLS_PROMPT.format(policy=policy))
        tools = _tools(tools_call, "tools_v1")
        if self.config.use_refinement:
            policy = _policy(await write("policy_refine", POLICY_REFINE_PROMPT.format(
                policy=policy, tools=_jsonl(tools))), "policy_refine")  # fmt: skip
            tools_call = await write(
                "tools_refine", TOOLS_REFINE_PROMPT.format(policy=policy, tools=_jsonl(tools))
            )
            tools = _tools(tools_call, "tools_refine")
        record["tool_validation_passed"] = False
        if problem := tools_problem(tools, self.config.minimum_tool_count):
            raise Rejected("tool_validation", problem)
        record["tool_validation_passed"] = True
        if self.config.cohesion_judge_count:
            fraction = await self._cohesion_failures(policy, tools, record, cookies)
            record["cohesion_failure_fraction"] = fraction
            if fraction > self.config.cohesion_max_failure_fraction:
                raise Rejected(
                    "cohesion_judge",
                    f"{fraction:.2f} of the judgments failed (at most {self.config.cohesion_max_failure_fraction})",
                )
        return policy, tools, tools_call.response

    async def _cohesion_failures(
        self, policy: str, tools: list[dict[str, Any]], record: dict[str, Any], cookies: dict[str, str]
    ) -> float:
        judge = self.config.judge_model_server or self.config.policy_model_server
        prompt = [{"role": "user", "content": COHESION_PROMPT.format(policy=policy, tools=_jsonl(tools))}]
        slots = asyncio.Semaphore(self.config.max_judge_concurrency or self.config.cohesion_judge_count)

        async def judged() -> GenerationCall:
            async with slots:
                call = await self.call(judge, "cohesion_judge", prompt, dict(cookies))
            value, repaired = read_json(_tagged(call.text, "judgment") or "")
            call.parsed_value, call.repaired = value is True, repaired
            if value not in (True, False):
                call.parse_error = (
                    "no <judgment>true</judgment> or <judgment>false</judgment> (counted as a failure)"
                )
            return call

        calls = await asyncio.gather(*(judged() for _ in range(self.config.cohesion_judge_count)))
        record["calls"].extend(calls)
        return sum(not call.parsed_value for call in calls) / len(calls)


def domain_slug(name: str) -> str:
    """The domain's name as NeMo Gym writes it into later rows (no parentheses or '&', '/' as '-', '_' for
    spaces)."""
    return name.replace("(", "").replace(")", "").replace("/", "-").replace(" ", "_").replace("&", "")


def tools_problem(tools: list[dict[str, Any]], minimum: int) -> str | None:
    """Why the tools are unusable, or None: each needs a name, a description and valid JSON Schemas."""
    if len(tools) < max(minimum, 1):
        return f"{len(tools)} tool(s), at least {max(minimum, 1)} needed"
    for index, tool in enumerate(tools):
        if not isinstance(tool.get("name"), str) or not tool["name"]:
            return f"tool {index}: no name"
        if not isinstance(tool.get("doc") or tool.get("description"), str):
            return f"tool {tool['name']}: no doc (description)"
        for key in ("params", "parameters", "returns"):
            if key in tool:
                schema = tool[key]
                try:
                    jsonschema.validators.validator_for(schema).check_schema(schema)
                except (jsonschema.SchemaError, TypeError, AttributeError) as error:
                    return f"tool {tool['name']}: {key} is not a valid JSON Schema ({str(error).splitlines()[0][:200]})"
    return None


def _tagged(text: str, tag: str) -> str | None:
    """The text of the last `<tag>...</tag>` in `text`, stripped."""
    found = re.findall(rf"<{tag}>(.*?)</{tag}>", text, re.DOTALL)
    return found[-1].strip() if found else None


def _policy(call: GenerationCall, stage: str) -> str:
    policy = _tagged(call.text, "policy")
    if not policy:
        call.parse_error = "no <policy>...</policy> in the answer"
        raise Rejected(stage, call.parse_error)
    call.parsed_value = policy
    return policy


def _tools(call: GenerationCall, stage: str) -> list[dict[str, Any]]:
    """The tools between `<tools>` tags, one JSON object a line (json-repair mends near-JSON lines)."""
    body = _tagged(call.text, "tools")
    if body is None:
        call.parse_error = "no <tools>...</tools> in the answer"
        raise Rejected(stage, call.parse_error)
    tools = []
    for line in filter(str.strip, body.splitlines()):
        value, repaired = read_json(line)
        call.repaired = call.repaired or repaired
        if not isinstance(value, dict) or not value:
            call.parse_error = f"a tool line is not a JSON object: {line[:120]!r}"
            raise Rejected(stage, call.parse_error)
        tools.append(value)
    call.parsed_value = tools
    return tools


def _jsonl(tools: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(tool) for tool in tools)


def _timestamp(rng: Any) -> str:
    """A random moment of 2025 in a US time zone: the policy's 'today'."""
    start = datetime.datetime(2025, 1, 1)
    moment = start + datetime.timedelta(seconds=rng.randrange(365 * 24 * 3600))
    zone = rng.choices(list(TIME_ZONES), weights=list(TIME_ZONES.values()))[0]
    return moment.replace(tzinfo=ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M:%S %Z")


if __name__ == "__main__":
    PolicyToolGenerationAgent.run_webserver()
