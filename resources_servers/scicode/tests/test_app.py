"""scicode: extraction in-process; /verify over HTTP against one real server started from its app.py, each
sub-step really running in the sandbox (3 s deadline instead of 30) against the example targets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import h5py
import numpy as np
import pytest

from nemo_gym.testing import (
    StartedServer,
    check_environment_config,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_resources_server,
    without_verify_flags,
)
from resources_servers.scicode.example_problems import write_test_data
from resources_servers.scicode.grading import OUT_OF_CONTEXT, extract_code, sanitize_test, step_targets

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "scicode"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
TIMEOUT_S = 3
TRAPEZOID = "def trapezoid(y, dx):\n    return float(dx * (y.sum() - 0.5 * (y[0] + y[-1])))"
MEAN_VALUE = "def mean_value(y, a, b):\n    return trapezoid(y, (b - a) / (len(y) - 1)) / (b - a)"
ROTATION = "def rotation_matrix(theta):\n    c, s = np.cos(theta), np.sin(theta)\n    return np.array([[c, -s], [s, c]])"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server(
        INSTANCE, tmp_path_factory.mktemp("scicode"), domain="coding", timeout_secs=TIMEOUT_S
    ) as started:
        yield started


def fenced(*blocks: str) -> str:
    return "Solution:\n" + "\n".join(f"```python\n{block}\n```" for block in blocks)


async def verify(server: StartedServer, text: str | None, row: dict = ROWS[0], **extra: object) -> dict:
    items = [message_item(text)] if text is not None else []
    status, body = await post_json(
        server.url + "/verify", {**row, **extra, "response": response_with(*items)}
    )
    assert status == 200, body
    assert body["reward"] == (1.0 if body["problem_accuracy"] and not body["mask_sample"] else 0.0)
    return body


def measured(body: dict) -> bool:
    return body["mask_sample"] is False and body["failure_kind"] is None and body["failure_reason"] is None


def statuses(body: dict) -> list[str]:
    return [step["status"] for step in body["step_details"]]


# --- in-process -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("```python\nx = 1\n```", "x = 1"),
        ("```python\na = 1\n```\nthen\n```python\nb = 2\n```", "a = 1\n\nb = 2"),  # every block, in order
        ("<think>```python\nwrong\n```</think>```python\nright\n```", "right"),
        ("```python\nnever closed", ""),
        ("no code at all", ""),
    ],
)
def test_every_closed_python_block_is_the_code(text, code):
    assert extract_code(text) == code


def test_scicode_imports_leave_the_tests():
    test = "from scicode.compare.cmp import cmp_tuple_or_list\nimport scicode\nassert f(1) == target"
    assert sanitize_test(test) == "assert f(1) == target"


def test_a_steps_targets_are_copied_alone_and_a_missing_key_is_named(tmp_path):
    path = tmp_path / "t.h5"
    write_test_data(path)
    image, problem = step_targets(path, "2.1", 2)
    assert problem is None
    image_path = tmp_path / "image.h5"
    image_path.write_bytes(image)
    with h5py.File(image_path) as data, h5py.File(path) as full:
        assert list(data.keys()) == ["2.1"] and list(data["2.1"].keys()) == ["test1", "test2"]
        assert np.array_equal(data["2.1/test1/var1"][()], full["2.1/test1/var1"][()])
    assert step_targets(path, "2.1", 3) == (None, "test data has no target '2.1/test3'")


# --- /verify ----------------------------------------------------------------------------------------


async def test_a_correct_function_set_earns_1(server):
    body = await verify(server, fenced(TRAPEZOID + "\n\n" + MEAN_VALUE))
    assert body["step_results"] == [True, True] and statuses(body) == ["pass", "pass"] and measured(body)
    assert body["num_steps_passed"] == 2 and body["subtask_accuracy"] == 1.0 and body["problem_id"] == "1"


async def test_a_tuple_target_is_compared_with_the_scicode_helper(server):
    code = "def moments(x):\n    x = np.asarray(x, dtype=float)\n    return x.mean(), x.std()"
    assert (await verify(server, fenced(code), row=ROWS[2]))["step_results"] == [True]
    sample_std = "def moments(x):\n    return np.mean(x), np.std(x, ddof=1)"
    body = await verify(server, fenced(sample_std), row=ROWS[2])
    assert body["step_results"] == [False] and body["step_details"][0]["details"]["type"] == "AssertionError"


async def test_one_wrong_step_fails_the_problem_and_is_counted(server):
    body = await verify(
        server,
        fenced(ROTATION, "def rotate_points(points, theta):\n    return points @ rotation_matrix(theta)"),
        row=ROWS[1],
    )
    assert body["step_results"] == [True, False] and statuses(body) == ["pass", "fail"]
    assert body["reward"] == 0.0 and body["subtask_accuracy"] == 0.5 and measured(body)
    assert body["step_details"][1]["details"]["test"] == 1


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("def trapezoid(y, dx) return 0", "syntax_error"),
        ("import not_a_module\n" + TRAPEZOID, "exec_failed"),
        (TRAPEZOID, "test_raised"),  # mean_value is missing: its test raises NameError
    ],
)
async def test_broken_model_code_fails_its_steps_and_is_measured(server, code, reason):
    body = await verify(server, fenced(code))
    assert body["reward"] == 0.0 and measured(body)
    assert (
        body["step_details"][-1]["status"] == "error"
        and body["step_details"][-1]["details"]["reason"] == reason
    )
    assert body["step_details"][-1]["details"]["phase"] == "model"


@pytest.mark.parametrize("text", [None, "The integral is the area.", "```python\ndef trapezoid(y, dx):"])
async def test_an_answer_without_code_scores_0(server, text):
    body = await verify(server, text)
    assert (
        statuses(body) == ["no_code", "no_code"] and body["step_results"] == [False, False] and measured(body)
    )
    assert body["extracted_model_code"] is None and body["num_steps_total"] == 2


async def test_an_infinite_loop_is_cut_at_the_deadline_and_marked_timeout(server):
    body = await verify(
        server, fenced("def trapezoid(y, dx):\n    while True:\n        pass\n\n" + MEAN_VALUE)
    )
    assert (
        statuses(body) == ["timeout", "timeout"] and body["step_details"][0]["details"]["reason"] == "timeout"
    )
    assert body["reward"] == 0.0 and measured(body)
    assert (await verify(server, fenced(TRAPEZOID + "\n\n" + MEAN_VALUE)))["reward"] == 1.0  # still answering


async def test_a_missing_target_key_marks_the_rollout(server):
    steps = [{**ROWS[0]["sub_steps"][0], "step_number": "9.1"}]
    body = await verify(server, fenced(TRAPEZOID), row={**ROWS[0], "sub_steps": steps})
    assert body["mask_sample"] is True and body["failure_kind"] == "verifier_error"
    assert body["failure_reason"] == "step 9.1: test data has no target '9.1/test1'" and body["reward"] == 0.0
    more_tests = [
        {**ROWS[0]["sub_steps"][0], "test_cases": [*ROWS[0]["sub_steps"][0]["test_cases"], "assert True"]}
    ]
    body = await verify(server, fenced(TRAPEZOID), row={**ROWS[0], "sub_steps": more_tests})
    assert body["mask_sample"] is True and "'1.1/test3'" in body["failure_reason"]


async def test_nemo_gym_solutions_score_only_the_steps_they_name(server):
    both = {"1.1": TRAPEZOID, "1.2": TRAPEZOID + "\n\n" + MEAN_VALUE}
    body = await verify(server, None, solutions=both)
    assert body["step_results"] == [True, True] and body["reward"] == 1.0
    body = await verify(server, None, solutions={"1.2": OUT_OF_CONTEXT})
    assert body["step_results"] == [False] and statuses(body) == ["no_code"] and body["num_steps_total"] == 1
    body = await verify(server, None, solutions={"1.2": TRAPEZOID + "\n\n" + MEAN_VALUE})
    assert body["step_results"] == [True] and body["reward"] == 1.0


@pytest.mark.parametrize(
    ("broken", "field"),
    [
        ({"problem_id": None}, "problem_id"),
        ({"sub_steps": []}, "sub_steps"),
        ({"sub_steps": [{"step_number": "1.1"}]}, "test_cases"),
    ],
)
async def test_a_malformed_row_is_a_422_naming_the_field(server, broken, field):
    row = {**ROWS[0], **broken}
    status, body = await post_json(
        server.url + "/verify", {**row, "response": response_with(message_item("x"))}
    )
    assert status == 422 and field in str(body)


# --- metrics, recorded data, config -----------------------------------------------------------------


async def test_aggregate_metrics_give_problem_pass_at_k_and_pooled_subtask_accuracy(server):
    right = await verify(server, fenced(TRAPEZOID + "\n\n" + MEAN_VALUE))
    half = await verify(server, fenced(TRAPEZOID))
    lone = await verify(server, fenced("def moments(x):\n    return 0, 0"), row=ROWS[2])
    rollouts = [
        {**right, "_ng_task_index": 0, "_ng_rollout_index": 0},
        {**half, "_ng_task_index": 0, "_ng_rollout_index": 1},
        {**lone, "_ng_task_index": 1, "_ng_rollout_index": 0},
        {**lone, "_ng_task_index": 1, "_ng_rollout_index": 1},
    ]
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    metrics = body["agent_metrics"]
    assert metrics["subtask_accuracy"] == pytest.approx(100 * 3 / 6)
    assert metrics["pass@2/accuracy"] == pytest.approx(50.0) and metrics[
        "pass@1[avg-of-2]/accuracy"
    ] == pytest.approx(25.0)
    assert body["key_metrics"]["subtask_accuracy"] == metrics["subtask_accuracy"]


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["problem_id"])
async def test_recorded_rollouts_verify_to_their_recorded_answer(server, rollout):
    row = ROWS[rollout["_ng_task_index"]]
    status, body = await post_json(server.url + "/verify", {**row, "response": rollout["response"]})
    assert status == 200, body
    recorded = {key: value for key, value in rollout.items() if key in body}
    assert without_verify_flags(body) == without_verify_flags(recorded)


def test_recorded_rollouts_mix_right_and_wrong_answers():
    assert [rollout["reward"] for rollout in ROLLOUTS] == [1.0, 0.0, 1.0, 1.0, 0.0]


def test_config_declares_the_environment_and_its_agent():
    _, resources, _ = check_environment_config(FOLDER, INSTANCE, "coding")
    assert resources.test_data_fpath is None and resources.timeout_secs == 30.0
    assert {row["agent_ref"]["name"] for row in ROWS} == {"scicode_simple_agent"}
