"""NeMo Gym 0.7's entrypoint name for its DeepAgents graph with the Tavily web-search tool, kept so its
configs start here: the same graph and keys, without web search. Tavily is a service on the internet, which
this build does not call, so a config that sets `tavily_api_key` is refused at start; without it this is
`app.py`'s agent (the task's resources server tools, DeepAgents' own tools)."""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator

from responses_api_agents.langchain_deepagents_agent.app import DeepAgentsAgent, DeepAgentsAgentConfig


class ReasoningSearchDeepAgentConfig(DeepAgentsAgentConfig):
    tavily_api_key: SecretStr | None = Field(default=None, description="refused when set: no web search here")
    max_search_results: int = Field(
        default=5, ge=1, description="NeMo Gym's Tavily result count; unused here"
    )

    @field_validator("tavily_api_key")
    @classmethod
    def _no_web_search(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and value.get_secret_value():
            raise ValueError(
                "the Tavily web-search tool needs the internet, which this agent does not call; remove "
                "tavily_api_key (the agent then offers the resources server's tools)"
            )
        return value


class ReasoningSearchDeepAgent(DeepAgentsAgent):
    config: ReasoningSearchDeepAgentConfig


if __name__ == "__main__":
    ReasoningSearchDeepAgent.run_webserver()
