"""gui_coordinate: the point parser and fall-off in-process, the example screens against their rows, and
grading over HTTP against one real server process started from app.py."""

import base64
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

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
from resources_servers.gui_coordinate.app import falloff_reward, parse_point
from resources_servers.gui_coordinate.screens import PNG_DATA_URL_PREFIX, SCREENS, centre

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "gui_coordinate"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
ROW = {"responses_create_params": ROWS[0]["responses_create_params"], "expected_answer": "0.5,0.5"}
VERIFY_FIELDS = {
    *BASE_VERIFY_FIELDS,
    "expected_answer",
    "max_dist",
    "metadata",
    "extracted_x",
    "extracted_y",
    "distance",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server(INSTANCE, tmp_path_factory.mktemp(INSTANCE), domain="other") as started:
        yield started


async def verify(server: StartedServer, *items: dict, row: dict = ROW) -> dict:
    status, body = await post_json(
        server.url + "/verify", {**row, "response": response_with(*items, **A_RESPONSE)}
    )
    assert status == 200, body
    return body


# --- parsing and fall-off (in-process) ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "point"),
    [
        ("<point>(500, 250)</point>", (0.5, 0.25)),
        ("<point>[(500,250)]</point>", (0.5, 0.25)),
        ("Here: <point> ( 0 , 1000 ) </point>.", (0.0, 1.0)),
        ("<point>(100, 100)</point> or maybe <point>(900, 900)</point>", (0.1, 0.1)),  # the first tag
        ("<point>(1500, 20)</point>", (1.5, 0.02)),  # off the image: read, then far from any target
    ],
)
def test_the_first_point_tag_is_read_on_a_1000_scale(text, point):
    assert parse_point(text) == point


@pytest.mark.parametrize(
    "text",
    [
        "",
        "(500, 250)",
        "<point>500, 250</point>",
        "<point>(0.5, 0.25)</point>",
        "<point>(-5, 10)</point>",
        "<point>(5)</point>",
    ],
)
def test_anything_else_is_no_point(text):
    assert parse_point(text) is None


@pytest.mark.parametrize(
    ("distance", "max_dist", "reward"),
    [(0.0, 0.15, 1.0), (0.075, 0.15, 0.25), (0.15, 0.15, 0.0), (0.3, 0.15, 0.0), (0.05, 0.1, 0.25)],
)
def test_the_reward_falls_off_quadratically_to_0_at_max_dist(distance, max_dist, reward):
    assert falloff_reward(distance, max_dist) == pytest.approx(reward)


# --- the example data -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "screen"), list(zip(ROWS, SCREENS, strict=True)), ids=[s.name for s in SCREENS]
)
def test_each_example_row_points_at_the_centre_of_its_drawn_element(row, screen):
    url = row["responses_create_params"]["input"][-1]["content"][0]["image_url"]
    assert url.startswith(PNG_DATA_URL_PREFIX)
    picture = Image.open(io.BytesIO(base64.b64decode(url.removeprefix(PNG_DATA_URL_PREFIX)))).convert("RGB")
    assert row["metadata"]["screen"] == screen.name
    x0, y0, x1, y1 = row["metadata"]["target_box"]
    assert picture.getpixel((x0 + 1, y0 + 1)) == screen.fill  # the element is where the row says
    x, y = (float(v) for v in row["expected_answer"].split(","))
    assert (x, y) == pytest.approx(centre(screen.target), abs=1e-4)
    assert x0 / 128 < x < (x1 + 1) / 128 and y0 / 96 < y < (y1 + 1) / 96


# --- grading over HTTP ----------------------------------------------------------------------------------


async def test_a_point_on_the_target_earns_1(server):
    body = await verify(server, message_item("<point>(500, 500)</point>"))
    assert set(body) == VERIFY_FIELDS
    assert (body["reward"], body["distance"], body["extracted_x"], body["extracted_y"]) == (
        1.0,
        0.0,
        0.5,
        0.5,
    )
    assert body["mask_sample"] is False


async def test_a_near_miss_earns_the_quadratic_share(server):
    body = await verify(server, message_item("<point>(590, 500)</point>"))  # 0.09 away, max_dist 0.15
    assert body["distance"] == pytest.approx(0.09)
    assert body["reward"] == pytest.approx((1 - 0.09 / 0.15) ** 2)


async def test_the_row_max_dist_sets_the_radius(server):
    body = await verify(server, message_item("<point>(590, 500)</point>"), row={**ROW, "max_dist": 0.3})
    assert body["reward"] == pytest.approx((1 - 0.09 / 0.3) ** 2)
    assert (await verify(server, message_item("<point>(590, 500)</point>"), row={**ROW, "max_dist": 0.05}))[
        "reward"
    ] == 0.0


@pytest.mark.parametrize("text", ["<point>(900, 900)</point>", "<point>(500, 650)</point>"])
async def test_a_point_at_or_past_max_dist_earns_0(server, text):
    body = await verify(server, message_item(text))
    assert body["reward"] == 0.0 and body["distance"] >= 0.15


@pytest.mark.parametrize(
    "items",
    [
        [message_item("It is in the middle of the screen.")],
        [message_item("(500, 500)")],
        [function_call_item("click", {"x": 500, "y": 500})],
        [],
    ],
    ids=["prose", "no tag", "a tool call", "empty output"],
)
async def test_no_point_earns_0_with_no_distance(server, items):
    body = await verify(server, *items)
    assert (body["reward"], body["extracted_x"], body["distance"]) == (0.0, None, None)


async def test_the_point_may_be_in_any_assistant_message(server):
    body = await verify(
        server, message_item("Looking...", "m1"), message_item("<point>(500, 500)</point>", "m2")
    )
    assert body["reward"] == 1.0


@pytest.mark.parametrize(
    ("change", "location"),
    [
        ({"expected_answer": "0.5"}, ["body", "expected_answer"]),
        ({"expected_answer": "left,top"}, ["body", "expected_answer"]),
        ({"expected_answer": "nan,0.5"}, ["body", "expected_answer"]),
        ({"expected_answer": None}, ["body", "expected_answer"]),
        ({"max_dist": 0}, ["body", "max_dist"]),
        ({"max_dist": "far"}, ["body", "max_dist"]),
        ({"metadata": [1, 2]}, ["body", "metadata"]),
    ],
)
async def test_a_malformed_row_is_a_422_naming_the_field(server, change, location):
    row = {
        **ROW,
        **change,
        "response": response_with(message_item("<point>(500, 500)</point>"), **A_RESPONSE),
    }
    status, body = await post_json(server.url + "/verify", row)
    assert status == 422
    assert location in [error["loc"] for error in body["detail"]]


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: str(rollout["_ng_task_index"]))
async def test_recorded_rollouts_regrade_to_their_reward(server, rollout):
    status, body = await post_json(server.url + "/verify", rollout)
    assert status == 200
    assert (body["reward"], body["distance"]) == (rollout["reward"], rollout["distance"])


def test_the_recorded_rollouts_span_full_partial_and_no_reward():
    rewards = [rollout["reward"] for rollout in ROLLOUTS]
    assert 0.0 in rewards and any(0.0 < reward < 0.99 for reward in rewards) and max(rewards) > 0.99


def test_config_declares_the_environment_and_its_agent():
    check_environment_config(FOLDER, INSTANCE, "other")
