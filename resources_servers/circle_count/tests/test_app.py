"""circle_count: the count reader in-process, the example pictures against their rows, and grading over HTTP
against one real server process started from app.py."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from nemo_gym.testing import (
    BASE_VERIFY_FIELDS,
    StartedServer,
    check_environment_config,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_resources_server,
)
from resources_servers.circle_count.app import read_count
from resources_servers.circle_count.images import PALETTE, read_data_url

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "circle_count"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
CIRCLES = [
    {"x": 10, "y": 10, "radius": 5, "color": "red"},
    {"x": 30, "y": 10, "radius": 5, "color": "red"},
    {"x": 50, "y": 10, "radius": 5, "color": "blue"},
]
TWO_RED = {
    "responses_create_params": ROWS[0]["responses_create_params"],
    "circles": CIRCLES,
    "target_color": "red",
}
VERIFY_FIELDS = {
    *BASE_VERIFY_FIELDS,
    "circles",
    "target_color",
    "predicted_count",
    "expected_count",
    "correct",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server(INSTANCE, tmp_path_factory.mktemp(INSTANCE), domain="other") as started:
        yield started


async def verify(server: StartedServer, text: str, row: dict = TWO_RED) -> dict:
    status, body = await post_json(
        server.url + "/verify", {**row, "response": response_with(message_item(text), **A_RESPONSE)}
    )
    assert status == 200, body
    return body


# --- reading the count (in-process) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("\\boxed{2}", 2),
        ("There are two. \\boxed{ 2 }", 2),
        ("first \\boxed{1}, on second look \\boxed{3}", 3),  # the last box is the answer
        ("\\boxed{0}", 0),
        ("\\boxed{007}", 7),
    ],
)
def test_the_count_is_the_whole_number_in_the_last_box(text, count):
    assert read_count(text) == count


@pytest.mark.parametrize(
    "text",
    [
        "",
        "two",
        "2",
        "\\boxed{}",
        "\\boxed{two}",
        "\\boxed{2.5}",
        "\\boxed{-1}",
        "\\boxed{2",
        "\\boxed{2, 3}",
    ],
)
def test_anything_but_a_boxed_whole_number_is_no_count(text):
    assert read_count(text) is None


# --- the example data -----------------------------------------------------------------------------------


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row["target_color"])
def test_each_example_picture_shows_the_circles_its_row_lists(row):
    """The grade comes from `circles`; this holds the picture the model sees to that list."""
    user = row["responses_create_params"]["input"][-1]["content"]
    image = next(item for item in user if item["type"] == "input_image")
    question = next(item["text"] for item in user if item["type"] == "input_text")
    picture = read_data_url(image["image_url"])
    assert f"How many {row['target_color']} circles" in question
    assert picture.size == (96, 96)
    for circle in row["circles"]:
        assert picture.getpixel((circle["x"], circle["y"])) == PALETTE[circle["color"]]
    drawn = sum(1 for x in range(96) for y in range(96) if picture.getpixel((x, y)) != (255, 255, 255))
    assert drawn > 0.5 * len(row["circles"]) * 3.14 * 8**2  # no circle is missing


def test_the_examples_cover_a_colour_that_is_not_drawn():
    assert any(all(c["color"] != row["target_color"] for c in row["circles"]) for row in ROWS)


# --- grading over HTTP ----------------------------------------------------------------------------------


async def test_the_right_count_earns_1(server):
    body = await verify(server, "Two red ones. \\boxed{2}")
    assert set(body) == VERIFY_FIELDS
    assert (body["reward"], body["correct"], body["predicted_count"], body["expected_count"]) == (
        1.0,
        True,
        2,
        2,
    )
    assert body["mask_sample"] is False


@pytest.mark.parametrize("text", ["\\boxed{3}", "\\boxed{1}", "\\boxed{2} no wait \\boxed{3}"])
async def test_a_wrong_count_earns_0(server, text):
    body = await verify(server, text)
    assert (body["reward"], body["correct"], body["expected_count"]) == (0.0, False, 2)
    assert body["predicted_count"] is not None


@pytest.mark.parametrize("text", ["two red circles", "\\boxed{two}", ""])
async def test_an_answer_without_a_boxed_number_earns_0_with_no_count(server, text):
    body = await verify(server, text)
    assert (body["reward"], body["predicted_count"], body["expected_count"]) == (0.0, None, 2)


async def test_a_colour_that_is_not_drawn_counts_0(server):
    body = await verify(server, "\\boxed{0}", {**TWO_RED, "target_color": "green"})
    assert (body["reward"], body["expected_count"]) == (1.0, 0)


async def test_only_the_target_colour_is_counted(server):
    body = await verify(server, "\\boxed{1}", {**TWO_RED, "target_color": "blue"})
    assert (body["reward"], body["expected_count"]) == (1.0, 1)


@pytest.mark.parametrize(
    ("change", "location"),
    [
        ({"circles": None}, ["body", "circles"]),
        ({"target_color": ""}, ["body", "target_color"]),
        ({"circles": [{"x": 1, "y": 2, "color": "red"}]}, ["body", "circles", 0, "radius"]),
        ({"circles": [{"x": "left", "y": 2, "radius": 3, "color": "red"}]}, ["body", "circles", 0, "x"]),
        ({"circles": [{"x": 1, "y": 2, "radius": 0, "color": "red"}]}, ["body", "circles", 0, "radius"]),
    ],
)
async def test_a_malformed_row_is_a_422_naming_the_field(server, change, location):
    row = {**TWO_RED, **change, "response": response_with(message_item("\\boxed{2}"), **A_RESPONSE)}
    status, body = await post_json(server.url + "/verify", row)
    assert status == 422
    assert location in [error["loc"] for error in body["detail"]]


async def test_a_row_without_target_color_is_a_422_naming_it(server):
    row = {key: value for key, value in TWO_RED.items() if key != "target_color"}
    status, body = await post_json(server.url + "/verify", {**row, "response": A_RESPONSE})
    assert status == 422
    assert ["body", "target_color"] in [error["loc"] for error in body["detail"]]


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: str(rollout["_ng_task_index"]))
async def test_recorded_rollouts_regrade_to_their_reward(server, rollout):
    status, body = await post_json(server.url + "/verify", rollout)
    assert status == 200
    assert (body["reward"], body["predicted_count"]) == (rollout["reward"], rollout["predicted_count"])


def test_the_recorded_rollouts_have_right_and_wrong_answers():
    assert {rollout["reward"] for rollout in ROLLOUTS} == {0.0, 1.0}


def test_config_declares_the_environment_and_its_agent():
    check_environment_config(FOLDER, INSTANCE, "other")


def test_the_generator_rebuilds_the_example_rows_from_its_default_seed():
    """`generate_data.py --seed 7` is how data/example.jsonl was made: same circles, colours and prompts."""
    import random

    from resources_servers.circle_count.generate_data import make_row

    rng = random.Random(7)
    rebuilt = [make_row(rng, 96, 3, 7, 8) for _ in ROWS]
    for made, row in zip(rebuilt, ROWS, strict=True):
        assert (made["circles"], made["target_color"]) == (row["circles"], row["target_color"])
        made_input, row_input = (
            made["responses_create_params"]["input"],
            row["responses_create_params"]["input"],
        )
        assert made_input[0] == row_input[0] and made_input[1]["content"][1] == row_input[1]["content"][1]
