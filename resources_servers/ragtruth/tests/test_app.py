"""ragtruth: the answer reader in-process, everything else over HTTP against one real server."""

import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from nemo_gym.testing import (
    BASE_VERIFY_FIELDS,
    LINEAR_CPU_BUDGET_S,
    StartedServer,
    check_environment_config,
    cpu_time_of,
    function_call_item,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_resources_server,
    without_verify_flags,
)
from resources_servers.ragtruth.grading import parse_answer, strip_json_fence, strip_reasoning

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "ragtruth"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
HALU_ROW, CLEAN_ROW = ROWS[0], ROWS[1]
FLAGGED = '{"hallucination list": ["opens at 8 a.m."]}'
NONE_FOUND = '{"hallucination list": []}'


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp("ragtruth")
    with run_resources_server(INSTANCE, workdir, domain="knowledge") as started:
        yield started


async def verify(server: StartedServer, *items: dict, row: dict = HALU_ROW) -> dict:
    status, body = await post_json(
        server.url + "/verify", {**row, "response": response_with(*items, **A_RESPONSE)}
    )
    assert status == 200, body
    return body


# --- reading the answer (in-process) ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cleaned"),
    [
        ("<think>hmm</think> {}", "{}"),
        ("<THINK>a</Think>x<think>b</think>y", "xy"),
        ("reasoning without an opening tag</think>\n  {}", "{}"),
        ("<think>a</think> b </think> c", "c"),  # a stray closing tag drops everything before it
        ("<think> {} ", "{}"),  # a stray opening tag is dropped alone
        ("<think>never closed <think>still not", "never closed still not"),
    ],
)
def test_reasoning_blocks_and_stray_tags_are_removed(text, cleaned):
    assert strip_reasoning(text) == cleaned


def reference_strip(text: str) -> str:
    """The rule as backtracking patterns: fine for short texts, quadratic on long ones."""
    text = re.sub(r"<think>.*?</think>", "", text, flags=re.DOTALL | re.IGNORECASE)
    text = re.sub(r".*</think>\s*", "", text, flags=re.DOTALL | re.IGNORECASE)
    return re.sub(r"<think>\s*", "", text, flags=re.IGNORECASE).strip()


def test_the_reasoning_stripper_agrees_with_the_patterns_on_random_short_texts():
    rng = random.Random(7)
    pieces = ["<think>", "</think>", "<THINK>", " ", "\n", "a", "{}"]
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(10)))
        assert strip_reasoning(text) == reference_strip(text), repr(text)


def test_removing_reasoning_is_linear_in_the_text():
    cleaned, seconds = cpu_time_of(strip_reasoning, "<think>" * 200_000 + "x" * 200_000)
    assert cleaned == "x" * 200_000 and seconds < LINEAR_CPU_BUDGET_S


@pytest.mark.parametrize(
    ("text", "inside"),
    [
        ('```json\n{"a": 1}\n```', '{"a": 1}'),
        ('```JSON {"a": 1}```', '{"a": 1}'),
        ('Here it is:\n```\n{"a": 1}\n```\nDone.', '{"a": 1}'),
        ("``` ``` then text", "``` ``` then text"),  # an empty first block: the text as it was
        ('{"a": 1}', '{"a": 1}'),
    ],
)
def test_a_json_fence_is_removed(text, inside):
    assert strip_json_fence(text) == inside


def test_only_a_json_object_is_an_answer():
    assert parse_answer(FLAGGED) == {"hallucination list": ["opens at 8 a.m."]}
    assert parse_answer('["a"]') is None and parse_answer("not json") is None and parse_answer("") is None
    assert parse_answer("[" * 100_000) is None


# --- /verify ----------------------------------------------------------------------------------------


async def test_flagging_a_hallucinated_case_earns_1_and_the_answer_echoes_the_row(server):
    body = await verify(server, message_item(FLAGGED))
    assert body["reward"] == 1.0
    assert (body["is_halu"], body["pred_halu"], body["parse_fail"]) == (1, 1, 0)
    assert body["extracted"] == '["opens at 8 a.m."]' and body["task_type"] == "QA"
    assert set(body) == {
        *BASE_VERIFY_FIELDS,
        "task_type",
        "is_halu",
        "pred_halu",
        "parse_fail",
        "extracted",
        "agent_ref",
    }


async def test_the_verdict_must_match_the_gold_label(server):
    assert (await verify(server, message_item(NONE_FOUND)))["reward"] == 0.0
    assert (await verify(server, message_item(NONE_FOUND), row=CLEAN_ROW))["reward"] == 1.0
    assert (await verify(server, message_item(FLAGGED), row=CLEAN_ROW))["reward"] == 0.0


async def test_reasoning_and_fences_are_peeled_before_reading(server):
    text = '<think>The hours differ.</think>\n```json\n{"hallucination list": ["8 a.m."]}\n```'
    body = await verify(server, message_item(text))
    assert body["reward"] == 1.0 and body["extracted"] == '["8 a.m."]'


async def test_an_unreadable_answer_counts_as_none_found_and_is_flagged(server):
    for items in [(message_item("There is a mistake about the hours."),), (function_call_item("f", {}),)]:
        halu = await verify(server, *items)
        assert (halu["reward"], halu["pred_halu"], halu["parse_fail"], halu["extracted"]) == (0.0, 0, 1, "")
        assert (await verify(server, *items, row=CLEAN_ROW))["reward"] == 1.0


async def test_a_list_that_is_not_a_list_counts_as_none_found(server):
    body = await verify(server, message_item('{"hallucination list": "opens at 8"}'))
    assert (body["pred_halu"], body["parse_fail"], body["extracted"]) == (0, 0, "")


async def test_the_extracted_list_is_cut_at_500_characters(server):
    body = await verify(server, message_item('{"hallucination list": ["' + "x" * 900 + '"]}'))
    assert len(body["extracted"]) == 500 and body["reward"] == 1.0


@pytest.mark.parametrize(
    ("change", "field"),
    [({"is_halu": "maybe"}, "is_halu"), ({"is_halu": None}, "is_halu"), ({"task_type": ["QA"]}, "task_type")],
)
async def test_a_malformed_row_is_a_422_naming_the_field(server, change, field):
    status, body = await post_json(server.url + "/verify", {**HALU_ROW, **change, "response": A_RESPONSE})
    assert status == 422 and ["body", field] in [error["loc"] for error in body["detail"]]


async def test_a_row_without_a_gold_label_is_a_422(server):
    row = {key: value for key, value in HALU_ROW.items() if key != "is_halu"}
    status, body = await post_json(server.url + "/verify", {**row, "response": A_RESPONSE})
    assert status == 422 and ["body", "is_halu"] in [error["loc"] for error in body["detail"]]


# --- metrics, recorded data, config -----------------------------------------------------------------


async def test_aggregate_metrics_give_the_hallucinated_class_f1_overall_and_per_task_type(server):
    summary_row = {**HALU_ROW, "task_type": "Summary"}
    results = [
        await verify(server, message_item(FLAGGED)),  # TP
        await verify(server, message_item(FLAGGED), row=CLEAN_ROW),  # FP
        await verify(server, message_item("no idea"), row=summary_row),  # FN, parse failure
        await verify(server, message_item(NONE_FOUND), row=CLEAN_ROW),  # TN
    ]
    rollouts = [{**result, "_ng_task_index": i, "_ng_rollout_index": 0} for i, result in enumerate(results)]
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    metrics = body["agent_metrics"]
    assert (metrics["precision"], metrics["recall"]) == (0.5, 0.5) and metrics["f1"] == pytest.approx(0.5)
    assert metrics["mean_reward"] == 0.5 and metrics["count"] == 4 and metrics["parse_fail_rate"] == 0.25
    assert metrics["task_type/QA/precision"] == 0.5 and metrics["task_type/QA/recall"] == 1.0
    assert metrics["task_type/QA/accuracy"] == pytest.approx(2 / 3) and metrics["task_type/QA/count"] == 3
    assert metrics["task_type/Summary/f1"] == 0.0 and metrics["task_type/Summary/count"] == 1
    key = body["key_metrics"]
    assert key["f1"] == metrics["f1"] and key["task_type/QA/accuracy"] == metrics["task_type/QA/accuracy"]
    assert "task_type/QA/count" not in key


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: str(rollout["_ng_task_index"]))
async def test_recorded_rollouts_verify_to_their_recorded_answer(server, rollout):
    status, body = await post_json(server.url + "/verify", rollout)
    assert status == 200, body
    assert without_verify_flags(body) == without_verify_flags({key: rollout[key] for key in body})


def test_config_declares_the_environment_and_its_agent():
    _, resources, _ = check_environment_config(FOLDER, INSTANCE, "knowledge")
    assert resources.think_tag == "think"
    assert {row["agent_ref"]["name"] for row in ROWS} == {"ragtruth_simple_agent"}
