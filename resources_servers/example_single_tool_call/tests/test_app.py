"""example_single_tool_call over HTTP: the server runs as a real process, started from its own app.py."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from nemo_gym.testing import (
    VERIFY_FLAGS,
    StartedServer,
    check_environment_config,
    post_json,
    read_jsonl,
    run_resources_server,
)

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "example_single_tool_call"
COOKIE_NAME = f"SingleToolCallResourcesServer___{INSTANCE}"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server(INSTANCE, tmp_path_factory.mktemp(INSTANCE), domain="agent") as started:
        yield started


async def post(server: StartedServer, path: str, body: Any = None) -> tuple[int, Any]:
    """Every answer of this server must carry its session cookie."""
    return await post_json(server.url + path, body, require_cookie=COOKIE_NAME)


def error_locations(body: dict) -> list[list]:
    return [error["loc"] for error in body["detail"]]


async def test_get_weather_describes_the_city_it_was_asked_about(server):
    status, body = await post(server, "/get_weather", {"city": "San Francisco"})
    assert status == 200
    assert body == {"city": "San Francisco", "weather_description": "The weather in San Francisco is cold."}


@pytest.mark.parametrize("bad_body", [{}, {"town": "Paris"}, {"city": None}, {"city": ["Paris"]}])
async def test_get_weather_without_a_string_city_is_a_422_naming_city(server, bad_body):
    status, body = await post(server, "/get_weather", bad_body)
    assert status == 422
    assert ["body", "city"] in error_locations(body)


async def test_verify_always_rewards_1_and_echoes_only_params_and_response(server):
    status, body = await post(server, "/verify", {**ROWS[0], "response": A_RESPONSE})
    assert status == 200
    assert set(body) == {*VERIFY_FLAGS, "responses_create_params", "response", "reward"}
    assert body["reward"] == 1.0
    assert body["response"]["id"] == A_RESPONSE["id"]
    assert body["responses_create_params"]["tools"][0]["name"] == "get_weather"


async def test_verify_without_a_response_is_a_422_naming_it(server):
    status, body = await post(server, "/verify", ROWS[0])
    assert status == 422
    assert ["body", "response"] in error_locations(body)


async def test_seed_session_accepts_any_row_and_answers_empty(server):
    for row in ROWS:
        assert await post(server, "/seed_session", row) == (200, {})


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["response"]["id"][-8:])
async def test_recorded_rollouts_replay_to_their_tool_outputs_and_reward(server, rollout):
    """The example rows and rollouts validate against the server's models and reproduce as recorded."""
    output = rollout["response"]["output"]
    recorded = {item["call_id"]: item["output"] for item in output if item["type"] == "function_call_output"}
    for call in (item for item in output if item["type"] == "function_call"):
        status, body = await post(server, f"/{call['name']}", orjson.loads(call["arguments"]))
        assert status == 200 and body == orjson.loads(recorded[call["call_id"]])
    status, body = await post(server, "/verify", rollout)
    assert status == 200 and body["reward"] == rollout["reward"]


def test_config_declares_the_environment_and_its_agent():
    check_environment_config(FOLDER, INSTANCE, "agent")
