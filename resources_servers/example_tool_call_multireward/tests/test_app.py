"""example_tool_call_multireward over HTTP: the server runs as a real process, started from its own app.py."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
INSTANCE = "example_tool_call_multireward"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
ROW = ROWS[0]  # expects get_weather(city="San Francisco"); the tool requires "city"
SF = {"city": "San Francisco"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server(INSTANCE, tmp_path_factory.mktemp(INSTANCE), domain="agent") as started:
        yield started


def error_locations(body: dict) -> list[list]:
    return [error["loc"] for error in body["detail"]]


REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "call the tool"}],
}
TOOL_OUTPUT = {"type": "function_call_output", "call_id": "c1", "output": '{"detail":"Not Found"}'}


async def verify(server: StartedServer, *items: dict, **row_changes: Any) -> dict:
    response = response_with(*items, **A_RESPONSE)
    status, body = await post_json(server.url + "/verify", {**ROW, **row_changes, "response": response})
    assert status == 200, body
    return body


def components(body: dict) -> tuple[float, float, float]:
    return body["correctness"], body["schema_valid"], body["format"]


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        pytest.param([function_call_item("get_weather", SF)], (1.0, 1.0, 1.0), id="one right bare call"),
        pytest.param(
            [REASONING, function_call_item("get_weather", SF)],
            (1.0, 1.0, 1.0),
            id="reasoning is not a message",
        ),
        pytest.param(
            [function_call_item("get_weather", SF), message_item("ok")], (1.0, 1.0, 0.0), id="call plus text"
        ),
        pytest.param(
            [function_call_item("get_weather", SF), TOOL_OUTPUT, message_item("ok")],
            (1.0, 1.0, 0.0),
            id="recorded shape",
        ),
        pytest.param(
            [function_call_item("get_weather", {"city": "Paris"})], (0.0, 1.0, 1.0), id="wrong value"
        ),
        pytest.param(
            [function_call_item("get_forecast", SF)], (0.0, 1.0, 1.0), id="wrong tool name, unknown tool"
        ),
        pytest.param(
            [function_call_item("get_weather", {"town": "San Francisco"})],
            (0.0, 0.0, 1.0),
            id="required key missing",
        ),
        pytest.param(
            [function_call_item("get_weather", '{"city": "San Fr')], (0.0, 0.0, 1.0), id="arguments not JSON"
        ),
        pytest.param(
            [function_call_item("get_weather", '["San Francisco"]')],
            (0.0, 0.0, 1.0),
            id="arguments not an object",
        ),
        pytest.param(
            [function_call_item("get_weather", {**SF, "units": "metric"})],
            (1.0, 1.0, 1.0),
            id="extra predicted keys allowed",
        ),
        pytest.param([message_item("It is sunny in San Francisco.")], (0.0, 0.0, 0.0), id="text only"),
        pytest.param([], (0.0, 0.0, 0.0), id="empty output"),
        pytest.param(
            [
                function_call_item("get_weather", {"town": "x"}, "a"),
                function_call_item("get_weather", SF, "b"),
            ],
            (1.0, 0.0, 0.0),
            id="two calls: any may be correct, the first decides the schema",
        ),
        pytest.param(
            [
                function_call_item("get_weather", SF, "a"),
                function_call_item("get_weather", {"town": "x"}, "b"),
            ],
            (1.0, 1.0, 0.0),
            id="two calls: first valid",
        ),
    ],
)
async def test_each_component_is_scored_independently_and_the_reward_is_their_sum(server, items, expected):
    body = await verify(server, *items)
    assert components(body) == expected
    assert body["reward_components"] == dict(
        zip(("correctness", "schema_valid", "format"), expected, strict=True)
    )
    assert body["reward"] == sum(expected)


async def test_an_unknown_tool_requires_nothing_but_an_object(server):
    body = await verify(server, function_call_item("lookup", {}))
    assert body["schema_valid"] == 1.0
    assert (await verify(server, function_call_item("lookup", "not json")))["schema_valid"] == 0.0


async def test_required_parameters_come_from_the_called_tools_schema(server):
    params = {**ROW["responses_create_params"]}
    strict_tool = {
        **params["tools"][0],
        "name": "book",
        "parameters": {"type": "object", "required": ["a", "b"]},
    }
    params["tools"] = [*params["tools"], strict_tool]
    assert (await verify(server, function_call_item("book", {"a": 1}), responses_create_params=params))[
        "schema_valid"
    ] == 0.0
    assert (
        await verify(server, function_call_item("book", {"a": 1, "b": 2}), responses_create_params=params)
    )["schema_valid"] == 1.0


@pytest.mark.parametrize(
    ("expected_call", "correct"),
    [
        pytest.param({}, 0.0, id="empty expected call never matches"),
        pytest.param({"name": "get_weather"}, 1.0, id="name only"),
        pytest.param(
            {"name": "get_weather", "arguments": {"city": "San Francisco", "units": "c"}}, 0.0, id="key"
        ),
        pytest.param({"name": "get_weather", "arguments": {"city": "san francisco"}}, 0.0, id="case matters"),
    ],
)
async def test_correctness_against_the_rows_expected_call(server, expected_call, correct):
    body = await verify(server, function_call_item("get_weather", SF), expected_call=expected_call)
    assert body["correctness"] == correct


async def test_a_row_without_expected_call_scores_0_correctness(server):
    row = {key: value for key, value in ROW.items() if key != "expected_call"}
    status, body = await post_json(
        server.url + "/verify",
        {**row, "response": response_with(function_call_item("get_weather", SF), **A_RESPONSE)},
    )
    assert status == 200 and components(body) == (0.0, 1.0, 1.0)


async def test_predicted_calls_list_every_call_with_parsed_arguments(server):
    body = await verify(
        server,
        function_call_item("get_weather", SF, "a"),
        function_call_item("get_weather", "{broken", "b"),
        message_item("x"),
    )
    assert body["predicted_calls"] == [
        {"name": "get_weather", "arguments": SF},
        {"name": "get_weather", "arguments": {}},
    ]


async def test_verify_answers_its_fields_but_not_expected_call(server):
    body = await verify(server, function_call_item("get_weather", SF))
    assert set(body) == {
        *VERIFY_FLAGS,
        "responses_create_params",
        "response",
        "reward",
        "reward_components",
        "correctness",
        "schema_valid",
        "format",
        "predicted_calls",
    }
    assert body["responses_create_params"]["tool_choice"] == "auto"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**ROW, "response": A_RESPONSE, "expected_call": "get_weather"}, "expected_call"),
        (
            {**ROW, "response": A_RESPONSE, "expected_call": {"name": "x", "arguments": "city"}},
            "expected_call",
        ),
        (ROW, "response"),
        ({"expected_call": ROW["expected_call"], "response": A_RESPONSE}, "responses_create_params"),
    ],
)
async def test_a_bad_verify_body_is_a_422_naming_the_field(server, body, field):
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 422 and any(loc[:2] == ["body", field] for loc in error_locations(answer))


async def test_there_is_no_tool_route_so_a_tool_call_gets_a_404(server):
    status, body = await post_json(server.url + "/get_weather", SF)
    assert status == 404 and body == {"detail": "Not Found"}


async def test_aggregate_metrics_profile_each_component(server):
    results = [
        await verify(server, function_call_item("get_weather", SF)),
        await verify(server, message_item("no")),
    ]
    rollouts = [{**result, "_ng_task_index": i, "_ng_rollout_index": 0} for i, result in enumerate(results)]
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    key = body["key_metrics"]
    assert key["mean/reward"] == 1.5
    assert key["mean/correctness"] == key["mean/schema_valid"] == key["mean/format"] == 0.5


def row_of(rollout: dict) -> dict:
    """The example row with the rollout's prompt (recorded input items also carry `type`, rows do not)."""
    prompt = [item["content"] for item in rollout["responses_create_params"]["input"]]
    return next(
        row for row in ROWS if [item["content"] for item in row["responses_create_params"]["input"]] == prompt
    )


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["response"]["id"][-8:])
async def test_recorded_rollouts_verify_to_their_recorded_reward_and_components(server, rollout):
    status, body = await post_json(
        server.url + "/verify", {**row_of(rollout), "response": rollout["response"]}
    )
    assert status == 200 and body["reward"] == rollout["reward"]
    for field in ("reward_components", "correctness", "schema_valid", "format", "predicted_calls"):
        assert body[field] == rollout[field], field


def test_config_declares_the_environment_and_its_agent():
    check_environment_config(FOLDER, INSTANCE, "agent")
