"""ifbench over HTTP: one real server process started from its own app.py."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nemo_gym.testing import (
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

FOLDER = Path(__file__).resolve().parents[1]
IMPLEMENTATION = "ifbench"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
DEADLINE_S = 2.0
OPTIONS = {"options": "yes/no/maybe"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp(IMPLEMENTATION)
    with run_resources_server(
        IMPLEMENTATION, workdir, domain="instruction_following", grading_timeout_s=DEADLINE_S
    ) as started:
        yield started


def row(ids: list[str], kwargs: list, *items: dict, **fields: Any) -> dict:
    return {
        "responses_create_params": {"input": [{"role": "user", "content": "Say something."}]},
        "prompt": "Say something.",
        "instruction_id_list": ids,
        "kwargs": kwargs,
        **fields,
        "response": response_with(*items, **A_RESPONSE),
    }


async def verify(server: StartedServer, ids: list[str], kwargs: list, *items: dict, **fields: Any) -> dict:
    status, answer = await post_json(server.url + "/verify", row(ids, kwargs, *items, **fields))
    assert status == 200, answer
    return answer


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=[str(rollout["id"]) for rollout in ROLLOUTS])
async def test_recorded_rollouts_verify_to_their_recorded_answer(server, rollout):
    status, body = await post_json(server.url + "/verify", rollout)
    assert status == 200, body
    assert without_verify_flags(body) == rollout


async def test_the_example_rows_grade_the_recorded_responses(server):
    rollout_of_id = {rollout["id"]: rollout for rollout in ROLLOUTS}
    for example in ROWS:
        recorded = rollout_of_id[example["id"]]
        status, body = await post_json(server.url + "/verify", {**example, "response": recorded["response"]})
        assert status == 200, body
        assert body["reward"] == recorded["reward"]
    assert sorted({rollout["reward"] for rollout in ROLLOUTS}) == [0.5, 2 / 3, 1.0], "the recordings differ"


async def test_fraction_is_the_default_and_binary_needs_every_instruction(server):
    ids = ["format:no_whitespace", "format:output_template", "count:numbers"]
    kwargs = [None, {}, {"N": 1}]
    text = message_item("My Answer: 1 My Conclusion: yes Future Outlook: fine")
    fraction = await verify(server, ids, kwargs, text)
    assert fraction["follow_instruction_list"] == [False, True, True]
    assert fraction["reward"] == pytest.approx(2 / 3) and fraction["grading_mode"] == "fraction"
    binary = await verify(server, ids, kwargs, text, grading_mode="binary")
    assert binary["reward"] == 0.0 and binary["follow_all_instructions"] is False


async def test_loose_forgives_a_preamble_line_and_markdown_but_strict_does_not(server):
    body = await verify(server, ["format:options"], [OPTIONS], message_item("Sure, here it is:\n**Maybe**"))
    assert body["follow_instruction_list"] == [False] and body["reward"] == 0.0
    assert body["follow_instruction_list_loose"] == [True] and body["reward_loose"] == 1.0
    assert body["follow_all_instructions_loose"] is True


async def test_ifeval_ids_in_an_ifbench_row_are_checked_too(server):
    body = await verify(
        server, ["punctuation:no_comma", "count:numbers"], [None, {"N": 0}], message_item("a, b")
    )
    assert body["follow_instruction_list"] == [False, True]


@pytest.mark.parametrize(
    "items", [(), (message_item("   "),), (message_item("Maybe"), function_call_item("f", {}))], ids=str
)
async def test_no_final_answer_follows_nothing(server, items):
    body = await verify(server, ["format:options"], [OPTIONS], *items)
    assert body["follow_instruction_list"] == body["follow_instruction_list_loose"] == [False]
    assert body["reward"] == body["reward_loose"] == 0.0


async def test_an_empty_instruction_list(server):
    assert (await verify(server, [], [], message_item("hi")))["reward"] == 0.0
    assert (await verify(server, [], [], message_item("hi"), grading_mode="binary"))["reward"] == 1.0


@pytest.mark.parametrize(
    ("ids", "kwargs", "problem"),
    [
        (["count:nonsense"], [None], "unknown instruction id 'count:nonsense'"),
        (["words:start_verb"], [None], "part-of-speech tagger"),
        (["count:numbers"], [{}], "N: Field required"),
        (["count:numbers"], [{"N": "six"}], "valid integer"),
        (["count:numbers"], [{"N": 1, "percentage": 3}], "percentage: Extra inputs"),
        (["count:numbers", "format:no_whitespace"], [{"N": 1}], "kwargs has 1 entries for 2"),
    ],
)
async def test_a_row_that_cannot_be_checked_is_a_422_saying_why(server, ids, kwargs, problem):
    status, answer = await post_json(server.url + "/verify", row(ids, kwargs, message_item("1")))
    assert status == 422, answer
    assert problem in str(answer["detail"])


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"kwargs": ["N"]}, "kwargs"),
        ({"instruction_id_list": "count:numbers"}, "instruction_id_list"),
        ({"grading_mode": "partial"}, "grading_mode"),
        ({"prompt": None}, "prompt"),
    ],
)
async def test_a_malformed_row_is_a_422_naming_the_field(server, changes, field):
    body = {**row(["count:numbers"], [{"N": 1}], message_item("1")), **changes}
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 422, answer
    assert field in str(answer["detail"])


async def test_a_grading_past_its_deadline_is_masked_and_the_server_keeps_answering(server):
    text = "Relationship matters a great deal here. " * 60_000
    ids = ["sentence:increment"] * 40
    body = await verify(server, ids, [{"small_n": 1}] * 40, message_item(text))
    assert body["mask_sample"] is True and body["failure_kind"], body["failure_reason"]
    assert body["follow_instruction_list"] == [False] * 40
    quick = await verify(server, ids[:1], [{"small_n": 1}], message_item("One. One two."))
    assert quick["reward"] == 1.0 and not quick.get("mask_sample")


async def test_aggregate_metrics_pool_instructions_by_hand(server):
    rollouts = [
        {**rollout, "_ng_task_index": index, "_ng_rollout_index": 0} for index, rollout in enumerate(ROLLOUTS)
    ]
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    # rewards 1, 1, 1, 2/3, 1/2; instructions followed 2+2+1+2+1 of 2+2+1+3+2
    assert body["key_metrics"]["mean/reward"] == pytest.approx((3 + 2 / 3 + 1 / 2) / 5)
    assert body["key_metrics"]["mean/follow_all_instructions"] == pytest.approx(3 / 5)
    assert body["key_metrics"]["instruction_level_accuracy"] == pytest.approx(8 / 10)
    assert body["key_metrics"]["instruction_level_accuracy_loose"] == pytest.approx(8 / 10)


def test_config_declares_the_environment_and_its_agent():
    _, resources, _ = check_environment_config(FOLDER, "ifbench", "instruction_following")
    assert resources.model_extra["grading_timeout_s"] == 10
