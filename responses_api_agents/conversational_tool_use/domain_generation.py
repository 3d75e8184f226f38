"""Domain generation (NeMo Gym 0.7's `conversational_tool_use/domain_generation`): brainstorm customer-service
domains, then ask again, `followup_count` times, for domains not yet proposed.

The row's prompt is the instruction (one user message: the row owns it, as in NeMo Gym). Each answer
should be a JSON array of candidates (objects with a `name`, and whatever else the prompt asks for, such as
`applications`); candidates are kept as given. A follow-up repeats the instruction with the names proposed
so far and asks for others. An answer that is not an array (even after json-repair) is a marked failure of
that phase; the others still run. `result.candidates` holds them all, `result.rows` one policy/tool
generation row per candidate (first of each name, case-insensitively).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from nemo_gym.http.errors import GymError
from responses_api_agents.conversational_tool_use.generation import (
    GenerationAgent,
    GenerationAgentConfig,
    generation_result,
    parsed,
)
from responses_api_agents.gymnasium_agent.user_simulator import message_text

PROTOCOL_VERSION = "domain-generation/v1"  # one follow-up (NeMo Gym's default)
VARIABLE_FOLLOWUP_PROTOCOL_VERSION = "domain-generation/v2"
FOLLOWUP_REQUEST = (
    "These domains were proposed already: {names}.\n"
    "Propose different ones: other industries, or narrower sub-domains of these. Answer in the same JSON format."
)
NEXT_AGENT = {"type": "responses_api_agents", "name": "conversational_tool_use_policy_tool_generation"}


class DomainGenerationAgentConfig(GenerationAgentConfig):
    followup_count: int = Field(
        default=1, ge=0, description="calls after the first, each asking for new domains"
    )
    profile: str = Field(
        default="general", pattern="^(general|proactive)$", description="the policy profile of `result.rows`"
    )


class DomainGenerationAgent(GenerationAgent):
    config: DomainGenerationAgentConfig

    async def generate(self, row: dict[str, Any], cookies: dict[str, str]) -> dict[str, Any]:
        instruction = _instruction(row)
        candidates: list[Any] = []
        phases = []
        prompt = instruction
        for index in range(self.config.followup_count + 1):
            phase = "initial" if index == 0 else "followup"
            call = parsed(
                await self.call(
                    self.config.model_server, phase, [{"role": "user", "content": prompt}], cookies
                ),
                list,
                "a JSON array of domains",
            )
            phases.append(call.model_dump(mode="json"))
            candidates.extend(call.parsed_value or [])
            names = [item["name"] for item in candidates if isinstance(item, dict) and "name" in item]
            prompt = f"{instruction}\n\n{FOLLOWUP_REQUEST.format(names=names)}"
        trace = {
            "protocol_version": PROTOCOL_VERSION
            if self.config.followup_count == 1
            else VARIABLE_FOLLOWUP_PROTOCOL_VERSION,
            "request_index": row.get("_ng_task_index"),
            "followup_count": self.config.followup_count,
            "phases": phases,
        }
        result = {"candidates": candidates, "rows": self._next_rows(candidates)}
        failure = None if candidates else "no phase answered a JSON array of domains (see generation_trace)"
        return generation_result(row, phases[-1]["response"], result, trace, failure)

    def _next_rows(self, candidates: list[Any]) -> list[dict[str, Any]]:
        """A policy/tool generation row per named candidate, the first of each name (case-insensitive)."""
        rows, seen = [], set()
        for candidate in candidates:
            if not isinstance(candidate, dict) or not isinstance(candidate.get("name"), str):
                continue
            if (key := candidate["name"].casefold()) in seen:
                continue
            seen.add(key)
            rows.append(
                {
                    "responses_create_params": {"input": []},
                    "profile": self.config.profile,
                    "domain": candidate,
                    "agent_ref": NEXT_AGENT,
                }
            )
        return rows


def _instruction(row: dict[str, Any]) -> str:
    """The row's one user message (422 otherwise: the prompt is the row's to give)."""
    prompt = row["responses_create_params"].get("input")
    if isinstance(prompt, str) and prompt.strip():
        return prompt
    if isinstance(prompt, list) and len(prompt) == 1 and prompt[0].get("role") == "user":
        if text := message_text(prompt[0]):
            return text
    raise GymError(
        422,
        "invalid_row",
        "responses_create_params.input: domain generation needs exactly one user message with the instruction",
    )


if __name__ == "__main__":
    DomainGenerationAgent.run_webserver()
