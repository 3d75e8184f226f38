"""image_tools: reading tool calls and scoring arguments in-process, the example rows, and grading over HTTP
against real server processes started from app.py (default config, and continuous reward with exact names)."""

import base64
import io
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from PIL import Image

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
from resources_servers.image_tools.grading import argument_score, final_answer, iou, same_target
from resources_servers.image_tools.tool_calls import ToolCall, calls_in_text

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "image_tools_pivot"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
PARAMS = ROWS[0]["responses_create_params"]
ZOOM = {
    "name": "image_zoom_in_tool",
    "arguments": {"bbox_2d": [100, 100, 300, 300], "img_idx": 0, "label": "x"},
}
ZOOM_ROW = {"responses_create_params": PARAMS, "uuid": 7, "expected_action": ZOOM}
ANSWER_ROW = {
    "responses_create_params": PARAMS,
    "expected_action": {"name": "__answer__", "arguments": {"answer": "Blue"}},
}


def xml_call(name: str, **parameters: object) -> str:
    blocks = "".join(
        f"<parameter={key}>\n{value if isinstance(value, str) else orjson.dumps(value).decode()}\n</parameter>\n"
        for key, value in parameters.items()
    )
    return f"<tool_call>\n<function={name}>\n{blocks}</function>\n</tool_call>"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server(
        INSTANCE, tmp_path_factory.mktemp(INSTANCE), implementation="image_tools", domain="agent"
    ) as started:
        yield started


@pytest.fixture(scope="module")
def continuous_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server(
        "image_tools_continuous",
        tmp_path_factory.mktemp("continuous"),
        implementation="image_tools",
        domain="agent",
        reward_mode="continuous",
        unify_region_inspect_tools=False,
        penalize_extra_tool_calls=False,
    ) as started:
        yield started


async def verify(server: StartedServer, *items: dict, row: dict = ZOOM_ROW) -> dict:
    status, body = await post_json(
        server.url + "/verify", {**row, "response": response_with(*items, **A_RESPONSE)}
    )
    assert status == 200, body
    assert body["mask_sample"] is False and body["failure_reason"] is None
    return body


# --- reading calls (in-process) -------------------------------------------------------------------------


def test_xml_calls_are_read_with_json_values_and_plain_strings():
    text = "I look closer.\n" + xml_call(
        "image_zoom_in_tool", bbox_2d=[1, 2, 3, 4], img_idx=0, label="the sign"
    )
    assert calls_in_text(text) == [
        ToolCall("image_zoom_in_tool", {"bbox_2d": [1, 2, 3, 4], "img_idx": 0, "label": "the sign"})
    ]


def test_json_calls_in_tool_call_blocks_are_read_too():
    text = '<tool_call>{"name": "image_flip_tool", "arguments": "{\\"axis\\": \\"vertical\\"}"}</tool_call>'
    assert calls_in_text(text) == [ToolCall("image_flip_tool", {"axis": "vertical"})]


@pytest.mark.parametrize(
    "text",
    [
        "<think>" + xml_call("image_rotate_tool", degrees=90) + "</think>No tool needed. \\boxed{4}",
        "<tool_call>not a call</tool_call>",
        '<tool_call>{"arguments": {}}</tool_call>',
        "<tool_call>\n<function=image_rotate_tool>\n<parameter=degrees>90</parameter>",  # never closed
    ],
    ids=["only while thinking", "garbage", "json without a name", "unclosed"],
)
def test_calls_that_were_not_made_are_not_read(text):
    assert calls_in_text(text) == []


# --- scoring arguments (in-process) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("family", "got", "expected", "score"),
    [
        ("bbox", {"bbox_2d": [0, 0, 100, 100]}, {"bbox_2d": [0, 0, 100, 100]}, 1.0),
        ("bbox", {"bbox_2d": [100, 100, 0, 0]}, {"bbox_2d": [0, 0, 100, 100]}, 1.0),  # corners in any order
        ("bbox", {"bbox_2d": [0, 0, 100, 50]}, {"bbox_2d": [0, 0, 100, 100]}, 0.5),
        ("bbox", {"bbox_2d": "[0, 0, 100, 100]"}, {"bbox_2d": [0, 0, 100, 100]}, 1.0),
        ("bbox", {"bbox_2d": [5, 1000, 1000, 1000]}, {"bbox_2d": [5, 1000, 1000, 1000]}, 1.0),  # zero area
        ("bbox", {"bbox_2d": [1, 2, 3]}, {"bbox_2d": [0, 0, 100, 100]}, 0.0),
        ("bbox", {}, {"bbox_2d": "wide"}, 1.0),  # the demonstration's box is unreadable: cannot count
        ("point", {"point_2d": [300, 400]}, {"point_2d": [0, 0]}, 0.5),
        ("point", {"point_2d": [0, 0]}, {"point_2d": [2000, 0]}, 0.0),
        ("color", {"color": [255, 0, 0]}, {"color": [0, 0, 0]}, 2 / 3),
        ("scalar", {"degrees": -90}, {"degrees": 270}, 1.0),
        ("scalar", {"degrees": 90}, {"degrees": 270}, 0.0),
        ("scalar", {"axis": " Horizontal"}, {"axis": "horizontal"}, 1.0),
        ("pair", {"alpha": 0.5}, {"alpha": 0.7}, 0.0),
        ("pair", {}, {"alpha": 0.7}, 1.0),
    ],
)
def test_each_family_scores_its_primary_argument(family, got, expected, score):
    assert argument_score(family, got, expected, 1e-6)[0] == pytest.approx(score)


def test_iou_of_disjoint_boxes_is_0():
    assert iou((0, 0, 10, 10), (20, 20, 30, 30)) == 0.0


@pytest.mark.parametrize(
    ("family", "got", "expected", "same"),
    [
        ("bbox", {"img_idx": 1}, {"img_idx": 0}, False),
        ("bbox", {}, {"img_idx": 0}, True),
        ("pair", {"img_idx_a": 0, "img_idx_b": 2}, {"img_idx_a": 0, "img_idx_b": 1}, False),
        ("multi", {"img_indices": [2, 0, 1]}, {"img_indices": [0, 1, 2]}, True),
        ("multi", {"img_indices": [0, 1]}, {"img_indices": [0, 1, 2]}, False),
    ],
)
def test_the_target_is_the_same_images(family, got, expected, same):
    assert same_target(family, got, expected) is same


@pytest.mark.parametrize(
    ("text", "answer"),
    [("\\boxed{4}", "4"), ("<think>\\boxed{3}</think> Answer: 4.", "4"), ("nothing to see", None)],
)
def test_the_final_answer_is_read_after_the_reasoning(text, answer):
    assert final_answer(text) == answer


# --- the example data -----------------------------------------------------------------------------------


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row["uuid"])
def test_each_example_row_has_small_pictures_and_an_action(row):
    images = [
        item
        for item in row["responses_create_params"]["input"][-1]["content"]
        if item["type"] == "input_image"
    ]
    assert images
    for image in images:
        picture = Image.open(io.BytesIO(base64.b64decode(image["image_url"].split(",", 1)[1])))
        assert picture.size == (96, 96)
    assert row["expected_action"]["name"]
    assert "tools" not in row["responses_create_params"]  # calls are written in the text


def test_the_diff_example_pictures_really_differ():
    row = next(row for row in ROWS if row["uuid"] == "diff-room")
    first, second = (
        Image.open(io.BytesIO(base64.b64decode(item["image_url"].split(",", 1)[1]))).convert("RGB")
        for item in row["responses_create_params"]["input"][-1]["content"]
        if item["type"] == "input_image"
    )
    assert first.getpixel((71, 37)) != second.getpixel((71, 37)) and first.getpixel(
        (30, 30)
    ) == second.getpixel((30, 30))


# --- grading over HTTP ----------------------------------------------------------------------------------


async def test_the_demonstrated_call_earns_1(server):
    body = await verify(
        server,
        message_item(xml_call("image_zoom_in_tool", bbox_2d=[100, 100, 300, 300], img_idx=0, label="sign")),
    )
    assert (body["reward"], body["failure_code"], body["argument_score"], body["argument_detail"]) == (
        1.0,
        "none",
        1.0,
        "exact_bbox",
    )
    assert (body["tool_name_match"], body["target_match"], body["tool_family"], body["uuid"]) == (
        True,
        True,
        "bbox",
        7,
    )


async def test_a_structured_function_call_is_graded_like_a_text_call(server):
    body = await verify(
        server, function_call_item("image_zoom_in_tool", {"bbox_2d": [100, 100, 300, 280], "img_idx": 0})
    )
    assert body["reward"] == 1.0 and body["argument_score"] == pytest.approx(0.9)


async def test_crop_counts_as_zoom_by_default_but_not_when_names_must_match(server, continuous_server):
    call = message_item(xml_call("image_crop_tool", bbox_2d=[100, 100, 300, 300], img_idx=0))
    assert (await verify(server, call))["reward"] == 1.0
    body = await verify(continuous_server, call)
    assert (body["reward"], body["failure_code"]) == (0.0, "tool_name_mismatch")


async def test_a_box_below_the_threshold_earns_0_in_binary_and_its_iou_in_continuous(
    server, continuous_server
):
    call = message_item(xml_call("image_zoom_in_tool", bbox_2d=[100, 100, 300, 160], img_idx=0))  # IoU 0.3
    body = await verify(server, call)
    assert (body["reward"], body["failure_code"], body["argument_score"]) == (
        0.0,
        "argument_below_threshold",
        pytest.approx(0.3),
    )
    assert (await verify(continuous_server, call))["reward"] == pytest.approx(0.3)


@pytest.mark.parametrize(
    ("items", "code"),
    [
        ([message_item(xml_call("image_rotate_tool", degrees=90, img_idx=0))], "tool_name_mismatch"),
        (
            [message_item(xml_call("image_zoom_in_tool", bbox_2d=[100, 100, 300, 300], img_idx=1))],
            "target_mismatch",
        ),
        ([message_item("It is a stop sign. \\boxed{stop}")], "no_tool_call_in_rollout"),
        ([], "no_tool_call_in_rollout"),
    ],
    ids=["another tool", "another image", "answered instead", "empty output"],
)
async def test_a_wrong_decision_earns_0_with_its_code(server, items, code):
    body = await verify(server, *items)
    assert (body["reward"], body["failure_code"]) == (0.0, code)


async def test_a_burst_of_calls_earns_0_unless_extra_calls_are_allowed(server, continuous_server):
    right = xml_call("image_zoom_in_tool", bbox_2d=[100, 100, 300, 300], img_idx=0)
    burst = message_item(right + "\n" + xml_call("image_rotate_tool", degrees=90, img_idx=0))
    body = await verify(server, burst)
    assert (body["reward"], body["failure_code"], body["num_rollout_tool_calls"]) == (
        0.0,
        "extra_tool_calls",
        2,
    )
    assert (await verify(continuous_server, burst))["reward"] == 1.0


@pytest.mark.parametrize(
    ("items", "reward", "code"),
    [
        ([message_item("The car is blue. \\boxed{ blue }")], 1.0, "none"),
        ([message_item("Answer: BLUE.")], 1.0, "none"),
        ([message_item("\\boxed{red}")], 0.0, "answer_incorrect"),
        ([message_item("It is a colour.")], 0.0, "answer_missing"),
        (
            [message_item(xml_call("color_at_tool", point_2d=[1, 2], img_idx=0) + " \\boxed{blue}")],
            0.0,
            "tool_call_when_answer_expected",
        ),
    ],
)
async def test_an_answer_turn_needs_the_right_answer_and_no_tool(server, items, reward, code):
    body = await verify(server, *items, row=ANSWER_ROW)
    assert (body["reward"], body["failure_code"], body["tool_family"]) == (reward, code, "answer")


@pytest.mark.parametrize(
    "row",
    [
        {"responses_create_params": PARAMS, "metadata": {"expected_action": ZOOM}},
        {"responses_create_params": PARAMS, "expected_answer": orjson.dumps(ZOOM).decode()},
        {
            "responses_create_params": PARAMS,
            "expected_action": {**ZOOM, "arguments": orjson.dumps(ZOOM["arguments"]).decode()},
        },
    ],
    ids=["in metadata", "in expected_answer", "string arguments"],
)
async def test_the_expected_action_may_come_from_metadata_or_expected_answer(server, row):
    body = await verify(
        server, message_item(xml_call("image_zoom_in_tool", bbox_2d=[100, 100, 300, 300], img_idx=0)), row=row
    )
    assert (body["reward"], body["expected_tool_name"]) == (1.0, "image_zoom_in_tool")


@pytest.mark.parametrize(
    ("change", "location"),
    [
        ({"expected_action": None}, ["body"]),
        ({"expected_action": {"arguments": {}}}, ["body"]),
        ({"expected_action": "zoom"}, ["body", "expected_action"]),
        ({"uuid": [1]}, ["body", "uuid", "str"]),
    ],
)
async def test_a_row_without_a_usable_expected_action_is_a_422(server, change, location):
    row = {**ZOOM_ROW, **change, "response": response_with(message_item("x"), **A_RESPONSE)}
    status, body = await post_json(server.url + "/verify", row)
    assert status == 422
    assert location in [error["loc"] for error in body["detail"]]


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["uuid"])
async def test_recorded_rollouts_regrade_to_their_reward(server, rollout):
    status, body = await post_json(server.url + "/verify", rollout)
    assert status == 200
    assert (body["reward"], body["failure_code"]) == (rollout["reward"], rollout["failure_code"])


def test_config_declares_the_environment_and_its_agent():
    _, resources, agent = check_environment_config(
        FOLDER, INSTANCE, "agent", agent_instance="image_tools_pivot_agent"
    )
    assert agent["max_steps"] == 1
