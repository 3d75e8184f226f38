"""The names NeMo Gym 0.7 changed, old -> new: a config or dataset written with an old one keeps working."""

from __future__ import annotations

# 0.7's renamed reasoning-gym environments: old name -> new name (their agents end in `_agent`).
LEGACY_ENVIRONMENT_NAMES = {
    "reasoning_gym_claude_code": "claude_code_reasoning_gym",
    "reasoning_gym_hermes": "hermes_reasoning_gym",
    "reasoning_gym_orchestrator": "langgraph_orchestrator_reasoning_gym",
    "reasoning_gym_parallel_thinking": "langgraph_parallel_thinking_reasoning_gym",
    "reasoning_gym_reflection": "langgraph_reflection_reasoning_gym",
    "reasoning_gym_rewoo": "langgraph_rewoo_reasoning_gym",
}
LEGACY_AGENT_NAMES = {f"{old}_agent": f"{new}_agent" for old, new in LEGACY_ENVIRONMENT_NAMES.items()}
# Config files 0.7 moved: the path a config lists -> the file to load instead.
LEGACY_CONFIG_PATHS = {
    **{
        f"environments/{old}/config.yaml": f"environments/{new}/config.yaml"
        for old, new in LEGACY_ENVIRONMENT_NAMES.items()
    },
    "responses_api_agents/stirrup_agent/configs/stirrup_gdpval.yaml": (
        "responses_api_agents/stirrup_agent/configs/stirrup_agent.yaml"
    ),
    "responses_api_agents/tau2/configs/tau2_agent.yaml": "responses_api_agents/tau2/configs/tau2.yaml",
    "responses_api_agents/verifiers_agent/configs/acereason-math.yaml": (
        "responses_api_agents/verifiers_agent/configs/verifiers_agent.yaml"
    ),
}
