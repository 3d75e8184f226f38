"""terminal_multi_harness over HTTP (a real server with the shipped comparator), plus the string measures
in-process."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

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
from resources_servers.terminal_multi_harness.grading import ToolCallComparatorConfig, texts_match

NAME = "terminal_multi_harness"
INSTANCE = "terminal_multi_harness_resources_server"
FOLDER = Path(__file__).resolve().parents[1]
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = yaml.safe_load((FOLDER / "configs" / f"{NAME}.yaml").read_text())[INSTANCE]["resources_servers"][
    NAME
]
SEARCH, REPORT, INSPECT, OC_BATCH, OC_EDIT = ROWS
SEARCH_ARGS = json.loads(SEARCH["expected_action"]["arguments"])
EDIT_ARGS = json.loads(OC_EDIT["expected_action"]["arguments"])
BATCH_ARGS = json.loads(OC_BATCH["expected_action"]["arguments"])
CAT, LS = (json.loads(call["arguments"]) for call in INSPECT["expected_action"]["calls"])
C = "A tool call that matches the expected tool call was found"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    inner = {key: value for key, value in SHIPPED.items() if key != "entrypoint"}
    with run_resources_server(
        INSTANCE, tmp_path_factory.mktemp(NAME), implementation=NAME, **inner
    ) as started:
        yield started


async def verify(server: StartedServer, row: dict, *items: dict, **changes: Any) -> dict:
    status, answer = await post_json(
        server.url + "/verify", {**row, **changes, "response": response_with(*items)}
    )
    assert status == 200, answer
    return answer


def exec_call(arguments: dict, call_id: str = "c1") -> dict:
    return function_call_item("exec_command", arguments, call_id)


async def test_the_demonstrated_call_earns_1_and_volatile_arguments_are_ignored(server):
    exact = await verify(server, SEARCH, exec_call(SEARCH_ARGS))
    assert (exact["reward"], exact["category"], exact["harness"]) == (1.0, C, "codex")
    volatile = {**SEARCH_ARGS, "yield_time_ms": 30000, "tty": True}
    del volatile["max_output_tokens"]
    assert (await verify(server, SEARCH, exec_call(volatile)))["reward"] == 1.0
    assert exact["expected_action"] == SEARCH["expected_action"] and exact["id"] == SEARCH["id"]


@pytest.mark.parametrize(
    ("arguments", "category"),
    [
        ({**SEARCH_ARGS, "cmd": "grep -rn parse_args ."}, "An argument value in a tool call is different than expected"),
        ({**SEARCH_ARGS, "workdir": None}, "The type of an argument value in a tool call is different than expected"),
        ({"cmd": SEARCH_ARGS["cmd"]}, "The keys in an object argument value are different than expected"),
        ("{oops", "An error occurred when decoding the arguments string in a tool call as JSON"),
    ],
    ids=["other-command", "null-workdir", "missing-key", "bad-json"],
)  # fmt: skip
async def test_a_wrong_argument_earns_0_with_its_category(server, arguments, category):
    answer = await verify(server, SEARCH, exec_call(arguments))
    assert (answer["reward"], answer["category"]) == (0.0, category)


async def test_close_strings_match_by_difflib_ratio(server):
    close = {**SEARCH_ARGS, "cmd": 'rg -n "def parse_args" src/'}
    assert (await verify(server, SEARCH, exec_call(close)))["reward"] == 1.0
    message = await verify(
        server, REPORT, message_item(REPORT["expected_action"]["content"].replace("38", "all"))
    )
    assert (message["reward"], message["category"]) == (
        1.0,
        "A chat message that matches the expected message was found",
    )


@pytest.mark.parametrize(
    ("row", "items", "category"),
    [
        (SEARCH, [message_item("Let me search.")], "The actual action type does not match the expected action type"),
        (REPORT, [exec_call({"cmd": "pytest"})], "The actual action type does not match the expected action type"),
        (INSPECT, [exec_call(CAT)], "The actual action type does not match the expected action type"),
        (SEARCH, [exec_call(SEARCH_ARGS), exec_call(SEARCH_ARGS, "c2")], "The actual action type does not match the expected action type"),
        (SEARCH, [], "No tool call or chat message was found in the response"),
        (SEARCH, [{"type": "reasoning", "id": "r", "summary": []}], "No tool call or chat message was found in the response"),
        (OC_EDIT, [function_call_item("bash", {"command": "true"})], "The tool in a tool call is not the expected tool"),
    ],
    ids=["message-for-call", "call-for-message", "call-for-batch", "batch-for-call", "nothing", "reasoning-only", "other-tool"],
)  # fmt: skip
async def test_the_wrong_kind_of_step_earns_0(server, row, items, category):
    answer = await verify(server, row, *items)
    assert (answer["reward"], answer["category"]) == (0.0, category)


async def test_calls_outrank_a_message_and_the_first_message_is_the_text(server):
    answer = await verify(server, SEARCH, message_item("Searching now."), exec_call(SEARCH_ARGS))
    assert answer["reward"] == 1.0
    two = await verify(
        server, REPORT, message_item(REPORT["expected_action"]["content"]), message_item("x", "m2")
    )
    assert two["reward"] == 1.0


async def test_an_unordered_batch_matches_in_any_order_an_ordered_one_only_in_order(server):
    swapped = [exec_call(LS), exec_call(CAT, "c2")]
    assert (await verify(server, INSPECT, *swapped))["category"] == (
        "A tool-call batch that matches the expected batch was found"
    )
    ordered = {**INSPECT["expected_action"], "ordered": True}
    strict = await verify(server, INSPECT, *swapped, expected_action=ordered)
    assert (strict["reward"], strict["category"]) == (
        0.0,
        "An argument value in a tool call is different than expected",
    )
    too_many = await verify(
        server, INSPECT, *swapped, exec_call({"cmd": "pwd", "workdir": "/workspace/app"}, "c3")
    )
    assert too_many["category"] == "The number of tool calls in a batch is different than expected"
    twice = await verify(server, INSPECT, exec_call(LS), exec_call(LS, "c2"))
    assert twice["reward"] == 0.0, "each demonstrated call needs its own match"


async def test_opencode_batch_children_drop_their_own_tools_volatile_keys(server):
    children = json.loads(json.dumps(BATCH_ARGS["tool_calls"]))
    children[1]["parameters"]["description"] = "check types"
    del children[1]["parameters"]["timeout"]
    same = await verify(server, OC_BATCH, function_call_item("batch", {"tool_calls": children}))
    assert same["reward"] == 1.0
    children[0]["parameters"]["offset"] = 10
    extra = await verify(server, OC_BATCH, function_call_item("batch", {"tool_calls": children}))
    assert extra["category"] == "The keys in an object argument value are different than expected"


async def test_numbers_compare_by_value_and_booleans_are_not_numbers(server):
    row = {
        **SEARCH,
        "expected_action": {**SEARCH["expected_action"], "arguments": json.dumps({"n": 3, "f": True})},
    }
    assert (await verify(server, row, exec_call({"n": 3.0, "f": True})))["reward"] == 1.0
    assert (await verify(server, row, exec_call({"n": 3, "f": 1})))["category"] == (
        "The type of an argument value in a tool call is different than expected"
    )


@pytest.mark.parametrize(
    "expected_action",
    [
        None,
        {"type": "function_call", "name": "f", "arguments": "{oops"},
        {"type": "function_call", "name": "f"},
        {"type": "function_call_batch", "calls": []},
        {"type": "shell", "command": "ls"},
        {"type": "message"},
    ],
)
async def test_a_bad_expected_action_is_a_422_naming_it(server, expected_action):
    body = {**SEARCH, "expected_action": expected_action, "response": response_with(message_item("hi"))}
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 422 and all(
        error["loc"][:2] == ["body", "expected_action"] for error in answer["detail"]
    )


async def test_row_fields_are_echoed_and_cannot_forge_results(server):
    answer = await verify(server, SEARCH, message_item("no"), reward=1.0, category="x", trace="t-9")
    assert (answer["reward"], answer["trace"]) == (0.0, "t-9")
    assert answer["category"] == "The actual action type does not match the expected action type"


async def test_aggregate_metrics_report_pass_at_k_per_harness_and_category_shares(server):
    results = [
        await verify(server, SEARCH, exec_call(SEARCH_ARGS)),
        await verify(server, SEARCH, message_item("x")),
    ]
    rollouts = [{**result, "_ng_task_index": 0, "_ng_rollout_index": i} for i, result in enumerate(results)]
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    metrics = body["agent_metrics"]
    assert body["key_metrics"]["pass@2/accuracy"] == 100.0 and metrics["codex/pass@2/accuracy"] == 100.0
    assert metrics["category/EXPECTED_TOOL_CALL"] == 0.5 and metrics["category/ACTION_TYPE_MISMATCH"] == 0.5


@pytest.mark.parametrize("index", range(len(ROLLOUTS)))
async def test_recorded_rollouts_verify_to_their_recorded_result(server, index):
    rollout = ROLLOUTS[index]
    status, body = await post_json(server.url + "/verify", rollout)
    assert status == 200, body
    fields = ("reward", "category", "expected_action", "harness", "id")
    assert {key: body[key] for key in fields} == {key: rollout[key] for key in fields}


def test_recorded_rollouts_mix_matches_and_misses():
    assert [rollout["reward"] for rollout in ROLLOUTS] == [1.0, 0.0, 1.0, 1.0, 0.0]


def test_config_declares_the_environment_and_a_one_step_agent():
    _, resources, agent = check_environment_config(
        FOLDER, INSTANCE, "agent", agent_instance="terminal_multi_harness_simple_agent"
    )
    assert resources.model_extra["tool_call_comparator_config"]["string_similarity_threshold"] == 0.8
    assert agent["max_steps"] == 1


@pytest.mark.parametrize(
    "comparator",
    [{}, {"string_similarity_threshold": 0.8, "word_count_similarity_threshold": 0.1}, {"string_similarity_threshold": 0.8, "allow_subset": True}],
    ids=["no-measure", "two-measures", "unknown-key"],
)  # fmt: skip
def test_a_bad_comparator_stops_the_server_at_startup(tmp_path, comparator):
    with pytest.raises(RuntimeError, match="tool_call_comparator_config"):
        with run_resources_server(
            INSTANCE, tmp_path, implementation=NAME, domain="agent", tool_call_comparator_config=comparator
        ):
            pass


def test_word_count_measure_is_nemo_gyms_earlier_one():
    words = ToolCallComparatorConfig(word_count_similarity_threshold=0.25)
    assert texts_match("a b c d", "a b x y", words), "2 shared of 8 words"
    assert not texts_match("a b c d", "a x y z", words)
    assert not texts_match("Paris", "paris", words), "fewer than two words: exact"
