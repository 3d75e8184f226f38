"""Which environment server runs a row (nemo_gym.collection.environments), on a deployment's merged config:
the agent's own environment server, a generated relay for an agent none fronts, one named server, or a
taskset's route; what a typed server is sent and how its answer is read back flat."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from omegaconf import DictConfig, OmegaConf

from nemo_gym.collection.environments import (
    AmbiguousEnvironmentServerError,
    EnvironmentRouter,
    EpisodeFailedError,
)
from nemo_gym.config_types import ConfigError


def agent_block() -> dict:
    return {
        "responses_api_agents": {
            "simple_agent": {
                "entrypoint": "app.py",
                "resources_server": {"type": "resources_servers", "name": "counter"},
                "model_server": {"type": "responses_api_models", "name": "policy_model"},
            }
        }
    }


def environment_block(agent: str, implementation: str = "single_agent_turn") -> dict:
    return {
        "environment_servers": {
            implementation: {
                "entrypoint": "app.py",
                "resources_server": {"type": "resources_servers", "name": "counter"},
                "agent_server": {"type": "responses_api_agents", "name": agent},
            }
        }
    }


def deployment(**extra: dict) -> DictConfig:
    """Three agents: one behind a typed environment server, one behind a flat one, one behind none."""
    return OmegaConf.create(
        {
            "counter": {
                "resources_servers": {
                    "example_session_state_mgmt": {"entrypoint": "app.py", "domain": "other"}
                }
            },
            "policy_model": {"responses_api_models": {"openai_model": {"entrypoint": "app.py"}}},
            "typed_agent": agent_block(),
            "typed_env": environment_block("typed_agent"),
            "flat_agent": agent_block(),
            "flat_env": environment_block("flat_agent", "single_agent_turn_legacy"),
            "bare_agent": agent_block(),
            **extra,
        }
    )


def row(agent: str, **extra) -> dict:
    return {
        "agent_ref": {"name": agent},
        "question": "2+2?",
        "_ng_task_index": 7,
        "_ng_rollout_index": 1,
        **extra,
    }


def test_a_row_runs_on_its_agents_environment_server_or_its_generated_relay():
    router = EnvironmentRouter(deployment())
    typed, flat, bare = (router.target(row(agent)) for agent in ("typed_agent", "flat_agent", "bare_agent"))
    assert (typed.server, typed.typed, typed.resources_server) == ("typed_env", True, "counter")
    assert (flat.server, flat.typed) == ("flat_env", False)
    # No environment server fronts bare_agent: it is called directly, filed under its relay's name.
    assert (bare.server, bare.result_type) == ("bare_agent", "legacy_agent")
    assert bare.environment_server == router.generated["bare_agent"] != "bare_agent"
    with pytest.raises(ValueError, match="agent_ref 'ghost' names no agent of this deployment"):
        router.target(row("ghost"))


def test_an_agent_behind_two_servers_needs_the_row_to_name_one():
    router = EnvironmentRouter(deployment(second_env=environment_block("typed_agent")))
    with pytest.raises(AmbiguousEnvironmentServerError, match="fronted by several environment servers"):
        router.target(row("typed_agent"))
    assert router.target(row("typed_agent", _ng_environment_server="second_env")).server == "second_env"


def test_legacy_and_taskset_modes_route_as_configured():
    legacy = EnvironmentRouter.for_deployment(
        deployment(), SimpleNamespace(environment_routing_mode="legacy", environment_server_name="flat_env")
    )
    assert legacy.target(row("typed_agent")).server == "flat_env"
    taskset = EnvironmentRouter(deployment(), mode="taskset", routes={"math": "typed_env"})
    task = {"task_id": {"taskset": "math", "task_id": "t1"}, "task_input": {"question": "2+2?"}}
    assert taskset.target(task).server == "typed_env"
    with pytest.raises(ValueError, match="taskset 'poems' has no route"):
        taskset.target({**task, "task_id": {"taskset": "poems", "task_id": "p"}})
    with pytest.raises(ValueError, match="takes only materialized rows"):
        taskset.target(row("typed_agent"))


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"mode": "legacy"}, "environment_routing_mode=legacy needs environment_server_name"),
        ({"mode": "taskset"}, "environment_routing_mode=taskset needs environment_server_routes"),
        ({"mode": "legacy", "server_name": "nowhere"}, r"environment server\(s\) \['nowhere'\] are not in the deployment"),
        ({"routes": {"math": "typed_env", "poems": "gone"}}, r"\['gone'\] are not in the deployment"),
    ],
)  # fmt: skip
def test_routing_settings_naming_nothing_are_refused(settings: dict, message: str):
    with pytest.raises(ConfigError, match=message):
        EnvironmentRouter(deployment(), **settings)


def test_a_malformed_rollout_id_is_refused_before_routing():
    router = EnvironmentRouter(deployment())
    assert router.target(row("flat_agent", _ng_rollout_id="run-1.a_b")).server == "flat_env"
    with pytest.raises(ValueError, match="_ng_rollout_id 'a/b' must match"):
        router.target(row("flat_agent", _ng_rollout_id="a/b"))


def test_a_typed_server_gets_an_episode_request_and_a_flat_one_the_row():
    router = EnvironmentRouter(deployment())
    typed = router.target(row("typed_agent"))
    body = router.request_body(row("typed_agent", task_source="arith"), typed)
    assert body["episode_id"] == {"rollout_id": "7-1", "attempt": 0}
    assert body["task"]["task_id"] == {"taskset": "arith", "task_id": "7"}
    assert (
        body["task"]["task_input"]["question"] == "2+2?"
        and "_ng_task_index" not in body["task"]["task_input"]
    )
    untagged = router.request_body(row("typed_agent"), typed)
    assert untagged["task"]["task_id"]["taskset"] == "counter", (
        "the resources server names an untagged taskset"
    )
    flat = router.target(row("flat_agent"))
    assert router.request_body(row("flat_agent"), flat) == row("flat_agent")


def test_a_typed_answer_comes_back_flat_and_stamped_with_its_server():
    router = EnvironmentRouter(deployment())
    typed = router.target(row("typed_agent"))
    answer = {"task_id": {"taskset": "arith", "task_id": "7"}, "result": {"reward": 1.0, "response": {}}}
    assert router.result_of(typed, answer) == {
        "reward": 1.0, "response": {}, "_ng_task_id": "7",
        "_ng_environment_server": "typed_env", "_ng_result_type": "single_agent_turn",
    }  # fmt: skip
    assert "_ng_environment_server" not in router.result_of(
        typed, answer | {"result": {"reward": 0}}, stamp=False
    )
    with pytest.raises(ValueError, match=r"reserved for the collector: \['_ng_task_index'\]"):
        router.result_of(typed, {"result": {"reward": 1.0, "_ng_task_index": 3}})
    with pytest.raises(ValueError, match="neither a result nor a failure"):
        router.result_of(typed, {"task_id": "7"})
    with pytest.raises(ValueError, match="answered list, not a JSON object"):
        router.result_of(typed, [])


def test_a_failed_episode_is_raised_with_whether_a_retry_can_help():
    router = EnvironmentRouter(deployment())
    typed, flat = router.target(row("typed_agent")), router.target(row("flat_agent"))
    failure = {
        "failure_reason": "sandbox died",
        "terminal": False,
        "stage": "run",
        "partial_response": {"id": "r"},
    }
    with pytest.raises(EpisodeFailedError) as raised:
        router.result_of(typed, {"failure": failure})
    assert (raised.value.message, raised.value.terminal, raised.value.status) == ("sandbox died", False, 503)
    assert raised.value.sidecar_fields() == {
        "_ng_failure_class": "environment_server_failed", "_ng_failure_terminal": False,
        "_ng_failure_message": "sandbox died", "_ng_failure_stage": "run", "_ng_failure_partial_response": {"id": "r"},
    }  # fmt: skip
    flat_failure = {"_ng_failure_class": "environment_server_failed", "_ng_failure_message": "bad task",
                    "_ng_failure_terminal": True}  # fmt: skip
    with pytest.raises(EpisodeFailedError) as raised:
        router.result_of(flat, flat_failure)
    assert (raised.value.terminal, raised.value.status, raised.value.stage) == (True, 422, None)
