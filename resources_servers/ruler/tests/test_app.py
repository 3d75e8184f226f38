"""ruler: the string-match rule in-process, everything else over HTTP against one real server (with a short
grading deadline) started from its own app.py."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

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
    without_verify_flags,
)
from resources_servers.ruler.app import KNOWN_SUBSETS, RulerConfig
from resources_servers.ruler.grading import string_match

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "ruler_resources_server"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
DEADLINE_S = 0.5
VT_ROW = {**ROWS[2], "subset": "vt", "outputs": ["KTR", "QPD", "MWZ", "HBL"]}
QA_ROW = {**ROWS[4], "subset": "qa_1", "outputs": ["1897", "in 1897"]}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp("ruler")
    with run_resources_server(
        INSTANCE, workdir, implementation="ruler", domain="long_context", grading_timeout_s=DEADLINE_S
    ) as started:
        yield started


async def verify(server: StartedServer, row: dict, *items: dict) -> dict:
    status, body = await post_json(
        server.url + "/verify", {**row, "response": response_with(*items, **A_RESPONSE)}
    )
    assert status == 200, body
    return body


# --- the rule (in-process) --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("subset", "prediction", "references", "score"),
    [
        ("qa_1", "It opened in 1897.", ["1897", "eighteen ninety-seven"], 1.0),
        ("qa_2", "No idea", ["1897", "1898"], 0.0),
        ("qa_2", "1897 and 1898", ["1897", "1898"], 1.0),
        ("vt", "KTR, QPD", ["KTR", "QPD", "MWZ", "HBL"], 0.5),
        ("niah_single_1", "The number is 4817263.", ["4817263"], 1.0),
        ("cwe", "HARBOR lantern", ["harbor", "Lantern", "meadow", "pebble"], 0.5),  # case-insensitive
        ("some_new_subset", "a b", ["a", "c"], 0.5),  # any subset but qa_1 / qa_2 counts the share
        ("vt", "  ", [" "], 0.0),  # the prediction is stripped first
    ],
)
def test_qa_subsets_need_any_reference_and_the_others_score_the_share_found(
    subset, prediction, references, score
):
    assert string_match(subset, prediction, references) == score


# --- /verify ----------------------------------------------------------------------------------------


async def test_the_reward_is_also_reported_under_the_subset_name(server):
    body = await verify(server, VT_ROW, message_item("They are: KTR, QPD and MWZ."))
    assert body["reward"] == 0.75 and body["vt"] == 0.75 and body["subset"] == "vt"
    assert set(body) == {*VERIFY_FLAGS, "responses_create_params", "response", "reward", "subset", "vt"}


async def test_a_qa_answer_with_any_reference_earns_1(server):
    body = await verify(server, QA_ROW, message_item(" 1897"))
    assert body["reward"] == 1.0 and body["qa_1"] == 1.0


async def test_an_unknown_subset_is_graded_by_share_and_gets_no_subset_field(server):
    body = await verify(server, {**VT_ROW, "subset": "reward"}, message_item("KTR"))
    assert body["reward"] == 0.25
    assert set(body) == {*VERIFY_FLAGS, "responses_create_params", "response", "reward", "subset"}


async def test_the_answer_is_the_output_text_of_every_message_joined(server):
    body = await verify(
        server, VT_ROW, message_item("K"), message_item("TR Q", id="msg_2"), message_item("PD", id="m3")
    )
    assert body["reward"] == 0.5


@pytest.mark.parametrize(
    "items",
    [(), (function_call_item("lookup", {"q": "x"}),), (message_item(""),)],
    ids=["none", "call", "empty"],
)
async def test_an_answer_without_text_scores_0(server, items):
    assert (await verify(server, QA_ROW, *items))["reward"] == 0.0


async def test_a_grading_past_its_deadline_scores_0_and_the_server_keeps_answering(server):
    """A 4 MB answer searched for 1000 near-miss references takes seconds; the deadline is 0.5 s."""
    row = {**VT_ROW, "outputs": ["a" * 59 + "b"] * 1000}
    body = await verify(server, row, message_item("a" * 4_000_000))
    assert body["reward"] == 0.0 and body["vt"] == 0.0
    assert "exceeded" in server.log()
    assert (await verify(server, QA_ROW, message_item("1897")))["reward"] == 1.0


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"outputs": []}, "outputs"),
        ({"outputs": "1897"}, "outputs"),
        ({"outputs": [1897]}, "outputs"),
        ({"length": "long"}, "length"),
        ({"subset": None}, "subset"),
    ],
)
async def test_a_malformed_row_is_a_422_naming_the_field(server, change, field):
    status, body = await post_json(server.url + "/verify", {**QA_ROW, **change, "response": A_RESPONSE})
    assert status == 422 and field in [error["loc"][1] for error in body["detail"]]


async def test_aggregate_metrics_report_a_mean_per_subset(server):
    results = [
        await verify(server, VT_ROW, message_item("KTR QPD")),
        await verify(server, QA_ROW, message_item("1897")),
        await verify(server, QA_ROW, message_item("1900")),
    ]
    rollouts = [{**result, "_ng_task_index": i, "_ng_rollout_index": 0} for i, result in enumerate(results)]
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    assert body["key_metrics"]["mean/vt"] == 0.5
    assert body["key_metrics"]["mean/qa_1"] == 0.5
    assert body["key_metrics"]["mean/reward"] == pytest.approx(0.5)


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["subset"])
async def test_recorded_rollouts_verify_to_their_recorded_answer(server, rollout):
    row = next(row for row in ROWS if row["subset"] == rollout["subset"])
    status, body = await post_json(server.url + "/verify", {**row, "response": rollout["response"]})
    assert status == 200, body
    assert without_verify_flags(body) == rollout


def test_config_declares_the_environment_and_its_agent():
    _, resources, _ = check_environment_config(FOLDER, INSTANCE, "long_context")
    assert resources.model_extra["grading_timeout_s"] == 10
    assert {row["agent_ref"]["name"] for row in ROWS} == {"ruler_simple_agent"}
    assert {row["subset"] for row in ROWS} <= KNOWN_SUBSETS


@pytest.mark.parametrize("deadline", [0, -1])
def test_a_non_positive_grading_deadline_is_refused(deadline):
    with pytest.raises(ValidationError, match="grading_timeout_s"):
        RulerConfig(host="127.0.0.1", port=0, entrypoint="app.py", name="x", grading_timeout_s=deadline)
