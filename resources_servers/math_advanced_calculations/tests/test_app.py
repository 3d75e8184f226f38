"""math_advanced_calculations over HTTP: the server runs as a real process, started from its own app.py."""

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from nemo_gym.http.client import get_response_json, request
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
INSTANCE = "math_advanced_calculations"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "real_model_rollouts.jsonl")
PARAMS = ROWS[0]["responses_create_params"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server(INSTANCE, tmp_path_factory.mktemp(INSTANCE), domain="math") as started:
        yield started


async def solve(server: StartedServer, name: str, **arguments: float) -> float:
    status, body = await post_json(server.url + f"/{name}", arguments)
    assert status == 200, body
    assert set(body) == {"solution"}
    return body["solution"]


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("multiply", {"a": 3.0, "b": 4.0}, 1.1 * 3.0 * 4.0),
        ("divide", {"a": 3.0, "b": 4.0}, 0.375),
        ("add", {"a": 3.0, "b": 4.0}, 8.2),
        ("subtract", {"a": 3.0, "b": 4.0}, -4.0),
        ("power", {"a": 2.0, "b": 3.0}, 32.0),
        ("log", {"a": 16.0, "base": 2.5}, 2.0),  # base |2.5 + 1.5| = 4
        ("log", {"a": 16.0, "base": -5.5}, 2.0),  # base |-5.5 + 1.5| = 4
        ("sin", {"radians": 0.0}, 1.0),  # sin is the cosine
        ("cos", {"radians": 0.0}, 0.0),  # cos is the sine
        ("cos", {"radians": 1.0}, math.sin(1.0)),
        ("pi", {}, math.e),
        ("negate", {"a": 5.0}, 5.0),  # negation does nothing
        ("return_constant", {"a": -2.5}, -2.5),
    ],
)
async def test_each_tool_computes_its_alternate_universe_value(server, name, arguments, expected):
    assert await solve(server, name, **arguments) == pytest.approx(expected, rel=1e-15)


async def test_integers_in_the_arguments_are_taken_as_floats(server):
    assert await solve(server, "add", a=6, b=10) == 17.2


async def test_null_arguments_are_absent_and_unused_ones_are_ignored(server):
    assert await solve(server, "pi", a=None, b=3.0) == math.e
    status, body = await post_json(server.url + "/negate", {"a": None})
    assert status == 422 and ["body", "a"] in [error["loc"] for error in body["detail"]]


async def test_pi_accepts_a_call_without_a_body(server):
    response = await request("POST", server.url + "/pi")
    assert response.status == 200
    assert (await get_response_json(response)) == {"solution": math.e}


@pytest.mark.parametrize(
    ("name", "body", "fields"),
    [
        ("multiply", {"a": 1.0}, [["body", "b"]]),
        ("log", {"base": 2.0}, [["body", "a"]]),
        ("sin", {"a": 1.0}, [["body", "radians"]]),
        ("power", {}, [["body", "a"], ["body", "b"]]),
        ("add", {"a": "three", "b": 1.0}, [["body", "a"]]),
    ],
)
async def test_a_missing_or_non_numeric_argument_is_a_422_naming_it(server, name, body, fields):
    status, answer = await post_json(server.url + f"/{name}", body)
    assert status == 422
    locations = [error["loc"] for error in answer["detail"]]
    assert all(field in locations for field in fields)


async def test_an_unknown_function_is_a_404(server):
    assert await post_json(server.url + "/sqrt", {"a": 4.0}) == (404, {"detail": "Function not found"})


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("divide", {"a": 1.0, "b": 0.0}),
        ("log", {"a": -1.0, "base": 2.0}),
        ("log", {"a": 2.0, "base": -0.5}),  # base |1| divides by log(1) = 0
        ("power", {"a": 10.0, "b": 400.0}),  # overflow
        ("power", {"a": -8.0, "b": -1.5}),  # (-8) ** 0.5 is not real
        ("multiply", {"a": 1e308, "b": 10.0}),  # inf is not a value
    ],
)
async def test_a_math_error_is_a_500_with_a_detail(server, name, arguments):
    status, body = await post_json(server.url + f"/{name}", arguments)
    assert status == 500
    assert isinstance(body["detail"], str) and body["detail"]


async def test_the_base_routes_are_not_swallowed_by_the_tool_route(server):
    assert await post_json(server.url + "/seed_session", {}) == (200, {})
    status, body = await post_json(server.url + "/verify", {})
    assert status == 422 and ["body", "responses_create_params"] in [e["loc"] for e in body["detail"]]


def response_with_solutions(*solutions: Any) -> dict:
    """A response whose tool outputs carry these solutions (a str is used as the raw output text)."""
    output = []
    for index, solution in enumerate(solutions):
        text = solution if isinstance(solution, str) else orjson.dumps({"solution": solution}).decode()
        output.append(function_call_item("add", "{}", call_id=f"c{index}"))
        output.append({"type": "function_call_output", "call_id": f"c{index}", "output": text})
    output.append(message_item("The values are 1.0 and 2.0."))
    return response_with(*output)


async def verify(server: StartedServer, ground_truth: str, response: dict, **row: Any) -> dict:
    body = {"responses_create_params": PARAMS, "ground_truth": ground_truth, "response": response, **row}
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 200, answer
    return answer


async def test_all_values_among_the_tool_outputs_earn_1_and_only_params_response_reward_come_back(server):
    answer = await verify(
        server, "[2.0, 1.0]", response_with_solutions(1.0, 7.0, 2.0), id=3, depth=1, breadth=2
    )
    assert answer["reward"] == 1.0
    assert set(answer) == {*VERIFY_FLAGS, "responses_create_params", "response", "reward"}


@pytest.mark.parametrize(
    ("ground_truth", "solutions", "reward"),
    [
        ("[1.0, 2.0]", [1.0], 0.0),  # one value missing
        ("[9.9]", [9.900000000000002], 0.0),  # exact float equality, no tolerance
        ("[-3]", [-3.0], 1.0),  # integers in the ground truth compare as floats
        ("[2.718281828459045, 2.718281828459045]", [2.718281828459045], 1.0),  # one output covers repeats
        ("[]", [], 1.0),  # nothing asked, nothing needed
        ("[1.0]", ['{"detail":"Function not found"}', "not json", '{"solution": "x"}', "[1.0]"], 0.0),
        ("[1.0]", ['{"detail":"Function not found"}', '{"solution": 1}'], 1.0),
    ],
)
async def test_reward_needs_every_ground_truth_value_exactly(server, ground_truth, solutions, reward):
    assert (await verify(server, ground_truth, response_with_solutions(*solutions)))["reward"] == reward


async def test_values_written_only_in_the_final_message_do_not_count(server):
    assert (await verify(server, "[1.0, 2.0]", response_with_solutions()))["reward"] == 0.0


@pytest.mark.parametrize("ground_truth", ["not json", '{"a": 1.0}', '["1.0"]', "[true]", "1.0"])
async def test_a_ground_truth_that_is_not_a_json_list_of_numbers_is_a_422_naming_it(server, ground_truth):
    body = {
        "responses_create_params": PARAMS,
        "ground_truth": ground_truth,
        "response": response_with_solutions(),
    }
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 422
    assert ["body", "ground_truth"] in [error["loc"] for error in answer["detail"]]


async def test_a_verify_without_ground_truth_or_response_is_a_422_naming_it(server):
    for missing in ("ground_truth", "response"):
        body = {
            "responses_create_params": PARAMS,
            "ground_truth": "[]",
            "response": response_with_solutions(),
        }
        del body[missing]
        status, answer = await post_json(server.url + "/verify", body)
        assert status == 422 and ["body", missing] in [error["loc"] for error in answer["detail"]]


async def test_aggregate_metrics_reports_pass_at_k(server):
    def rollout(task: int, index: int, reward: float) -> dict:
        return {
            "responses_create_params": PARAMS,
            "response": response_with_solutions(),
            "reward": reward,
            "_ng_task_index": task,
            "_ng_rollout_index": index,
        }

    body = {
        "verify_responses": [rollout(0, 0, 0.0), rollout(0, 1, 1.0), rollout(1, 0, 1.0), rollout(1, 1, 1.0)]
    }
    status, answer = await post_json(server.url + "/aggregate_metrics", body)
    assert status == 200, answer
    assert answer["agent_metrics"]["pass@1/accuracy"] == pytest.approx(75.0)
    key = answer["key_metrics"]
    assert key["mean/reward"] == pytest.approx(0.75)
    assert key["pass@2/accuracy"] == pytest.approx(100.0)
    assert key["pass@1[avg-of-2]/accuracy"] == pytest.approx(75.0)


# The example rows' ground truths, recomputed by chaining the tools in the order the expression reads.
async def row_0(s: StartedServer) -> list[float]:
    return [
        await solve(s, "subtract", a=9.0, b=9.0),
        await solve(s, "divide", a=1.0, b=1.0),
        await solve(s, "multiply", a=1.0, b=9.0),
        await solve(s, "sin", radians=5.0),
    ]


async def row_1(s: StartedServer) -> list[float]:
    inner = await solve(s, "log", a=5.0, base=await solve(s, "divide", a=5.0, b=1.0))
    second = await solve(s, "cos", radians=await solve(s, "subtract", a=5.0, b=inner))
    pi = await solve(s, "pi")
    third = await solve(s, "subtract", a=await solve(s, "negate", a=5.0), b=pi)
    left = await solve(
        s,
        "multiply",
        a=await solve(
            s, "add", a=await solve(s, "divide", a=5.0, b=1.0), b=await solve(s, "log", a=3.0, base=7.0)
        ),
        b=await solve(s, "subtract", a=await solve(s, "negate", a=1.0), b=pi),
    )
    right = await solve(
        s,
        "add",
        a=await solve(s, "divide", a=await solve(s, "multiply", a=6.0, b=7.0), b=7.0),
        b=await solve(
            s, "log", a=await solve(s, "negate", a=6.0), base=await solve(s, "subtract", a=6.0, b=8.0)
        ),
    )
    return [3.0, second, third, await solve(s, "multiply", a=left, b=right)]


async def row_2(s: StartedServer) -> list[float]:
    return [await solve(s, "divide", a=await solve(s, "power", a=4.0, b=6.0), b=await solve(s, "pi"))]


async def row_3(s: StartedServer) -> list[float]:
    pi = await solve(s, "pi")
    add = await solve(s, "add", a=4.0, b=2.0)
    power = await solve(s, "power", a=2.0, b=10.0)
    return [pi, add, power, await solve(s, "divide", a=4.0, b=1.0), pi]


async def row_4(s: StartedServer) -> list[float]:
    first = await solve(s, "divide", a=await solve(s, "sin", radians=3.0), b=3.0)
    second = await solve(s, "sin", radians=await solve(s, "multiply", a=3.0, b=2.0))
    return [await solve(s, "negate", a=await solve(s, "add", a=first, b=second))]


@pytest.mark.parametrize("index", range(5))
async def test_chaining_the_tools_reproduces_each_example_ground_truth(server, index):
    row = ROWS[index]
    assert row["id"] == index
    values = await [row_0, row_1, row_2, row_3, row_4][index](server)
    assert values == orjson.loads(row["ground_truth"]), "exactly the recorded floats"
    rewarded = await verify(server, row["ground_truth"], response_with_solutions(*values), id=row["id"])
    assert rewarded["reward"] == 1.0


# The recorded rollouts are of tasks not in example.jsonl and carry no ground truth; here it is computed
# independently of the server from each prompt's expression, with the skewed semantics.
ROLLOUT_GROUND_TRUTHS = {
    "sin(4.0)": [math.cos(4.0)],
    "8.0 ** 8.0": [8.0**10.0],
    "(6.0 + 10.0)": [6.0 + 10.0 + 1.2],
    "cos((6.0 - 2.0))": [math.sin(6.0 - 2.0 - 3)],
    "sin(log(2.0, 2.0))": [math.cos(math.log(2.0, 3.5))],
}


def ground_truth_of(rollout: dict) -> str:
    prompt = rollout["responses_create_params"]["input"][-1]["content"]
    expression = prompt.removeprefix("Get me the value for ").removesuffix(" using only the given tools.")
    return orjson.dumps(ROLLOUT_GROUND_TRUTHS[expression]).decode()


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["response"]["id"][-8:])
async def test_recorded_rollouts_replay_to_their_tool_outputs_and_reward(server, rollout):
    output = rollout["response"]["output"]
    recorded = {item["call_id"]: item["output"] for item in output if item["type"] == "function_call_output"}
    for call in (item for item in output if item["type"] == "function_call"):
        status, body = await post_json(server.url + f"/{call['name']}", orjson.loads(call["arguments"]))
        assert status == 200 and body == orjson.loads(recorded[call["call_id"]])
    answer = await verify(server, ground_truth_of(rollout), rollout["response"])
    assert answer["reward"] == rollout["reward"]


def test_config_declares_the_environment_and_its_agent():
    check_environment_config(FOLDER, INSTANCE, "math")
