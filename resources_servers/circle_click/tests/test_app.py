"""circle_click: the example pictures against their rows in-process, the click tool and grading over HTTP
against one real server process started from app.py."""

import random
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from nemo_gym.testing import (
    BASE_VERIFY_FIELDS,
    StartedServer,
    check_environment_config,
    function_call_item,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_resources_server,
)
from resources_servers.circle_click.generate_data import make_row
from resources_servers.circle_count.images import PALETTE, read_data_url

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "circle_click"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
CIRCLES = [
    {"x": 20, "y": 20, "radius": 10, "color": "red"},
    {"x": 60, "y": 60, "radius": 10, "color": "blue"},
]
BLUE = {
    "responses_create_params": ROWS[0]["responses_create_params"],
    "circles": CIRCLES,
    "target_color": "blue",
}
VERIFY_FIELDS = {*BASE_VERIFY_FIELDS, "circles", "target_color", "clicked_x", "clicked_y", "hit"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server(INSTANCE, tmp_path_factory.mktemp(INSTANCE), domain="other") as started:
        yield started


async def verify(server: StartedServer, *items: dict, row: dict = BLUE) -> dict:
    status, body = await post_json(
        server.url + "/verify", {**row, "response": response_with(*items, **A_RESPONSE)}
    )
    assert status == 200, body
    return body


def click(x: object, y: object, call_id: str = "c1") -> dict:
    return function_call_item("click", {"x": x, "y": y}, call_id)


def locations(body: dict) -> list[list]:
    return [error["loc"] for error in body["detail"]]


# --- the example data -----------------------------------------------------------------------------------


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row["target_color"])
def test_each_example_picture_shows_the_circles_its_row_lists(row):
    """The grade comes from `circles`; this holds the picture the model sees to that list."""
    user = row["responses_create_params"]["input"][-1]["content"]
    picture = read_data_url(next(item["image_url"] for item in user if item["type"] == "input_image"))
    question = next(item["text"] for item in user if item["type"] == "input_text")
    assert question.endswith(f"Click on the {row['target_color']} circle.")
    assert len({circle["color"] for circle in row["circles"]}) == len(row["circles"])  # one circle per colour
    for circle in row["circles"]:
        assert picture.getpixel((circle["x"], circle["y"])) == PALETTE[circle["color"]]
        edge = (circle["x"] + circle["radius"] - 1, circle["y"])
        assert picture.getpixel(edge) == PALETTE[circle["color"]]
    assert [tool["name"] for tool in row["responses_create_params"]["tools"]] == ["click"]


def test_the_generator_rebuilds_the_example_rows_from_its_default_seed():
    rng = random.Random(11)
    for row in ROWS:
        made = make_row(rng, 96, 2, 5, 10)
        assert (made["circles"], made["target_color"]) == (row["circles"], row["target_color"])
        assert made["responses_create_params"]["tools"] == row["responses_create_params"]["tools"]


# --- the click tool -------------------------------------------------------------------------------------


async def test_click_answers_the_point_clicked(server):
    assert await post_json(server.url + "/click", {"x": 12, "y": 34}) == (200, {"x": 12, "y": 34})


@pytest.mark.parametrize(
    ("bad_body", "location"),
    [({"y": 3}, ["body", "x"]), ({"x": 1, "y": "down"}, ["body", "y"]), ({}, ["body", "x"])],
)
async def test_click_without_two_integers_is_a_422_naming_the_field(server, bad_body, location):
    status, body = await post_json(server.url + "/click", bad_body)
    assert status == 422 and location in locations(body)


# --- grading over HTTP ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("x", "y"), [(60, 60), (69, 60), (60, 50), (66.5, 66.5)])
async def test_a_click_inside_or_on_the_target_circle_earns_1(server, x, y):
    body = await verify(server, click(x, y), message_item("done"))
    assert set(body) == VERIFY_FIELDS
    assert (body["reward"], body["hit"], body["clicked_x"], body["clicked_y"]) == (1.0, True, x, y)
    assert body["mask_sample"] is False


@pytest.mark.parametrize(("x", "y"), [(20, 20), (71, 60), (68, 68), (0, 0), (-60, -60)])
async def test_a_click_outside_the_target_circle_earns_0(server, x, y):
    body = await verify(server, click(x, y))
    assert (body["reward"], body["hit"], body["clicked_x"]) == (0.0, False, x)


async def test_only_the_first_click_counts(server):
    assert (await verify(server, click(20, 20, "a"), click(60, 60, "b")))["reward"] == 0.0
    assert (await verify(server, click(60, 60, "a"), click(20, 20, "b")))["reward"] == 1.0


async def test_other_tools_before_the_click_are_ignored(server):
    body = await verify(server, function_call_item("zoom", {"x": 1}), click(60, 60))
    assert (body["reward"], body["clicked_x"]) == (1.0, 60)


@pytest.mark.parametrize(
    "items",
    [
        [message_item("The blue circle is at (60, 60).")],
        [function_call_item("click", "{not json")],
        [function_call_item("click", [60, 60])],
        [click("60", "60")],
        [click(60, None)],
        [click(True, 60)],
        [function_call_item("click", '{"x": NaN, "y": 60}')],
        [],
    ],
    ids=["text only", "not json", "a list", "strings", "null y", "boolean x", "nan", "empty output"],
)
async def test_no_usable_click_earns_0_with_no_point(server, items):
    body = await verify(server, *items)
    assert (body["reward"], body["hit"], body["clicked_x"], body["clicked_y"]) == (0.0, False, None, None)


@pytest.mark.parametrize(
    ("change", "location"),
    [
        ({"target_color": "green"}, ["body", "target_color"]),  # not drawn: no circle to grade against
        ({"circles": []}, ["body", "circles"]),
        ({"circles": [{"x": 1, "y": 2, "color": "blue"}]}, ["body", "circles", 0, "radius"]),
        ({"circles": [{"x": 1, "y": 2, "radius": -3, "color": "blue"}]}, ["body", "circles", 0, "radius"]),
        ({"circles": "blue"}, ["body", "circles"]),
    ],
)
async def test_a_malformed_row_is_a_422_naming_the_field(server, change, location):
    row = {**BLUE, **change, "response": response_with(click(60, 60), **A_RESPONSE)}
    status, body = await post_json(server.url + "/verify", row)
    assert status == 422 and location in locations(body)


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: str(rollout["_ng_task_index"]))
async def test_recorded_rollouts_replay_to_their_tool_outputs_and_reward(server, rollout):
    output = rollout["response"]["output"]
    recorded = {item["call_id"]: item["output"] for item in output if item["type"] == "function_call_output"}
    for call in (item for item in output if item["type"] == "function_call"):
        status, body = await post_json(server.url + "/click", orjson.loads(call["arguments"]))
        assert status == 200 and body == orjson.loads(recorded[call["call_id"]])
    status, body = await post_json(server.url + "/verify", rollout)
    assert status == 200 and (body["reward"], body["hit"]) == (rollout["reward"], rollout["hit"])


def test_the_recorded_rollouts_hit_miss_and_do_not_click():
    assert [rollout["reward"] for rollout in ROLLOUTS].count(1.0) not in (0, len(ROLLOUTS))
    assert any(rollout["clicked_x"] is None for rollout in ROLLOUTS)


def test_config_declares_the_environment_and_its_agent():
    check_environment_config(FOLDER, INSTANCE, "other")
