"""xlam_fc over HTTP: the server runs as a real process, started from its own app.py."""

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
INSTANCE = "xlam_fc"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
PARAMS = ROWS[0]["responses_create_params"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server(INSTANCE, tmp_path_factory.mktemp(INSTANCE), domain="agent") as started:
        yield started


def call(name: str, arguments: Any, index: int = 0) -> dict:
    """Call ids here are numbered `call_<index>`, as the predictions are reported by index."""
    return function_call_item(name, arguments, call_id=f"call_{index}")


async def verify(server: StartedServer, expected: list[dict], *items: dict) -> dict:
    body = {
        "responses_create_params": PARAMS,
        "expected_answers": expected,
        "response": response_with(*items),
    }
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 200, answer
    return answer


BETA = {"name": "live_giveaways_by_type", "arguments": {"type": "beta"}}
GAME = {"name": "live_giveaways_by_type", "arguments": {"type": "game"}}


async def test_all_expected_calls_made_earn_1_with_counts_and_parsed_calls(server):
    answer = await verify(
        server, [BETA, GAME], call(BETA["name"], BETA["arguments"]), call(GAME["name"], GAME["arguments"], 1)
    )
    assert answer["reward"] == 1.0
    assert (answer["num_expected"], answer["num_predicted"], answer["num_correct"]) == (2, 2, 2)
    assert answer["predicted_calls"] == [BETA, GAME]
    assert set(answer) == {
        *VERIFY_FLAGS,
        "responses_create_params",
        "response",
        "reward",
        "num_expected",
        "num_predicted",
        "num_correct",
        "predicted_calls",
    }, "the expected answers and row id are not echoed"


async def test_order_of_the_calls_does_not_matter(server):
    answer = await verify(
        server, [BETA, GAME], call(GAME["name"], GAME["arguments"]), call(BETA["name"], BETA["arguments"], 1)
    )
    assert answer["reward"] == 1.0 and answer["num_correct"] == 2


async def test_a_missing_call_earns_0(server):
    answer = await verify(server, [BETA, GAME], call(BETA["name"], BETA["arguments"]))
    assert answer["reward"] == 0.0
    assert (answer["num_expected"], answer["num_predicted"], answer["num_correct"]) == (2, 1, 1)


async def test_an_extra_call_earns_0_even_when_all_expected_ones_match(server):
    answer = await verify(server, [BETA], call(BETA["name"], BETA["arguments"]), call("other_tool", {}, 1))
    assert answer["reward"] == 0.0
    assert (answer["num_expected"], answer["num_predicted"], answer["num_correct"]) == (1, 2, 1)


async def test_a_duplicate_call_cannot_match_two_expected_calls(server):
    answer = await verify(server, [BETA, BETA], call(BETA["name"], BETA["arguments"]))
    assert answer["num_correct"] == 1 and answer["reward"] == 0.0
    answer = await verify(
        server, [BETA, BETA], call(BETA["name"], BETA["arguments"]), call(BETA["name"], BETA["arguments"], 1)
    )
    assert answer["num_correct"] == 2 and answer["reward"] == 1.0


async def test_matching_is_greedy_in_expected_order_not_optimal(server):
    """The first expected call takes the first unused prediction it accepts, even when another assignment
    would match everything: as the reference scores it."""
    any_giveaway = {"name": "live_giveaways_by_type"}
    answer = await verify(
        server,
        [any_giveaway, BETA],
        call(BETA["name"], BETA["arguments"]),
        call(GAME["name"], GAME["arguments"], 1),
    )
    assert answer["num_correct"] == 1 and answer["reward"] == 0.0


@pytest.mark.parametrize(
    ("arguments", "reward"),
    [
        ({"symbol": "ETH/BTC", "time_period": 14}, 1.0),
        ({"symbol": "ETH/BTC", "time_period": 14, "interval": "1h"}, 1.0),  # extra arguments are allowed
        ({"symbol": "ETH/BTC", "time_period": "14"}, 0.0),  # a string is not the number
        ({"symbol": "eth/btc", "time_period": 14}, 0.0),  # values compare exactly
        ({"symbol": "ETH/BTC"}, 0.0),  # an expected argument is missing
        ({"time_period": 14.0, "symbol": "ETH/BTC"}, 1.0),  # JSON numbers compare by value
    ],
)
async def test_arguments_must_contain_every_expected_value(server, arguments, reward):
    expected = [{"name": "t3ma", "arguments": {"symbol": "ETH/BTC", "time_period": 14}}]
    answer = await verify(server, expected, call("t3ma", arguments))
    assert answer["reward"] == reward
    assert answer["num_correct"] == int(reward)


async def test_a_call_to_another_function_does_not_match(server):
    answer = await verify(server, [BETA], call("live_giveaways", BETA["arguments"]))
    assert answer["reward"] == 0.0 and answer["num_correct"] == 0


@pytest.mark.parametrize("arguments", ["{not json", "[1, 2]", '"beta"', ""])
async def test_arguments_that_are_not_a_json_object_parse_to_no_arguments(server, arguments):
    answer = await verify(server, [BETA], call(BETA["name"], arguments))
    assert answer["predicted_calls"] == [{"name": BETA["name"], "arguments": {}}]
    assert answer["reward"] == 0.0
    no_args = await verify(server, [{"name": BETA["name"], "arguments": {}}], call(BETA["name"], arguments))
    assert no_args["reward"] == 1.0, "a call expected without arguments still matches"


async def test_no_expected_calls_reward_only_a_response_without_calls(server):
    assert (await verify(server, [], message_item("I cannot help with that.")))["reward"] == 1.0
    answer = await verify(server, [], call(BETA["name"], BETA["arguments"]))
    assert answer["reward"] == 0.0 and answer["num_predicted"] == 1


async def test_only_function_calls_count_as_predictions(server):
    output_item = {"type": "function_call_output", "call_id": "call_0", "output": '{"detail":"Not Found"}'}
    answer = await verify(
        server,
        [BETA],
        message_item("Let me look."),
        call(BETA["name"], BETA["arguments"]),
        output_item,
        message_item("Done."),
    )
    assert answer["num_predicted"] == 1 and answer["reward"] == 1.0


async def test_an_expected_call_without_arguments_defaults_to_none_required(server):
    answer = await verify(server, [{"name": "peers"}], call("peers", {"symbol": "AAPL"}))
    assert answer["reward"] == 1.0


async def test_the_tools_are_schemas_only_and_have_no_route(server):
    status, _ = await post_json(server.url + "/live_giveaways_by_type", {"type": "beta"})
    assert status == 404


@pytest.mark.parametrize(
    ("body", "location"),
    [
        ({"responses_create_params": PARAMS, "response": response_with()}, ["body", "expected_answers"]),
        ({"responses_create_params": PARAMS, "expected_answers": []}, ["body", "response"]),
        (
            {
                "responses_create_params": PARAMS,
                "expected_answers": [{"arguments": {}}],
                "response": response_with(),
            },
            ["body", "expected_answers", 0, "name"],
        ),
        (
            {
                "responses_create_params": PARAMS,
                "expected_answers": [{"name": "f", "arguments": "x"}],
                "response": response_with(),
            },
            ["body", "expected_answers", 0, "arguments"],
        ),
    ],
)
async def test_a_bad_verify_body_is_a_422_naming_the_field(server, body, location):
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 422
    assert location in [error["loc"] for error in answer["detail"]]


async def test_aggregate_metrics_reports_pass_at_k_over_the_exact_match_reward(server):
    def rollout(task: int, index: int, reward: float) -> dict:
        return {
            "responses_create_params": PARAMS,
            "response": response_with(),
            "reward": reward,
            "num_correct": int(reward),
            "_ng_task_index": task,
            "_ng_rollout_index": index,
        }

    body = {
        "verify_responses": [rollout(0, 0, 1.0), rollout(0, 1, 0.0), rollout(1, 0, 0.0), rollout(1, 1, 0.0)]
    }
    status, answer = await post_json(server.url + "/aggregate_metrics", body)
    assert status == 200, answer
    agent = answer["agent_metrics"]
    assert agent["pass@2/accuracy"] == pytest.approx(50.0)
    assert agent["pass@1/accuracy"] == pytest.approx(25.0)
    key = answer["key_metrics"]
    assert key["mean/reward"] == pytest.approx(0.25)
    assert key["pass@2/accuracy"] == pytest.approx(50.0)
    assert key["pass@1[avg-of-2]/accuracy"] == pytest.approx(25.0)
    assert "pass@1/accuracy" not in key


def row_of(rollout: dict) -> dict:
    prompt = rollout["responses_create_params"]["input"][-1]["content"]
    return next(row for row in ROWS if row["responses_create_params"]["input"][-1]["content"] == prompt)


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["response"]["id"][-8:])
async def test_recorded_rollouts_reproduce_their_reward_and_counts(server, rollout):
    """Each recorded rollout, verified against its example row, gives the recorded reward and fields."""
    status, answer = await post_json(
        server.url + "/verify", {**row_of(rollout), "response": rollout["response"]}
    )
    assert status == 200, answer
    for field in ("reward", "num_expected", "num_predicted", "num_correct", "predicted_calls"):
        assert answer[field] == rollout[field], field


def test_config_declares_the_environment_and_its_agent():
    check_environment_config(FOLDER, INSTANCE, "agent")
