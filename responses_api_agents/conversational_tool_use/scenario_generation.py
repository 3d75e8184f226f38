"""Scenario generation (NeMo Gym 0.7's `conversational_tool_use/scenario_generation`): for one domain's
policy, `request_count` generator calls (at most `max_concurrency` at once) each ask for
`scenarios_per_request` customer scenarios, a random `outside_policy_scope_fraction` of them for requests
the policy does not cover (the representative should transfer such customers).

Each answer should be `{"scenarios": [...]}` (a bare array is taken too) of scenarios with NeMo Gym's
fields: `customer_persona`, `reason_for_contact`, `customer_details`, `unknown_info` (present, may be null)
and `task_instructions`. Items without them are dropped and counted; a call that fails or answers no
usable JSON is a marked failure in the trace and the others go on. Scenarios are kept in completion order,
without duplicates (the five fields compared case-insensitively). `result.rows` are ready
conversational_tool_use_simulation rows: the policy as the system prompt, the tools as function tools, one
row per scenario.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, Field, ValidationError

from nemo_gym.envkit.gymnasium_server import parse_metadata
from nemo_gym.http.client import HTTPStatusError, RequestFailedError
from nemo_gym.http.errors import GymError
from resources_servers.conversational_tool_use_simulation.simulation import ToolSpec
from responses_api_agents.conversational_tool_use.generation import (
    GenerationAgent,
    GenerationAgentConfig,
    generation_result,
    parsed,
    rollout_rng,
)

SCENARIO_FIELDS = (
    "customer_persona",
    "reason_for_contact",
    "customer_details",
    "unknown_info",
    "task_instructions",
)
SYSTEM_PROMPT = (
    "You write test scenarios for a customer-service representative who works under the policy below. "
    "Each scenario is one customer contacting the representative: who they are, why they get in touch, the "
    "details they can give when asked, what they do not know, and how they should behave. Every scenario "
    "must need a request the policy {coverage}.\n\n<policy>\n{policy}\n</policy>"
)
USER_PROMPT = (
    "Write {count} varied scenarios. Answer with one JSON object and nothing else: "
    '{{"scenarios": [{{"customer_persona": "...", "reason_for_contact": "...", "customer_details": "...", '
    '"unknown_info": "... or null", "task_instructions": "..."}}, ...]}}'
)
COVERAGE = {False: "covers", True: "does not cover (the representative should transfer the customer)"}
POLICY_SYSTEM_PROMPT = (
    "You are a customer-service agent. Follow the policy between <policy> tags. In each turn either write "
    "one message to the customer or call tools.\n<policy>\n{policy}\n</policy>"
)
NEXT_AGENT = {"type": "responses_api_agents", "name": "conversational_tool_use_agent"}


class ScenarioGenerationAgentConfig(GenerationAgentConfig):
    request_count: int = Field(default=20, ge=1, description="generator calls per domain")
    max_concurrency: int = Field(default=20, ge=1, description="generator calls of one rollout at once")
    scenarios_per_request: int = Field(default=80, ge=1, description="scenarios each call asks for")
    outside_policy_scope_fraction: float = Field(
        default=0.1, ge=0.0, le=1.0, description="chance that a call asks for requests outside the policy"
    )
    random_seed: int | None = Field(default=None, description="fixes the outside-scope draws per row")


class ScenarioRequest(BaseModel):
    """The row fields this stage reads (NeMo Gym's); others pass through."""

    id: str | int | None = None
    profile: Literal["general", "proactive"] = "general"
    domain_name: str = Field(min_length=1)
    policy: str = Field(min_length=1)
    tools: list[ToolSpec] = Field(default_factory=list)


class GeneratedScenario(BaseModel):
    customer_persona: str = Field(validation_alias=AliasChoices("customer_persona", "persona"))
    reason_for_contact: str = Field(validation_alias=AliasChoices("reason_for_contact", "reason_for_call"))
    customer_details: str
    unknown_info: str | None
    task_instructions: str

    def key(self) -> tuple[str | None, ...]:
        return tuple(
            None if value is None else value.casefold()
            for value in (getattr(self, f) for f in SCENARIO_FIELDS)
        )


class ScenarioGenerationAgent(GenerationAgent):
    config: ScenarioGenerationAgentConfig

    async def generate(self, row: dict[str, Any], cookies: dict[str, str]) -> dict[str, Any]:
        task = parse_metadata(ScenarioRequest, row)
        rng = rollout_rng(self.config.random_seed, row, "profile", "domain_name")
        outside = [
            rng.random() < self.config.outside_policy_scope_fraction for _ in range(self.config.request_count)
        ]
        slots = asyncio.Semaphore(self.config.max_concurrency)

        async def one(index: int) -> dict[str, Any]:
            async with slots:
                return await self._one_call(task, index, outside[index], dict(cookies))

        calls, scenarios, seen, last_response = [], [], set(), None
        for completion_index, finished in enumerate(
            asyncio.as_completed([one(i) for i in range(len(outside))])
        ):
            call = await finished
            call["completion_index"] = completion_index
            accepted = []
            for scenario in call.pop("scenarios"):
                if (key := GeneratedScenario.model_validate(scenario).key()) not in seen:
                    seen.add(key)
                    accepted.append(scenario)
            call["accepted_scenario_count"] = len(accepted)
            call["duplicate_scenario_count"] = (
                call["parsed_scenario_count"] - call["dropped_scenario_count"] - len(accepted)
            )
            scenarios.extend(accepted)
            calls.append(call)
            if accepted:
                last_response = call["response"]
        trace = {
            **self.config.model_dump(
                include={
                    "request_count",
                    "max_concurrency",
                    "scenarios_per_request",
                    "outside_policy_scope_fraction",
                    "random_seed",
                }
            ),
            "successful_call_count": sum(call["status"] == "success" for call in calls),
            "failed_call_count": sum(call["status"] == "failed" for call in calls),
            "calls": calls,
        }
        result = {
            "domain_name": task.domain_name,
            "scenarios": scenarios,
            "rows": simulation_rows(task, scenarios),
        }
        failure = (
            None if scenarios else "no generator call gave a usable scenario (see generation_trace.calls)"
        )
        return generation_result(row, last_response, result, trace, failure)

    async def _one_call(
        self, task: ScenarioRequest, index: int, outside: bool, cookies: dict[str, str]
    ) -> dict[str, Any]:
        messages = [
            {
                "role": "system",
                "content": SYSTEM_PROMPT.format(coverage=COVERAGE[outside], policy=task.policy),
            },
            {"role": "user", "content": USER_PROMPT.format(count=self.config.scenarios_per_request)},
        ]
        record = {"request_index": index, "outside_policy_scope": outside, "messages": messages}
        try:
            call = await self.call(self.config.model_server, "scenarios", messages, cookies)
        except (GymError, HTTPStatusError, RequestFailedError) as error:  # this call failed; the others go on
            return {**record, "status": "failed", "error": f"the generator call failed: {error}", "scenarios": [],
                    "parsed_scenario_count": 0, "dropped_scenario_count": 0, "response": None}  # fmt: skip
        call = parsed(call, (dict, list), 'a JSON object {"scenarios": [...]}')
        items = (
            call.parsed_value.get("scenarios") if isinstance(call.parsed_value, dict) else call.parsed_value
        )
        if call.parse_error is None and not isinstance(items, list):
            call.parse_error = 'the answer has no "scenarios" array'
        usable = [
            {
                **scenario.model_dump(),
                "representative_domain": task.domain_name,
                "outside_policy_scope": outside,
            }
            for scenario in _scenarios(items if isinstance(items, list) else [])
        ]
        return {
            **record,
            "status": "failed" if call.parse_error else "success",
            "error": call.parse_error,
            "repaired": call.repaired,
            "scenarios": usable,
            "parsed_scenario_count": len(items) if isinstance(items, list) else 0,
            "dropped_scenario_count": (len(items) if isinstance(items, list) else 0) - len(usable),
            "response": call.response,
            "text": call.text,
        }


def _scenarios(items: list[Any]) -> list[GeneratedScenario]:
    """The items that are whole scenarios (NeMo Gym drops one that leaves out `unknown_info`, too)."""
    usable = []
    for item in items:
        if isinstance(item, dict) and ("unknown_info" in item):
            try:
                usable.append(GeneratedScenario.model_validate(item))
            except ValidationError:
                continue
    return usable


def simulation_rows(task: ScenarioRequest, scenarios: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """conversational_tool_use_simulation rows: the policy as the system prompt, the tools for the policy."""
    function_tools = [
        {
            "type": "function",
            "name": tool.name,
            "description": tool.summary,
            "parameters": tool.parameter_schema,
            "strict": False,
        }
        for tool in task.tools
    ]
    system = {"role": "system", "content": POLICY_SYSTEM_PROMPT.format(policy=task.policy), "type": "message"}
    return [
        {
            "id": f"{task.id or task.domain_name}-{index}",
            "domain_name": task.domain_name,
            "policy": task.policy,
            "tools": [tool.model_dump(exclude_none=True) for tool in task.tools],
            "customer_scenario": {key: scenario[key] for key in (*SCENARIO_FIELDS, "outside_policy_scope")},
            "responses_create_params": {"input": [system], "tools": function_tools},
            "agent_ref": NEXT_AGENT,
        }
        for index, scenario in enumerate(scenarios)
    ]


if __name__ == "__main__":
    ScenarioGenerationAgent.run_webserver()
