"""math_with_code over HTTP: one real server process; execute_python really runs code in the sandbox.

The server runs with tight sandbox limits (1 s of CPU, 1000 bytes of output) so the limits show quickly.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from nemo_gym.testing import (
    StartedServer,
    check_environment_config,
    function_call_item,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_resources_server,
)
from resources_servers.math_with_code.grading import grade

FOLDER = Path(__file__).resolve().parents[1]
IMPLEMENTATION = "math_with_code"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
OUTPUT_BYTES = 1000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp(IMPLEMENTATION)
    sandbox = {"wall_seconds": 5, "cpu_seconds": 1, "output_bytes": OUTPUT_BYTES}
    with run_resources_server(IMPLEMENTATION, workdir, domain="math", sandbox=sandbox) as started:
        yield started


async def execute(server: StartedServer, code: str) -> dict:
    status, answer = await post_json(server.url + "/execute_python", {"code": code})
    assert status == 200, answer
    return answer


def body(expected: str, *items: dict) -> dict:
    row = next(row for row in ROWS if row["expected_answer"] == "401")
    return {**row, "expected_answer": expected, "response": response_with(*items)}


async def verify(server: StartedServer, request: dict) -> dict:
    status, answer = await post_json(server.url + "/verify", request)
    assert status == 200, answer
    return answer


# ---- the tool ---------------------------------------------------------------------------------------------


async def test_the_tool_returns_what_the_program_printed(server):
    answer = await execute(server, "import numpy\nprint(int(numpy.arange(5).sum()))")
    assert answer == {"stdout": "10\n", "stderr": "", "exit_code": 0, "timed_out": False, "truncated": False}


async def test_an_exception_comes_back_as_stderr_and_exit_status(server):
    answer = await execute(server, "print('before')\n1 / 0")
    assert answer["stdout"] == "before\n" and answer["exit_code"] == 1
    assert answer["stderr"].rstrip().endswith("ZeroDivisionError: division by zero")


async def test_an_endless_program_is_stopped_and_says_so(server):
    answer = await execute(server, "while True:\n    pass")
    assert answer["timed_out"] is True and answer["exit_code"] is None
    assert answer["stderr"].endswith("[killed: the program exceeded its cpu time limit]")


async def test_long_output_is_cut_and_marked(server):
    answer = await execute(server, "print('x' * 5000)")
    assert answer["truncated"] is True
    assert answer["stdout"] == "x" * OUTPUT_BYTES + (
        f"\n[output truncated: 5001 bytes were written, only the first {OUTPUT_BYTES} are shown]"
    )


async def test_the_tool_needs_code(server):
    status, answer = await post_json(server.url + "/execute_python", {"source": "print(1)"})
    assert status == 422
    assert [error["loc"] for error in answer["detail"]] == [["body", "code"]]


# ---- the reward -------------------------------------------------------------------------------------------


async def test_an_equivalent_boxed_answer_scores_1(server):
    result = await verify(server, body("\\frac{1}{8}", message_item("So $p = \\boxed{\\frac{2}{16}}$.")))
    assert (result["reward"], result["extracted_answer"]) == (1.0, "\\frac{2}{16}")
    assert result["num_tool_calls"] == 0 and result["expected_answer"] == "\\frac{1}{8}"
    assert "question" not in result


async def test_a_wrong_boxed_answer_scores_0(server):
    result = await verify(server, body("401", message_item("\\boxed{201}")))
    assert (result["reward"], result["extracted_answer"]) == (0.0, "201")


async def test_only_the_final_message_counts(server):
    call = function_call_item("execute_python", {"code": "print(pow(7, 2024, 1000))"})
    output = {"type": "function_call_output", "call_id": "c1", "output": '{"stdout": "401\\n"}'}
    guess = message_item("Guess: \\boxed{401}", id="m1")
    result = await verify(server, body("401", guess, call, output, message_item("It is \\boxed{400}.")))
    assert (result["reward"], result["extracted_answer"], result["num_tool_calls"]) == (0.0, "400", 1)
    result = await verify(server, body("401", guess, call, output, message_item("Let me check that.")))
    assert (result["reward"], result["extracted_answer"]) == (0.0, None), "an earlier box is not the answer"


async def test_no_final_message_or_no_box_scores_0(server):
    call = function_call_item("execute_python", {"code": "print(1)"})
    result = await verify(server, body("401", call))
    assert (result["reward"], result["extracted_answer"], result["num_tool_calls"]) == (0.0, None, 1)
    result = await verify(server, body("401", message_item("The answer is 401.")))
    assert (result["reward"], result["extracted_answer"]) == (0.0, None)


def test_the_last_closed_box_is_the_answer():
    assert grade("\\frac{1}{2}", "\\boxed{1} then \\boxed{\\frac{1}{2}}") == (1.0, "\\frac{1}{2}")
    assert grade("7", "\\boxed{7} and an unclosed \\boxed{8") == (1.0, "7")
    assert grade("7", "no box") == (0.0, None)


# ---- recorded data and config -----------------------------------------------------------------------------


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["response"]["id"])
async def test_recorded_rollouts_get_their_recorded_reward(server, rollout):
    row = next(
        row for row in ROWS if row["question"] in rollout["responses_create_params"]["input"][0]["content"]
    )
    result = await verify(server, {**row, "response": rollout["response"]})
    assert result["reward"] == rollout["reward"]
    assert result["extracted_answer"] == rollout["extracted_answer"]
    assert result["num_tool_calls"] == rollout["num_tool_calls"]


def test_recorded_tool_outputs_are_execute_python_answers():
    outputs = [
        item
        for rollout in ROLLOUTS
        for item in rollout["response"]["output"]
        if item["type"] == "function_call_output"
    ]
    assert len(outputs) == 5
    for item in outputs:
        assert set(orjson.loads(item["output"])) == {
            "stdout",
            "stderr",
            "exit_code",
            "timed_out",
            "truncated",
        }


def test_config_and_rows_offer_the_tool():
    _, resources, _ = check_environment_config(FOLDER, IMPLEMENTATION, "math")
    assert resources.model_extra["sandbox"]["isolation"] == "auto"
    for row in ROWS:
        (tool,) = row["responses_create_params"]["tools"]
        assert tool["name"] == "execute_python" and tool["parameters"]["required"] == ["code"]
        assert row["question"] in row["responses_create_params"]["input"][0]["content"]


# ---- metrics ----------------------------------------------------------------------------------------------


async def test_aggregate_metrics_report_accuracy_and_tool_use(server):
    rollouts = [
        {**rollout, "_ng_task_index": index // 2, "_ng_rollout_index": index % 2}
        for index, rollout in enumerate(ROLLOUTS[:4])
    ]
    status, answer = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, answer
    metrics, key = answer["agent_metrics"], answer["key_metrics"]
    assert metrics["pass@1[avg-of-2]/accuracy"] == 75.0 and metrics["pass@2/accuracy"] == 100.0
    assert key["mean/num_tool_calls"] == 0.75
    assert {"pass@2/accuracy", "majority@2/accuracy", "pass@1[avg-of-2]/accuracy"} <= set(key)
    assert "pass@2/no_answer" not in key
