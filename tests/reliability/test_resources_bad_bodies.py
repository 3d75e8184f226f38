"""Every shipped resources server answers a malformed body with a 422 naming the field, never a 500.

The servers are those of the reliability suite's one deployment, each from its shipped config. `/aggregate_metrics` must name
the element and field at fault; `/verify` must read an assistant message whose content is a plain string
(as the Responses input side allows) instead of crashing on it.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from nemo_gym.global_config import install_root
from nemo_gym.testing import post_json, read_jsonl, response_with
from tests.reliability.deployment import Server

RESOURCES_SERVERS = install_root() / "resources_servers"
SERVER_NAMES = sorted(folder.name for folder in RESOURCES_SERVERS.iterdir() if (folder / "app.py").is_file())
REWARD_LOC = ["body", "verify_responses", 0, "reward"]


def shipped_resources_config(name: str) -> tuple[str, dict[str, Any]]:
    """(instance name, inner config) of the resources server in the folder's shipped config."""
    config = yaml.safe_load((RESOURCES_SERVERS / name / "configs" / f"{name}.yaml").read_text())
    return next(
        (instance, block["resources_servers"][name])
        for instance, block in config.items()
        if name in block.get("resources_servers", {})
    )


@pytest.fixture(scope="module")
def servers(every_server: dict[str, Server]) -> dict[str, Server]:
    """Every resources server of the shared deployment (each from its shipped config), by folder name."""
    return {name: every_server[shipped_resources_config(name)[0]] for name in SERVER_NAMES}


def verifying(server: Server) -> Server:
    """The server, if it grades through /verify; /reset + /step environments reward in /step instead."""
    if "/verify" not in server.openapi["paths"]:
        pytest.skip(f"{server.name} has no /verify: it rewards in /step")
    return server


def first_row(name: str) -> dict[str, Any]:
    return read_jsonl(RESOURCES_SERVERS / name / "data" / "example.jsonl")[0]


def plain_answer(text: str, role: str = "assistant") -> dict[str, Any]:
    return response_with({"type": "message", "role": role, "content": text})


# ---- /aggregate_metrics ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SERVER_NAMES)
@pytest.mark.parametrize(
    "verify_responses, loc, error_type",
    [
        ([{}], REWARD_LOC, "missing"),
        ([{"reward": "1.0", "_ng_task_index": 0}], REWARD_LOC, "float_type"),
        ([{"reward": None}], REWARD_LOC, "missing"),
        ({"reward": 1.0}, ["body", "verify_responses"], "list_type"),
    ],
    ids=["no_reward", "text_reward", "null_reward", "not_a_list"],
)
async def test_a_malformed_verify_response_is_a_422_naming_the_field(
    servers: dict[str, Server], name: str, verify_responses: Any, loc: list, error_type: str
) -> None:
    status, body = await post_json(
        servers[name].url + "/aggregate_metrics", {"verify_responses": verify_responses}
    )
    assert status == 422, body
    assert [(problem["loc"], problem["type"]) for problem in body["detail"]] == [(loc, error_type)]


# `elapsed_s` is too large to sum: left out of the statistics, not an overflow.
ODD_BUT_VALID = [
    {"reward": 1, "_ng_task_index": 0, "_ng_rollout_index": 0, "elapsed_s": 1e308},
    {
        "reward": 0.0,
        "_ng_task_index": 0,
        "_ng_rollout_index": 1,
        "elapsed_s": 1e308,
        "extracted_answer": {"nested": [1, "a"]},
        "library_reward": "n/a",
        "task_name": ["not", "a", "name"],
        "category": None,
        "expected_answer": 7,
        "judge_evaluations": [],
        "response": "not a response",
    },
    {"_ng_task_index": 1, "_ng_rollout_index": 0, "_ng_failure_class": "timeout"},
]


@pytest.mark.parametrize("name", SERVER_NAMES)
async def test_odd_but_valid_verify_responses_aggregate(servers: dict[str, Server], name: str) -> None:
    url = servers[name].url + "/aggregate_metrics"
    status, body = await post_json(url, {"verify_responses": ODD_BUT_VALID})
    assert status == 200, body
    assert body["agent_metrics"]["mean/reward"] == 0.5
    assert body["agent_metrics"]["num_failed_rollouts"] == 1
    assert "mean/elapsed_s" not in body["agent_metrics"]
    assert await post_json(url, {"verify_responses": []}) == (
        200,
        {
            "group_level_metrics": [],
            "agent_metrics": {},
            "key_metrics": {},
            "repeat_level_metrics": [],
            "perf_summary": None,
        },
    )


# ---- /verify --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SERVER_NAMES)
async def test_plain_string_content_is_never_a_server_error(servers: dict[str, Server], name: str) -> None:
    status, body = await post_json(
        verifying(servers[name]).url + "/verify", {**first_row(name), "response": plain_answer("plain")}
    )
    assert status < 500, body
    assert status == 422 or isinstance(body["reward"], float), body


@pytest.mark.parametrize(
    "name, answer",
    [("equivalence_rule", None), ("mcqa", "The answer is \\boxed{B}.")],
)
async def test_a_right_answer_as_plain_string_content_is_graded(
    servers: dict[str, Server], name: str, answer: str | None
) -> None:
    row = first_row(name)
    text = answer or row["expected_answer"]
    url = servers[name].url + "/verify"
    status, body = await post_json(url, {**row, "response": plain_answer(text)})
    assert (status, body["reward"]) == (200, 1.0), body
    status, body = await post_json(url, {**row, "response": plain_answer(text, role="user")})
    assert (status, body["reward"]) == (200, 0.0), "only what the assistant says is graded"
