"""One rollout as an ATIF trajectory and back (nemo_gym.collection.atif_mapping): every shipped rollout
comes back item for item, and a model turn is one agent step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nemo_gym.collection.atif_mapping import UnmappableRollout, response_of, stored_rollout_of, trajectory_of
from nemo_gym.wire.atif_v1_7 import AtifTrajectory
from tests.helpers import REPO_ROOT

SHIPPED_ROLLOUTS = sorted(REPO_ROOT.glob("resources_servers/*/data/example_rollouts.jsonl"))


def stamped(row: dict, task: int) -> dict:
    return {**row, "agent_ref": {"name": "agent"}, "_ng_task_index": task, "_ng_rollout_index": 0}


@pytest.mark.parametrize("path", SHIPPED_ROLLOUTS, ids=lambda path: path.parts[-3])
def test_every_shipped_rollout_comes_back_item_for_item(path: Path):
    for task, line in enumerate(path.read_text().splitlines()):
        row = stamped(json.loads(line), task)
        written = json.dumps(trajectory_of(row, "s", "1").to_json_dict())
        assert response_of(AtifTrajectory.model_validate_json(written)) == row["response"], (
            f"{path}:{task + 1}"
        )


def test_a_model_turn_is_one_agent_step_with_its_reasoning_calls_results_and_token_ids():
    tokens = {
        "prompt_token_ids": [1, 2],
        "generation_token_ids": [3, 4, 5],
        "generation_log_probs": [-0.1] * 3,
    }
    call = {"type": "function_call", "call_id": "c1", "name": "add", "arguments": '{"n": 1}', **tokens}
    output = [
        {"type": "reasoning", "id": "r1", "summary": [{"type": "summary_text", "text": "think"}]},
        call,
        {"type": "function_call_output", "call_id": "c1", "output": "2"},
        {"type": "message", "id": "m1", "role": "assistant", "content": [{"type": "output_text", "text": "2", "annotations": []}]},
    ]  # fmt: skip
    row = stamped({"reward": 1.0, "response": {"id": "x", "model": "m", "output": output}}, 3)
    row["responses_create_params"] = {"instructions": "be brief", "input": "add 1"}
    trajectory = trajectory_of(row, "s", "1")
    assert [(step.source, step.message) for step in trajectory.steps] == [
        ("system", "be brief"), ("user", "add 1"), ("agent", ""), ("agent", "2"),
    ]  # fmt: skip
    turn = trajectory.steps[2]
    assert turn.reasoning_content == "think"
    assert [(tool.function_name, tool.arguments) for tool in turn.tool_calls] == [("add", {"n": 1})]
    assert [(result.source_call_id, result.content) for result in turn.observation.results] == [("c1", "2")]
    assert (turn.metrics.prompt_token_ids, turn.metrics.completion_token_ids) == ([1, 2], [3, 4, 5])
    assert turn.metrics.completion_tokens == 3 and trajectory.final_metrics.total_steps == 4
    assert response_of(trajectory) == row["response"], "arguments text with spaces must come back as written"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"response": None}, "no response with an output list"),
        ({"reward": True}, "no numeric reward"),
        ({"agent_ref": {"type": "responses_api_agents"}}, "no agent_ref.name"),
    ],
)
def test_a_rollout_without_a_faithful_trajectory_is_refused_with_its_reason(change: dict, reason: str):
    row = stamped({"reward": 1.0, "response": {"output": []}}, 0)
    trajectory_of(row, "s", "1")
    with pytest.raises(UnmappableRollout, match=reason):
        trajectory_of({**row, **change}, "s", "1")


def test_the_stored_rollout_comes_back_and_a_foreign_trajectory_is_refused():
    row = stamped({"reward": 0.5, "response": {"id": "r", "output": []}}, 2)
    exported = trajectory_of(row, "s", "1").to_json_dict()
    assert stored_rollout_of(AtifTrajectory.model_validate(exported)) == {
        "_ng_task_index": 2, "_ng_rollout_index": 0, "agent_ref": {"name": "agent"}, "reward": 0.5,
        "response": {"id": "r", "output": []},
    }  # fmt: skip
    foreign = AtifTrajectory.model_validate({**exported, "extra": None})
    with pytest.raises(UnmappableRollout, match="use a file `gym eval export` wrote"):
        response_of(foreign)
