"""NeMo Gym 0.7's session and identity shapes, importable at NeMo Gym's paths, checked as 0.7 checks them;
the rollout path prefixes."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nemo_gym.base_resources_server import (
    NEMO_GYM_MCP_METADATA_KEY,
    BaseResourcesServerConfig,
    ResourcesCloseSessionRequest,
    ResourcesSeedSessionRequest,
    ResourcesSeedSessionResponse,
    ReverifyMode,
)
from nemo_gym.base_responses_api_agent import AgentCloseSessionResponse, AgentSeedSessionRequest
from nemo_gym.episode_types import EpisodeId, TaskId
from nemo_gym.server_utils import apply_rollout_prefix, rollout_path_prefix

EPISODE = {"rollout_id": "0-1", "attempt": 0}
TASK = {"taskset": "math:train", "task_id": "17"}


def test_episode_ids_follow_the_rollout_id_rules() -> None:
    assert EpisodeId(rollout_id="0-1").capture_key == "0-1"
    assert EpisodeId(rollout_id="0-1", attempt=2).capture_key == "0-1-a2"
    assert EpisodeId(rollout_id="run-a0").rollout_id == "run-a0"  # attempt 0 is never a suffix
    for bad in ("", "-x", "a b", "task-a3"):
        with pytest.raises(ValidationError):
            EpisodeId(rollout_id=bad)
    with pytest.raises(ValidationError):
        EpisodeId(rollout_id="x", attempt=-1)
    assert {EpisodeId(rollout_id="x"): 1}[EpisodeId(rollout_id="x")] == 1  # frozen, so hashable


def test_task_ids_and_session_bodies_refuse_empty_and_unknown_fields() -> None:
    with pytest.raises(ValidationError):
        TaskId(taskset="", task_id="1")
    seed = {
        "resources_session_id": "resources-session-1",
        "episode_id": EPISODE,
        "task_id": TASK,
        "task_data": {"x": [1]},
    }
    assert ResourcesSeedSessionRequest.model_validate(seed).task_id.taskset == "math:train"
    with pytest.raises(ValidationError, match="extra"):
        ResourcesSeedSessionRequest.model_validate({**seed, "typo": 1})
    answer = ResourcesSeedSessionResponse(resources_session_id="resources-session-1")
    assert answer.model_dump() == {
        "resources_session_id": "resources-session-1",
        "resources_tools": None,
        "sandbox_access": None,
    }
    close = ResourcesCloseSessionRequest.model_validate({"resources_session_id": "r", "episode_id": EPISODE})
    assert close.episode_id == EpisodeId(rollout_id="0-1")


def test_agent_sessions_take_tool_grants_by_kind_with_unique_names() -> None:
    grants = [
        {"kind": "direct_http", "name": "tools", "required": True, "base_url": "http://127.0.0.1:9000"},
        {
            "kind": "mcp",
            "name": "mcp_tools",
            "required": False,
            "connection": {"url": "http://127.0.0.1:9000/mcp"},
        },
    ]
    seed = AgentSeedSessionRequest.model_validate(
        {"agent_session_id": "agent-1", "episode_id": EPISODE, "task_id": TASK, "tool_accesses": grants}
    )
    assert [type(grant).__name__ for grant in seed.tool_accesses] == ["DirectHTTPToolAccess", "MCPToolAccess"]
    with pytest.raises(ValidationError, match="unique"):
        AgentSeedSessionRequest.model_validate(
            {
                "agent_session_id": "agent-1",
                "episode_id": EPISODE,
                "task_id": TASK,
                "tool_accesses": [grants[0]] * 2,
            }
        )
    closed = AgentCloseSessionResponse(agent_session_id="agent-1")
    assert (closed.agent_observations, closed.resources_cookies) == (None, None)


def test_reverify_mode_and_mcp_names_have_nemo_gyms_values() -> None:
    assert [mode.value for mode in ReverifyMode] == ["stateless", "unsupported", "unknown"]
    assert BaseResourcesServerConfig.REVERIFY_MODE is ReverifyMode.UNKNOWN
    assert NEMO_GYM_MCP_METADATA_KEY == "mcp"


def test_rollout_prefixes() -> None:
    assert rollout_path_prefix(None) == ""
    assert rollout_path_prefix("7-0") == "/ng-rollout/7-0"
    assert rollout_path_prefix("7-0", token_capture=True) == "/ng-rollout/7-0/training-token-capture"
    assert apply_rollout_prefix("http://127.0.0.1:9000/", "7-0") == "http://127.0.0.1:9000/ng-rollout/7-0"
