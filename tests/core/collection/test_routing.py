"""Which agent runs a row (nemo_gym.collection.routing): agent_ref, task_source, agent_map, fan_out, and
the repeats and seeds of preprocess_examples."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from nemo_gym.collection.routing import preprocessed_rows, resolve_agent_refs
from nemo_gym.config_types import ConfigError


def agent(resources_server: str) -> dict:
    return {
        "responses_api_agents": {
            "simple_agent": {
                "entrypoint": "app.py",
                "host": "127.0.0.1",
                "port": 1,
                "resources_server": {"type": "resources_servers", "name": resources_server},
                "model_server": {"type": "responses_api_models", "name": "policy"},
            }
        }
    }


def resources_server() -> dict:
    return {
        "resources_servers": {
            "mcqa": {"entrypoint": "app.py", "host": "127.0.0.1", "port": 2, "domain": "other"}
        }
    }


CONFIG = OmegaConf.create(
    {
        "mcqa": resources_server(),
        "math": resources_server(),
        "shared": resources_server(),
        "mcqa_agent": agent("mcqa"),
        "math_agent": agent("math"),
        "shared_agent_1": agent("shared"),
        "shared_agent_2": agent("shared"),
        "policy": {
            "responses_api_models": {"openai_model": {"entrypoint": "app.py", "host": "127.0.0.1", "port": 3}}
        },
    }
)


def names(rows: list[dict]) -> list[str]:
    return [row["agent_ref"]["name"] for row in rows]


def test_a_task_source_names_an_agent_or_the_one_agent_of_a_resources_server() -> None:
    rows = [{"task_source": "mcqa"}, {"task_source": "math_agent"}, {"agent_ref": {"name": "mcqa_agent"}}]
    resolve_agent_refs(rows, CONFIG)
    assert names(rows) == ["mcqa_agent", "math_agent", "mcqa_agent"]


def test_every_unroutable_row_is_named_in_one_error() -> None:
    rows = [{"task_source": "shared"}, {"agent_ref": {"name": "nope"}}, {}, {"task_source": "mcqa"}]
    with pytest.raises(ValueError) as raised:
        resolve_agent_refs(rows, CONFIG)
    message = str(raised.value)
    assert message.startswith("3 of 4 rows name no agent")
    assert "row 0: task_source 'shared' names no agent, nor a resources server with one agent" in message
    assert "row 1: agent_ref 'nope'" in message and "row 2: no agent_ref and no task_source" in message


def test_agent_map_reroutes_by_agent_or_task_source_then_default() -> None:
    examples = [{"agent_ref": {"name": "mcqa_agent"}}, {"task_source": "math"}, {"task_source": "other"}]
    rows = preprocessed_rows(
        examples,
        agent_map={"mcqa_agent": "math_agent", "_default": "mcqa_agent"},
        fan_out=None,
        num_repeats=1,
        num_repeats_add_seed=False,
    )
    assert names(rows) == ["math_agent", "mcqa_agent", "mcqa_agent"]


def test_fan_out_runs_a_row_once_per_agent_with_its_own_rollout_index() -> None:
    rows = preprocessed_rows(
        [{"task_source": "mcqa", "q": 1}],
        agent_map=None,
        fan_out={"mcqa": ["mcqa_agent", "math_agent"]},
        num_repeats=2,
        num_repeats_add_seed=False,
    )
    assert [(row["agent_ref"]["name"], row["_ng_task_index"], row["_ng_rollout_index"]) for row in rows] == [
        ("mcqa_agent", 0, 0),
        ("mcqa_agent", 0, 1),
        ("math_agent", 0, 2),
        ("math_agent", 0, 3),
    ]
    with pytest.raises(ValueError, match="distinct agents"):
        preprocessed_rows(
            [{}], agent_map=None, fan_out={"x": ["a", "a"]}, num_repeats=1, num_repeats_add_seed=False
        )


def test_repeats_keep_a_callers_task_index_and_seed_each_rollout() -> None:
    example = {"_ng_task_index": 41, "responses_create_params": {"metadata": {"extra_body": '{"top_k": 5}'}}}
    rows = preprocessed_rows(
        [example], agent_map=None, fan_out=None, num_repeats=3, num_repeats_add_seed=True
    )
    assert [row["_ng_task_index"] for row in rows] == [41, 41, 41]
    seeds = [json.loads(row["responses_create_params"]["metadata"]["extra_body"]) for row in rows]
    assert seeds == [{"top_k": 5, "seed": 0}, {"top_k": 5, "seed": 1}, {"top_k": 5, "seed": 2}]
    assert example["responses_create_params"]["metadata"]["extra_body"] == '{"top_k": 5}'  # input untouched
    with pytest.raises(ConfigError, match="num_repeats"):
        preprocessed_rows([example], agent_map=None, fan_out=None, num_repeats=0, num_repeats_add_seed=False)
