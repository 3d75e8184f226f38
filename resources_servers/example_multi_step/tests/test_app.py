"""example_multi_step over HTTP: the server runs as a real process, started from its own app.py."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from nemo_gym.testing import (
    VERIFY_FLAGS,
    StartedServer,
    check_environment_config,
    function_call_item,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_resources_server,
)

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "example_multi_step"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
ROW = ROWS[0]  # expects [711, 407] ("Blazing", "Warm"); the minefield term is "Hot" (299)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server(INSTANCE, tmp_path_factory.mktemp(INSTANCE), domain="agent") as started:
        yield started


def error_locations(body: dict) -> list[list]:
    return [error["loc"] for error in body["detail"]]


def submit(values: Any, call_id: str = "call_submit") -> dict:
    return function_call_item("extract_synonym_values", {"synonym_values": values}, call_id)


async def verify(server: StartedServer, *items: dict, **row_changes: Any) -> dict:
    status, body = await post_json(
        server.url + "/verify", {**ROW, **row_changes, "response": response_with(*items, **A_RESPONSE)}
    )
    assert status == 200, body
    return body


@pytest.mark.parametrize(
    ("synonym", "value"), [("Blazing", 711), ("Warm", 407), ("Hot", 299), ("", 0), ("é", 233), ("a b", 227)]
)
async def test_get_synonym_value_is_the_sum_of_code_points(server, synonym, value):
    assert await post_json(server.url + "/get_synonym_value", {"synonym": synonym}) == (
        200,
        {"synonym_value": value},
    )


@pytest.mark.parametrize("bad_body", [{}, {"term": "Hot"}, {"synonym": None}, {"synonym": ["Hot"]}])
async def test_get_synonym_value_without_a_string_synonym_is_a_422_naming_it(server, bad_body):
    status, body = await post_json(server.url + "/get_synonym_value", bad_body)
    assert status == 422 and ["body", "synonym"] in error_locations(body)


async def test_extract_synonym_values_only_acknowledges(server):
    assert await post_json(server.url + "/extract_synonym_values", {"synonym_values": [1, 2]}) == (
        200,
        {"success": True},
    )
    assert await post_json(server.url + "/extract_synonym_values", {"synonym_values": []}) == (
        200,
        {"success": True},
    )


@pytest.mark.parametrize("bad_body", [{}, {"synonym_values": "711"}, {"synonym_values": ["Blazing"]}])
async def test_extract_synonym_values_without_an_integer_list_is_a_422_naming_it(server, bad_body):
    status, body = await post_json(server.url + "/extract_synonym_values", bad_body)
    assert status == 422 and any(loc[:2] == ["body", "synonym_values"] for loc in error_locations(body))


async def test_the_expected_values_in_order_earn_1_and_every_diagnostic_is_clean(server):
    body = await verify(
        server,
        function_call_item("get_synonym_value", {"synonym": "Blazing"}, "c1"),
        submit([711, 407]),
        message_item("done"),
    )
    assert body["reward"] == 1.0
    assert body["parsed_synonym_values"] == [711, 407]
    assert body["accuracy"] is True and body["set_overlap"] == 1.0
    assert body["original_term_minefield_hit"] is False
    assert body["order_instruction_following_failure"] is False


async def test_verify_answers_its_fields_but_not_the_task_fields(server):
    body = await verify(server, submit([711, 407]))
    assert set(body) == {
        *VERIFY_FLAGS,
        "responses_create_params",
        "response",
        "reward",
        "parsed_synonym_values",
        "accuracy",
        "set_overlap",
        "original_term_minefield_hit",
        "order_instruction_following_failure",
    }
    params = body["responses_create_params"]
    assert params["parallel_tool_calls"] is False and params["tool_choice"] == "auto"
    assert all(item["type"] == "message" for item in params["input"]), "parsed input items gain their type"


async def test_the_right_values_in_the_wrong_order_are_an_order_failure(server):
    body = await verify(server, submit([407, 711]))
    assert body["reward"] == 0.0 and body["accuracy"] is False
    assert body["set_overlap"] == 1.0 and body["order_instruction_following_failure"] is True


async def test_a_partial_submission_earns_0_with_its_overlap(server):
    body = await verify(server, submit([711]))
    assert body["reward"] == 0.0 and body["set_overlap"] == 0.5
    assert body["order_instruction_following_failure"] is False


async def test_extra_values_fail_accuracy_but_keep_full_overlap(server):
    body = await verify(server, submit([711, 407, 5]))
    assert body["reward"] == 0.0 and body["set_overlap"] == 1.0
    assert body["order_instruction_following_failure"] is True


async def test_submitting_the_terms_own_value_hits_the_minefield(server):
    body = await verify(server, submit([299, 711, 407]))
    assert body["original_term_minefield_hit"] is True and body["reward"] == 0.0
    assert (await verify(server, submit([711, 407])))["original_term_minefield_hit"] is False


async def test_only_the_last_submission_counts(server):
    assert (await verify(server, submit([711, 407], "a"), submit([1], "b")))["reward"] == 0.0
    body = await verify(server, submit([1], "a"), submit([711, 407], "b"))
    assert body["reward"] == 1.0 and body["parsed_synonym_values"] == [711, 407]


@pytest.mark.parametrize(
    "items",
    [
        pytest.param([], id="empty output"),
        pytest.param([message_item("[711, 407]")], id="answer only in text"),
        pytest.param(
            [function_call_item("get_synonym_value", {"synonym": "Warm"}, "c1")], id="lookup without submit"
        ),
        pytest.param(
            [function_call_item("extract_synonym_values", "{not json", "c1")], id="arguments not JSON"
        ),
        pytest.param(
            [function_call_item("extract_synonym_values", {"values": [711, 407]}, "c1")],
            id="wrong argument name",
        ),
        pytest.param([submit(["Blazing", "Warm"])], id="strings instead of values"),
    ],
)
async def test_no_valid_submission_reads_as_an_empty_list_and_earns_0(server, items):
    body = await verify(server, *items)
    assert body["reward"] == 0.0 and body["parsed_synonym_values"] == []
    assert body["set_overlap"] == 0.0 and body["order_instruction_following_failure"] is False


async def test_a_malformed_last_submission_is_not_rescued_by_an_earlier_one(server):
    body = await verify(
        server, submit([711, 407], "a"), function_call_item("extract_synonym_values", "[711, 407", "b")
    )
    assert body["reward"] == 0.0 and body["parsed_synonym_values"] == []


async def test_other_rows_are_judged_against_their_own_expected_values(server):
    body = await verify(server, submit([5, 6]), expected_synonym_values=[5, 6], minefield_label_value=6)
    assert body["reward"] == 1.0 and body["original_term_minefield_hit"] is True


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**ROW, "response": A_RESPONSE, "expected_synonym_values": []}, "expected_synonym_values"),
        ({**ROW, "response": A_RESPONSE, "expected_synonym_values": None}, "expected_synonym_values"),
        ({**ROW, "response": A_RESPONSE, "minefield_label_value": "hot"}, "minefield_label_value"),
        ({**{k: v for k, v in ROW.items() if k != "id"}, "response": A_RESPONSE}, "id"),
        (
            {**{k: v for k, v in ROW.items() if k != "minefield_label"}, "response": A_RESPONSE},
            "minefield_label",
        ),
        (ROW, "response"),
    ],
)
async def test_a_bad_verify_body_is_a_422_naming_the_field(server, body, field):
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 422 and ["body", field] in error_locations(answer)


async def test_aggregate_metrics_profiles_the_diagnostic_fields(server):
    results = [await verify(server, submit([711, 407])), await verify(server, submit([407, 711]))]
    rollouts = [{**result, "_ng_task_index": 0, "_ng_rollout_index": i} for i, result in enumerate(results)]
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    assert body["key_metrics"]["mean/reward"] == 0.5
    assert body["key_metrics"]["mean/order_instruction_following_failure"] == 0.5
    assert body["agent_metrics"]["mean/set_overlap"] == 1.0


def row_of(rollout: dict) -> dict:
    """The example row with the rollout's prompt (recorded input items also carry `type`, rows do not)."""
    prompt = [item["content"] for item in rollout["responses_create_params"]["input"]]
    return next(
        row for row in ROWS if [item["content"] for item in row["responses_create_params"]["input"]] == prompt
    )


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["response"]["id"][-8:])
async def test_recorded_rollouts_replay_to_their_tool_outputs_and_reward(server, rollout):
    """Rollouts carry no task fields: each is verified with the example row that has its prompt."""
    output = rollout["response"]["output"]
    recorded = {item["call_id"]: item["output"] for item in output if item["type"] == "function_call_output"}
    for item in (item for item in output if item["type"] == "function_call"):
        status, body = await post_json(server.url + f"/{item['name']}", orjson.loads(item["arguments"]))
        assert status == 200 and body == orjson.loads(recorded[item["call_id"]])
    status, body = await post_json(
        server.url + "/verify", {**rollout, **row_of(rollout), "response": rollout["response"]}
    )
    assert status == 200 and body["reward"] == rollout["reward"]
    recorded_fields = {
        key: value for key, value in rollout.items() if key not in ("responses_create_params",)
    }
    assert {key: body[key] for key in recorded_fields if key != "response"} == {
        key: value for key, value in recorded_fields.items() if key != "response"
    }


def test_config_declares_the_environment_and_its_agent():
    check_environment_config(FOLDER, INSTANCE, "agent")
