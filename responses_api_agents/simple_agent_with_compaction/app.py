"""SimpleAgentWithCompaction: simple_agent's tool-calling loop, with the context compacted before each
model call by a configured history policy.

Compatible with NeMo Gym 0.7's simple_agent_with_compaction (same folder, config keys under
`context_history`, policies `identity` and `recency`, schedules `rolling_recency` and
`turn_chunked_recency`, guards, and `required_prefix_token_ids` toward its model server
vllm_model_with_compaction). The loop is simple_agent's own (`SimpleAgent._loop`); this agent only gives
it a different `ConversationView` (session.py), which decides what each call is shown. The rollout's
output keeps every item of every call; `boundary_events`, `guard_records` and `model_call_metadata` on the
response say where the context was rewritten and what each call was shown.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from responses_api_agents.simple_agent.app import (
    ConversationView,
    SimpleAgent,
    SimpleAgentConfig,
    SimpleAgentRunRequest,
)
from responses_api_agents.simple_agent_with_compaction.config import ContextHistoryConfig
from responses_api_agents.simple_agent_with_compaction.session import CompactingView

SimpleAgentWithCompactionRunRequest = SimpleAgentRunRequest


class SimpleAgentWithCompactionConfig(SimpleAgentConfig):
    context_history: ContextHistoryConfig = Field(
        default_factory=ContextHistoryConfig,
        description="the compaction policy, its schedule and the context guards; off unless enabled",
    )


class SimpleAgentWithCompaction(SimpleAgent):
    config: SimpleAgentWithCompactionConfig

    def conversation_view(self, params: dict[str, Any]) -> ConversationView:
        """simple_agent's whole-conversation view while `context_history.enabled` is false."""
        if not self.config.context_history.enabled:
            return ConversationView()
        return CompactingView(self, self.config.context_history)


if __name__ == "__main__":
    SimpleAgentWithCompaction.run_webserver()
