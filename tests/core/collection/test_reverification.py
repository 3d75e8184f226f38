"""`gym eval reverify` (nemo_gym.collection.reverification): the tool calls a stored rollout made are
replayed so a stateful environment verifies it the same; the settings NeMo Gym 0.7 allowed together; the
row sent back to /verify."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from pydantic import ValidationError

from nemo_gym.collection.reverification import ReverifyConfig, TaskRows, recorded_tool_calls
from tests.helpers import one_line_error, running_deployment
from tests.helpers import run_gym as gym


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "env.yaml").write_text("{}\n")
    return tmp_path


def test_reverify_replays_tool_calls_so_stateful_environments_score_the_same(workdir):
    config = "+config_paths=[resources_servers/example_session_state_mgmt/configs/example_session_state_mgmt.yaml," \
             "responses_api_models/replay_model/configs/replay_model.yaml]"  # fmt: skip
    replay = (
        "++policy_model.responses_api_models.replay_model.rollouts_jsonl_fpath="
        "[resources_servers/example_session_state_mgmt/data/example_rollouts.jsonl]"
    )
    with running_deployment([config, replay], cwd=workdir) as deployment:
        head = ["++head_server.port=" + deployment.head_url.rsplit(":", 1)[1]]
        collected = gym("collect", "-o", "r.jsonl", *head, cwd=workdir)
        assert collected.returncode == 0, collected.stdout + collected.stderr
        stored = read_jsonl(workdir / "r.jsonl")
        assert stored and all(record["reward"] == 1.0 for record in stored)
        replayed = gym("eval", "reverify", "-i", "r.jsonl", "-o", "replayed.jsonl", *head, cwd=workdir)
        assert replayed.returncode == 0, replayed.stderr
        assert [record["reward"] for record in read_jsonl(workdir / "replayed.jsonl")] == [1.0] * len(stored)
        # Without the replay, verify sees none of the session: NeMo Gym 0.7's /reverify_mode guard applies.
        bare = ("eval", "reverify", "-i", "r.jsonl", "-o", "bare.jsonl", "--no-tool-replay", *head)
        refused = gym(*bare, cwd=workdir)
        assert "example_session_state_mgmt_resources_server (unknown)" in one_line_error(refused)
        assert "--force" in refused.stderr
        forced = gym(*bare, "--force", cwd=workdir)
        assert forced.returncode == 0, forced.stderr
        assert not (workdir / "bare.jsonl").exists(), "a forced run's outputs are marked unsafe"
        assert 0.0 in [record["reward"] for record in read_jsonl(workdir / "unsafe_bare.jsonl")]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({}, "name the stored rollouts once"),
        ({"input_jsonl_fpath": "a.jsonl", "rollouts_jsonl_fpath": "b.jsonl"}, "name the stored rollouts once"),
        ({"input_jsonl_fpath": "a.jsonl", "append": True}, "it needs judge_failed_only"),
        ({"input_jsonl_fpath": "a.jsonl", "judge_failed_only": True, "append": True, "overwrite": True},
         "drop overwrite / resume_from_cache"),
        ({"input_jsonl_fpath": "a.jsonl", "inputs_jsonl_fpath": "i.jsonl", "materialized_inputs_jsonl_fpath": "m.jsonl"},
         "not both"),
        ({"input_jsonl_fpath": "a.jsonl", "atif_manifest_jsonl_fpath": "manifest.jsonl"}, "needs input_format atif"),
        ({"input_format": "atif", "atif_manifest_jsonl_fpath": "manifest.jsonl"}, "with the run's materialized inputs"),
    ],
)  # fmt: skip
def test_settings_that_do_not_go_together_are_refused(settings: dict, message: str):
    with pytest.raises(ValidationError, match=message):
        ReverifyConfig(output_jsonl_fpath="out.jsonl", **settings)


def test_nemo_gym_07_names_give_the_source_and_the_inputs():
    config = ReverifyConfig(
        rollouts_jsonl_fpath="stored.jsonl",
        materialized_inputs_jsonl_fpath="m.jsonl",
        output_jsonl_fpath="o.jsonl",
    )
    assert (config.source, config.inputs) == ("stored.jsonl", "m.jsonl")
    atif = ReverifyConfig(
        input_format="atif", atif_manifest_jsonl_fpath="manifest.jsonl", inputs_jsonl_fpath="i.jsonl",
        output_jsonl_fpath="o.jsonl",
    )  # fmt: skip
    assert (atif.source, atif.inputs) == ("manifest.jsonl", "i.jsonl")


def test_the_replayed_tool_calls_are_the_responses_function_calls_in_order():
    response = {
        "output": [
            {"type": "reasoning", "summary": []},
            {"type": "function_call", "name": "increment", "arguments": '{"by": 2}', "call_id": "c1"},
            {"type": "function_call_output", "call_id": "c1", "output": "2"},
            {"type": "function_call", "name": "broken", "arguments": '{"by": ', "call_id": "c2"},
            {"type": "function_call", "name": "get_count", "arguments": "", "call_id": "c3"},
            {"type": "message", "role": "assistant", "content": "done"},
        ]
    }
    assert recorded_tool_calls(response) == [("increment", {"by": 2}), ("get_count", {})]
    assert recorded_tool_calls(None) == recorded_tool_calls({"output": "not a list"}) == []


def test_verify_gets_the_materialized_row_or_else_the_stored_fields_without_the_rewards(tmp_path: Path):
    rows = [
        {"question": "q0", "options": ["A", "B"], "_ng_task_index": 0, "_ng_rollout_index": 0},
        {"question": "q0", "options": ["A", "B"], "_ng_task_index": 0, "_ng_rollout_index": 1},
        {"question": "q1", "options": ["C"], "_ng_task_index": 1, "_ng_rollout_index": 0},
    ]
    inputs = tmp_path / "r_materialized_inputs.jsonl"
    inputs.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    stored = {"question": "q1", "_ng_task_index": 1, "_ng_rollout_index": 0, "reward": 1.0}
    materialized = TaskRows(inputs)
    try:
        assert materialized.row_for(stored) == rows[2]
        assert materialized.row_for({**stored, "_ng_task_index": 0, "_ng_rollout_index": 1}) == rows[1]
        unknown = {**stored, "_ng_task_index": 9, "_ng_previous_reward": 0.0}
        assert materialized.row_for(unknown) == {
            "question": "q1",
            "_ng_task_index": 9,
            "_ng_rollout_index": 0,
        }
    finally:
        materialized.close()
    assert TaskRows(None).row_for(stored) == {"question": "q1", "_ng_task_index": 1, "_ng_rollout_index": 0}
