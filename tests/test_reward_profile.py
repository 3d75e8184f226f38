import math

import pytest

from nemo_gym.http_client import get_response_json, request
from nemo_gym.reward_profile import column_statistics, numeric_record


def rollout(task: int, index: int, reward: float, input_tokens: int | None = None) -> dict:
    row = {"_ng_task_index": task, "_ng_rollout_index": index, "reward": reward, "agent_ref": {"name": "a"}}
    if input_tokens is not None:
        row["response"] = {
            "usage": {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0}}
        }
    return row


WORKED_EXAMPLE = [rollout(0, 0, 1.0, 10), rollout(0, 1, 0.0, 12), rollout(1, 0, 1.0), rollout(1, 1, 1.0)]


async def aggregate(server, verify_responses: list[dict]):
    response = await request(
        "POST", server.url + "/aggregate_metrics", json={"verify_responses": verify_responses}
    )
    return response.status, await get_response_json(response)


async def test_aggregate_metrics_of_the_worked_example(counter_server):
    status, metrics = await aggregate(counter_server, WORKED_EXAMPLE)
    assert status == 200
    agent = metrics["agent_metrics"]
    assert agent["mean/reward"] == 0.75
    assert agent["median/reward"] == 1.0
    assert agent["std/reward"] == 0.5
    assert (agent["min/reward"], agent["max/reward"]) == (0.0, 1.0)
    assert agent["mean/input_tokens"] == 11.0
    assert math.isclose(agent["std/input_tokens"], math.sqrt(2))
    assert not any(key.endswith("_ng_task_index") for key in agent)
    assert metrics["key_metrics"] == {key: value for key, value in agent.items() if key.startswith("mean/")}
    groups = metrics["group_level_metrics"]
    assert [group["_ng_task_index"] for group in groups] == [0, 1]
    assert "mean/input_tokens" not in groups[1]
    assert groups[1]["mean/reward"] == 1.0


async def test_empty_and_duplicate_inputs(counter_server):
    assert await aggregate(counter_server, []) == (
        200,
        {"group_level_metrics": [], "agent_metrics": {}, "key_metrics": {}},
    )
    status, body = await aggregate(counter_server, [rollout(0, 0, 1.0), rollout(0, 0, 0.0)])
    assert status == 422
    assert "Duplicate rollout" in body["detail"]
    status, body = await aggregate(
        counter_server, [rollout(0, 0, 1.0), {**rollout(1, 0, 1.0), "_ng_task_index": "x"}]
    )
    assert status == 422
    assert "verify_responses[1]._ng_task_index must be an integer" in body["detail"]


def test_numeric_record_counts_bools_and_skips_text():
    assert numeric_record({"reward": True, "answer": "4", "n": 2, "nested": {"x": 1}}) == {
        "reward": 1.0,
        "n": 2.0,
    }


@pytest.mark.parametrize("rewards, expected_std", [([1.0], 0.0), ([1.0, 0.0], math.sqrt(0.5))])
def test_single_rollout_groups_report_zero_std(rewards, expected_std):
    stats = column_statistics([{"reward": r} for r in rewards])
    assert math.isclose(stats["std/reward"], expected_std)
