"""code_gen over HTTP: one real server process; every program really runs in the sandbox (nemo_gym.sandbox).

The server runs with a 0.5 s per-test limit (the recorded programs need far less) and a visible reasoning
format penalty, so both show up in the answers.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nemo_gym.testing import (
    StartedServer,
    check_environment_config,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_resources_server,
)
from resources_servers.code_gen.grading import (
    compare_stdout,
    extract_code,
    grade_reports,
    reasoning_format_violation,
    same_value,
)

FOLDER = Path(__file__).resolve().parents[1]
IMPLEMENTATION = "code_gen"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
PENALTY = -0.5
ADD = {"inputs": ["1 2\n", "10 -3\n"], "outputs": ["3\n", "7\n"]}
TWO_SUM = {"inputs": ["[2, 7, 11, 15]\n9", "[3, 3]\n6"], "outputs": ["[0, 1]", "[0, 1]"], "fn_name": "twoSum"}
ADD_PROGRAM = "a, b = map(int, input().split())\nprint(a + b)"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp(IMPLEMENTATION)
    inner = {"domain": "coding", "unit_test_timeout_secs": 0.5, "reasoning_format_penalty": PENALTY}
    with run_resources_server(IMPLEMENTATION, workdir, **inner) as started:
        yield started


def fenced(code: str, before: str = "Here is my solution.") -> str:
    return f"{before}\n```python\n{code}\n```\n"


def body(text: str | None, tests: dict = ADD, difficulty: str | None = "easy", *extra_items: dict) -> dict:
    items = ([message_item(text)] if text is not None else []) + list(extra_items)
    metadata: dict[str, Any] = {"unit_tests": tests}
    if difficulty is not None:
        metadata["difficulty"] = difficulty
    return {
        "responses_create_params": {"input": [{"role": "user", "content": "Add two numbers."}]},
        "verifier_metadata": metadata,
        "response": response_with(*items),
    }


async def verify(server: StartedServer, request: dict) -> dict:
    status, result = await post_json(server.url + "/verify", request)
    assert status == 200, result
    return result


# ---- recorded data --------------------------------------------------------------------------------------


def row_for(rollout: dict) -> dict:
    prompt = rollout["responses_create_params"]["input"][0]["content"]
    return next(row for row in ROWS if row["responses_create_params"]["input"][0]["content"] == prompt)


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["response"]["id"][-8:])
async def test_recorded_rollouts_get_their_recorded_grade(server, rollout):
    result = await verify(server, {**row_for(rollout), "response": rollout["response"]})
    assert result["reward"] == rollout["reward"]
    assert result["result"] == rollout["result"]
    assert result["extracted_model_code"] == rollout["extracted_model_code"]
    assert result["extracted_model_output"] == rollout["extracted_model_output"]
    recorded = rollout["metadata"]
    if "error_message" in recorded:
        assert result["metadata"] == recorded
    else:
        assert set(result["metadata"]) == {"execution time"}


def test_config_has_the_reference_keys():
    _, resources, _ = check_environment_config(FOLDER, IMPLEMENTATION, "coding")
    settings = resources.model_extra
    assert settings["num_processes"] == 8 and settings["unit_test_timeout_secs"] == 10
    assert settings["debug"] is False and settings["reasoning_format_penalty"] == 0.0
    assert settings["sandbox"]["isolation"] == "auto"


# ---- stdin programs -------------------------------------------------------------------------------------


async def test_a_correct_program_passes_every_test(server):
    result = await verify(server, body(fenced(ADD_PROGRAM)))
    assert (result["reward"], result["result"]) == (1.0, [True, True])
    assert set(result["metadata"]) == {"execution time"}
    assert result["difficulty"] == "easy" and result["reasoning_format_violation_rate"] == 0.0
    assert result["unit_tests_time_taken"] > 0
    assert "verifier_metadata" not in result


async def test_the_code_is_the_last_fenced_block(server):
    text = fenced("print('draft')", before="First try:") + fenced(ADD_PROGRAM, before="Final:")
    result = await verify(server, body(text))
    assert result["extracted_model_code"] == ADD_PROGRAM
    assert result["reward"] == 1.0


async def test_numbers_are_compared_as_decimals(server):
    program = "a, b = map(int, input().split())\nprint(f'{a + b:.3f}   ')"
    result = await verify(server, body(fenced(program)))
    assert result["reward"] == 1.0


async def test_a_wrong_line_is_named(server):
    result = await verify(server, body(fenced("a, b = map(int, input().split())\nprint(a - b)")))
    assert (result["reward"], result["result"]) == (0.0, [-2])
    assert result["metadata"]["error_message"] == "Wrong answer at output_line_idx=0: -1 != 3"
    assert result["metadata"]["output"] == "-1\n" and result["metadata"]["inputs"] == "1 2\n"


async def test_a_long_output_is_compared_token_by_token(server):
    """Over 64 KiB of output: compared in the CPU pool instead of on the event loop."""
    expected = " ".join(str(number) for number in range(20000)) + "\n"
    tests = {"inputs": ["20000\n"], "outputs": [expected]}
    program = "n = int(input())\nprint(*range(n))"
    assert (await verify(server, body(fenced(program), tests=tests)))["reward"] == 1.0
    wrong = program.replace("range(n)", "[*range(n - 1), 0]")
    result = await verify(server, body(fenced(wrong), tests=tests))
    message = result["metadata"]["error_message"]
    assert result["result"] == [-2] and message.startswith("Wrong answer at output_line_idx=0: 0 1 2 3")
    assert len(message) < 800, "long lines are shortened in the message"


async def test_stdin_works_through_every_interface(server):
    program = "import sys\nnums = sys.stdin.buffer.read().split()\nprint(sum(map(int, nums)))"
    assert (await verify(server, body(fenced(program))))["reward"] == 1.0
    program = "print(sum(map(int, open(0).read().split())))"
    assert (await verify(server, body(fenced(program))))["reward"] == 1.0


async def test_a_syntax_error_is_reported(server):
    result = await verify(server, body(fenced("def broken(:\n    pass")))
    assert (result["reward"], result["result"]) == (0.0, [-4])
    assert result["metadata"]["error_code"] == -4
    assert result["metadata"]["error_message"].startswith("Error during testing: SyntaxError")


async def test_a_runtime_error_stops_at_the_failing_test(server):
    program = "a, b = map(int, input().split())\nprint(a + b if b > 0 else a // 0)"
    result = await verify(server, body(fenced(program)))
    assert (result["reward"], result["result"]) == (0.0, [True, -4])
    assert result["metadata"]["error_message"] == "Runtime Error"
    assert "ZeroDivisionError" in result["metadata"]["error"]


async def test_a_slow_test_is_a_time_limit(server):
    program = "a, b = map(int, input().split())\nwhile b < 0:\n    pass\nprint(a + b)"
    result = await verify(server, body(fenced(program)))
    assert (result["reward"], result["result"]) == (0.0, [True, -3])
    assert result["metadata"]["error_message"] == "Time Limit Exceeded"


async def test_a_program_that_kills_its_process_is_a_runtime_error(server):
    result = await verify(server, body(fenced("import os\nos._exit(3)")))
    assert (result["reward"], result["result"]) == (0.0, [-4])
    assert result["metadata"]["error_message"] == "Runtime Error"
    assert result["metadata"]["error"].startswith("exit status 3")


async def test_the_expected_outputs_are_not_in_the_sandbox(server):
    """A program that looks for the answers in its work dir finds none."""
    program = "import json, os\ntests = json.load(open('tests.json'))\nprint(tests.get('outputs', ['none'])[0], sorted(os.listdir('.')))"
    result = await verify(server, body(fenced(program)))
    assert result["reward"] == 0.0
    assert result["metadata"]["output"].startswith("none ['harness.py'")


# ---- call-based programs --------------------------------------------------------------------------------

TWO_SUM_PROGRAM = """class Solution:
    def twoSum(self, nums, target):
        seen = {}
        for i, n in enumerate(nums):
            if target - n in seen:
                return (seen[target - n], i)
            seen[n] = i"""


async def test_a_call_based_solution_passes(server):
    result = await verify(server, body(fenced(TWO_SUM_PROGRAM), tests=TWO_SUM))
    assert (result["reward"], result["result"]) == (1.0, [True, True])


async def test_a_call_based_wrong_answer(server):
    program = TWO_SUM_PROGRAM.replace("(seen[target - n], i)", "[i, seen[target - n]]")
    result = await verify(server, body(fenced(program), tests=TWO_SUM))
    assert (result["reward"], result["result"]) == (0.0, [-2])
    assert result["metadata"]["error_message"] == "Wrong Answer"
    assert result["metadata"]["output"] == "[1, 0]"


async def test_a_missing_method_is_reported(server):
    result = await verify(server, body(fenced("class Solution:\n    pass"), tests=TWO_SUM))
    assert (result["reward"], result["result"]) == (0.0, [-4])
    assert "twoSum" in result["metadata"]["error_message"]


# ---- answers without a program, format, bad requests ----------------------------------------------------


async def test_no_code_block_scores_0_with_the_text_kept(server):
    result = await verify(server, body("I think the answer is to add them."))
    assert result["reward"] == 0.0
    assert result["extracted_model_output"] == "I think the answer is to add them."
    assert result["extracted_model_code"] is None and result["result"] is None


async def test_no_text_at_all_scores_0_without_extraction(server):
    call = {"type": "function_call", "name": "run", "arguments": "{}", "call_id": "c1"}
    result = await verify(server, body(None, ADD, None, call))
    assert result["reward"] == 0.0
    assert result["extracted_model_output"] is None and result["extracted_model_code"] is None
    assert result["difficulty"] is None


async def test_a_think_tag_in_the_answer_gets_the_penalty(server):
    result = await verify(server, body("<think>add</think>" + fenced(ADD_PROGRAM)))
    assert result["result"] == [True, True]
    assert result["reward"] == PENALTY and result["reasoning_format_violation_rate"] == 1.0


@pytest.mark.parametrize(
    ("verifier_metadata", "location"),
    [
        ({"unit_tests": {"inputs": ["1"], "outputs": []}}, ["body", "verifier_metadata", "unit_tests"]),
        (
            {"unit_tests": {"inputs": [], "outputs": []}},
            ["body", "verifier_metadata", "unit_tests", "inputs"],
        ),
        ({}, ["body", "verifier_metadata", "unit_tests"]),
    ],
)
async def test_malformed_tests_are_a_422(server, verifier_metadata, location):
    status, answer = await post_json(
        server.url + "/verify", {**body("x"), "verifier_metadata": verifier_metadata}
    )
    assert status == 422
    assert [error["loc"] for error in answer["detail"]] == [location]


# ---- metrics --------------------------------------------------------------------------------------------


def scored(task: int, rollout: int, reward: float, code: str | None, difficulty: str) -> dict:
    return {
        **body("x"),
        "reward": reward,
        "extracted_model_code": code,
        "difficulty": difficulty,
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
    }


async def test_aggregate_metrics_per_difficulty(server):
    rollouts = [
        scored(0, 0, 1.0, "a", "easy"),
        scored(0, 1, 0.0, "b", "easy"),
        scored(1, 0, 0.0, None, "hard"),
        scored(1, 1, 0.0, "c", "hard"),
    ]
    status, answer = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, answer
    metrics, key = answer["agent_metrics"], answer["key_metrics"]
    assert metrics["pass@2/accuracy"] == 50.0 and metrics["pass@1[avg-of-2]/accuracy"] == 25.0
    # The within-task spread is on the score scale (0-1), as NeMo Gym reports it: (std(1, 0) + std(0, 0)) / 2.
    assert metrics["pass@1[avg-of-2]/accuracy/avg_sample_std_dev"] == pytest.approx(0.5**0.5 / 2)
    assert metrics["easy/pass@1[avg-of-2]/accuracy"] == 50.0 and metrics["hard/pass@2/accuracy"] == 0.0
    assert metrics["pass@1[avg-of-2]/no_answer"] == 25.0
    assert {"pass@2/accuracy", "pass@1[avg-of-2]/accuracy", "majority@2/accuracy"} <= set(key)
    assert {"easy/pass@1[avg-of-2]/accuracy", "hard/pass@1[avg-of-2]/accuracy"} <= set(key)
    assert not [name for name in key if name.endswith("no_answer") or "std" in name]


# ---- grading functions (in-process) ---------------------------------------------------------------------


def test_code_extraction_needs_two_fence_lines():
    assert extract_code("```python\nprint(1)\n```") == "print(1)"
    assert extract_code("text ```python\nx = 1\nmore ``` text") == "x = 1"
    assert extract_code("```python\nprint(1)") is None


def test_reasoning_format_rules():
    assert reasoning_format_violation("fine", ["<think>once</think>"]) is False
    assert reasoning_format_violation("x</think>", []) is True
    assert reasoning_format_violation("fine", ["<think>a", "<think>b"]) is True


def test_stdout_comparison_rules():
    assert compare_stdout("1 2 \n3\n\n", "1 2\n3") is None
    assert compare_stdout("1.50\n", "1.5\n") is None
    assert compare_stdout("1\n", "1\n2\n") == "Wrong answer: mismatched output length"
    assert compare_stdout("yes\n", "YES\n") == "Wrong answer at output_line_idx=0: yes != YES"


def test_call_values_match_within_tolerance():
    assert same_value([0.1 + 0.2, 2], [0.3, 2])
    assert not same_value([1, 2], [2, 1])
    assert not same_value(True, 1.0000001) and not same_value(10**400, 1.0)


def test_a_run_killed_at_its_deadline_is_a_global_timeout():
    reports = '{"status": "ok", "output": "3\\n", "seconds": 0.1}\n'
    result, metadata = grade_reports(reports, ADD["inputs"], ADD["outputs"], None, "timeout")
    assert result == [True, -1]
    assert metadata == {"error_code": -1, "error_message": "Global Timeout"}
