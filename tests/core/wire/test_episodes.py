"""nemo_gym.wire.episodes: a flat task row becomes an episode's task, and an episode's answer is exactly one
of a result or a failure whose JSON is NeMo Gym 0.7's."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nemo_gym.wire.episodes import (
    MAX_FAILURE_REASON_CHARS,
    EpisodeFailure,
    SingleAgentTurnRequest,
    SingleAgentTurnResponse,
    SingleAgentTurnResult,
    SingleAgentTurnTaskInput,
    is_materialized_task_row,
    materialize_task,
    shortened_reason,
)

PARAMS = {"input": [{"role": "user", "content": "add 1"}]}
RESPONSE = {
    "id": "resp_1",
    "created_at": 0,
    "model": "m",
    "output": [],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
}
EPISODE_ID = {"rollout_id": "3-0", "attempt": 1}
TASK_ID = {"taskset": "tally", "task_id": "3"}


@pytest.mark.parametrize(
    ("ids", "expected"),
    [
        ({"task_id": 7, "problem_id": "p", "instance_id": "i", "_ng_task_index": 1}, "7"),
        ({"task_id": None, "problem_id": "p", "instance_id": "i"}, "p"),
        ({"instance_id": "django-1", "_ng_task_index": 1}, "django-1"),
        ({"_ng_task_index": 4}, "4"),
        ({}, "9"),
    ],
    ids=["task_id", "problem_id", "instance_id", "ng_task_index", "task_index"],
)
def test_the_task_id_is_the_first_id_the_row_has(ids: dict, expected: str) -> None:
    task = materialize_task({"responses_create_params": PARAMS, **ids}, taskset="math", task_index=9)
    assert task["task_id"] == {"taskset": "math", "task_id": expected}


def test_the_task_input_is_the_row_without_the_collectors_keys() -> None:
    row = {
        "responses_create_params": PARAMS,
        "expected": 3,
        "problem_id": "p",
        "agent_ref": {"name": "a"},
        "task_source": "x",
        "skills_ref": "s",
        "_ng_task_index": 0,
        "_ng_rollout_index": 2,
    }
    task = materialize_task(row, taskset="math")
    assert task["task_input"] == {"responses_create_params": PARAMS, "expected": 3, "problem_id": "p"}
    assert is_materialized_task_row(task) and not is_materialized_task_row(row)


def test_a_row_without_an_id_or_already_materialized_is_refused() -> None:
    with pytest.raises(ValueError, match="none of task_id, problem_id, instance_id or _ng_task_index"):
        materialize_task({"responses_create_params": PARAMS}, taskset="math")
    task = materialize_task({"responses_create_params": PARAMS}, taskset="math", task_index=0)
    with pytest.raises(ValueError, match="already a materialized task"):
        materialize_task(task, taskset="math", task_index=0)


def test_a_failure_leaves_its_unset_labels_out_of_the_json() -> None:
    bare = EpisodeFailure(failure_reason="seed failed", terminal=False)
    assert bare.model_dump(mode="json") == {"failure_reason": "seed failed", "terminal": False}
    labelled = EpisodeFailure(failure_reason="x", terminal=True, failure_kind="timeout", stage="agent")
    assert labelled.model_dump(mode="json") == {
        "failure_reason": "x",
        "terminal": True,
        "failure_kind": "timeout",
        "stage": "agent",
    }
    with pytest.raises(ValidationError, match="stage"):
        EpisodeFailure(failure_reason="x", terminal=True, stage="judging")
    with pytest.raises(ValidationError, match="extra"):
        EpisodeFailure.model_validate({"failure_reason": "x", "terminal": True, "retry": True})


def test_a_long_reason_is_shortened_to_what_a_failure_holds() -> None:
    assert shortened_reason("short") == "short"
    exact = "x" * MAX_FAILURE_REASON_CHARS
    assert shortened_reason(exact) == exact
    cut = shortened_reason("y" * (MAX_FAILURE_REASON_CHARS + 1))
    assert len(cut) == MAX_FAILURE_REASON_CHARS and cut.endswith("...")
    assert EpisodeFailure(failure_reason=cut, terminal=True).failure_reason == cut
    with pytest.raises(ValidationError, match="failure_reason"):
        EpisodeFailure(failure_reason=exact + "z", terminal=True)


def test_an_episode_answer_carries_exactly_one_of_result_and_failure() -> None:
    result = {"responses_create_params": PARAMS, "response": RESPONSE, "reward": 1.0}
    failure = {"failure_reason": "agent failed: 500", "terminal": False, "partial_response": RESPONSE}
    ids = {"episode_id": EPISODE_ID, "task_id": TASK_ID}
    assert SingleAgentTurnResponse.model_validate({**ids, "result": result}).result.reward == 1.0
    failed = SingleAgentTurnResponse.model_validate({**ids, "failure": failure})
    assert failed.failure.partial_response.id == "resp_1"
    for body in ({**ids}, {**ids, "result": result, "failure": failure}):
        with pytest.raises(ValidationError, match="exactly one of result and failure"):
            SingleAgentTurnResponse.model_validate(body)


def test_a_result_keeps_the_environments_own_verify_fields() -> None:
    answer = {"responses_create_params": PARAMS, "response": RESPONSE, "reward": 0.5, "extracted": "3"}
    result = SingleAgentTurnResult.model_validate({**answer, "ng_agent_observations": {"steps": 2}})
    dumped = result.model_dump(mode="json", exclude_unset=True)
    assert dumped["extracted"] == "3" and dumped["ng_agent_observations"] == {"steps": 2}


def test_a_flat_task_input_is_folded_into_task_data() -> None:
    flat = SingleAgentTurnTaskInput.model_validate({"responses_create_params": PARAMS, "expected": 3})
    assert flat.task_data == {"expected": 3}
    both = {"responses_create_params": PARAMS, "task_data": {"expected": 3, "unit": "m"}, "expected": 3}
    assert SingleAgentTurnTaskInput.model_validate(both).task_data == {"expected": 3, "unit": "m"}
    with pytest.raises(ValidationError, match=r"different values: \['expected'\]"):
        SingleAgentTurnTaskInput.model_validate({**both, "expected": 4})


def test_a_request_takes_a_materialized_flat_row() -> None:
    task = materialize_task({"responses_create_params": PARAMS, "expected": 3}, taskset="tally", task_index=3)
    request = SingleAgentTurnRequest.model_validate({"episode_id": EPISODE_ID, "task": task})
    assert request.task.task_id.task_id == "3" and request.episode_id.capture_key == "3-0-a1"
    assert request.task.task_input.task_data == {"expected": 3}
    with pytest.raises(ValidationError, match="responses_create_params"):
        SingleAgentTurnRequest.model_validate(
            {"episode_id": EPISODE_ID, "task": {"task_id": TASK_ID, "task_input": {"expected": 3}}}
        )
