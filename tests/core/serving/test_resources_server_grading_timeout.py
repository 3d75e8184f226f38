"""`grading_timeout_s` is one base setting: an old key still sets it, two keys at once are refused."""

from __future__ import annotations

import copy
from pathlib import Path

import orjson
import pytest

from nemo_gym.base_resources_server import BaseResourcesServerConfig
from nemo_gym.testing import post_json, run_resources_server
from resources_servers.calendar.app import CalendarConfig

MCQA = Path(__file__).resolve().parents[3] / "resources_servers" / "mcqa"
ROLLOUT = orjson.loads((MCQA / "data" / "example_rollouts.jsonl").read_bytes().splitlines()[0])


def catastrophic_row() -> dict:
    """An mcqa row whose own answer regex backtracks for far longer than any grading deadline."""
    response = copy.deepcopy(ROLLOUT["response"])
    response["output"] = [
        {
            "id": "msg_0",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "a" * 60 + "!", "annotations": []}],
        }
    ]
    return {
        "responses_create_params": {"input": [{"role": "user", "content": "Pick one."}]},
        "options": [{"A": "x"}, {"B": "y"}],
        "expected_answer": "B",
        "response": response,
        "template_metadata": {"template_id": "t1", "output_regex": "^(a+)+$", "weight": 0.5},
    }


async def test_the_old_key_sets_the_deadline_a_real_server_grades_under(tmp_path):
    with run_resources_server(
        "mcqa_old_key", tmp_path, implementation="mcqa", domain="knowledge", grading_timeout_seconds=0.25
    ) as server:
        status, body = await post_json(server.url + "/verify", catastrophic_row())
        assert status == 200 and body["reward"] == 0.0
        assert "exceeded its 0.25 s deadline" in server.log()


def test_both_names_at_once_stop_the_server_naming_both(tmp_path):
    with pytest.raises(RuntimeError) as failure:
        with run_resources_server(
            "mcqa_two_keys",
            tmp_path,
            implementation="mcqa",
            domain="knowledge",
            grading_timeout_seconds=1,
            grading_timeout_s=2,
        ):
            pass
    assert "'grading_timeout_seconds' and 'grading_timeout_s' name the same setting" in str(failure.value)


def test_a_folder_keeps_its_own_default_and_the_base_default_is_ten_seconds():
    assert CalendarConfig.model_fields["grading_timeout_s"].default == 5.0
    assert BaseResourcesServerConfig.model_fields["grading_timeout_s"].default == 10.0
