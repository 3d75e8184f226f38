"""instruction_following over HTTP: one real server process started from its own app.py."""

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
IMPLEMENTATION = "instruction_following"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
DEADLINE_S = 2.0
REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "My answer is yes."}],
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp(IMPLEMENTATION)
    with run_resources_server(
        IMPLEMENTATION, workdir, domain="instruction_following", grading_timeout_s=DEADLINE_S
    ) as started:
        yield started


async def verify(server: StartedServer, ids: list[str], kwargs: list, *items: dict, **row: Any) -> dict:
    body = {
        "responses_create_params": {"input": [{"role": "user", "content": "Say something."}]},
        "prompt": "Say something.",
        "instruction_id_list": ids,
        "kwargs": kwargs,
        **row,
        "response": response_with(*items, **A_RESPONSE),
    }
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 200, answer
    return answer


TITLE_AND_SHORT = (
    ["detectable_format:title", "punctuation:no_comma", "length_constraints:number_words"],
    [None, {}, {"num_words": 5, "relation": "less than"}],
)


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=[str(rollout["kwargs"]) for rollout in ROLLOUTS])
async def test_recorded_rollouts_verify_to_their_recorded_reward_and_verdicts(server, rollout):
    status, body = await post_json(server.url + "/verify", rollout)
    assert status == 200, body
    assert body["reward"] == rollout["reward"]
    assert body["follow_instruction_list"] == rollout["follow_instruction_list"]
    assert body["follow_all_instructions"] == rollout["follow_all_instructions"]
    assert set(without_verify_flags(body)) == set(rollout), "the answer has the recorded fields, no more"
    assert body["kwargs"] == rollout["kwargs"], "kwargs are echoed as sent, nulls included"


async def test_the_example_rows_with_their_ids_grade_the_recorded_responses(server):
    rollout_of_prompt = {rollout["prompt"]: rollout for rollout in ROLLOUTS}
    for row in ROWS:
        rollout = rollout_of_prompt[row["prompt"]]
        status, body = await post_json(server.url + "/verify", {**row, "response": rollout["response"]})
        assert status == 200, body
        assert body["follow_instruction_list"] == rollout["follow_instruction_list"]
        assert "id" not in body and "grading_mode" not in body


async def test_binary_needs_every_instruction_and_fraction_counts_each(server):
    text = message_item("<<Title>> one, two")
    binary = await verify(server, *TITLE_AND_SHORT, text)
    assert binary["follow_instruction_list"] == [True, False, True]
    assert binary["reward"] == 0.0 and binary["follow_all_instructions"] is False
    fraction = await verify(server, *TITLE_AND_SHORT, text, grading_mode="fraction")
    assert fraction["reward"] == pytest.approx(2 / 3) and fraction["follow_all_instructions"] is False
    everything = await verify(
        server, *TITLE_AND_SHORT, message_item("<<Title>> one two"), grading_mode="fraction"
    )
    assert everything["reward"] == 1.0 and everything["follow_all_instructions"] is True


@pytest.mark.parametrize(("mode", "reward"), [("binary", 1.0), ("fraction", 0.0)])
async def test_an_empty_instruction_list(server, mode, reward):
    body = await verify(server, [], [], message_item("anything"), grading_mode=mode)
    assert (
        body["reward"] == reward and body["follow_instruction_list"] == [] and body["follow_all_instructions"]
    )


async def test_an_unknown_id_is_not_followed_and_logged_once(server):
    ids = ["punctuation:no_comma", "keywords:no_such_check"]
    for _ in range(2):
        body = await verify(server, ids, [{}, {"x": 1}], message_item("fine"), grading_mode="fraction")
        assert body["follow_instruction_list"] == [True, False] and body["reward"] == 0.5
    assert server.log().count("keywords:no_such_check") == 1


async def test_bad_kwargs_are_not_followed_without_failing_the_request(server):
    ids = ["length_constraints:number_words", "length_constraints:number_words", "detectable_format:title"]
    kwargs = [{"num_words": "many", "relation": "less than"}, {"num_words": 5}, {"unexpected": 1}]
    body = await verify(server, ids, kwargs, message_item("<<T>>"))
    assert body["follow_instruction_list"] == [False, False, False]
    log = server.log()
    assert log.count("length_constraints:number_words counted as not followed") == 1, "once per id"
    assert "detectable_format:title counted as not followed" in log


async def test_null_kwargs_are_dropped(server):
    padded = [{"num_words": None}, {"num_words": 5, "relation": "less than", "first_word": None}]
    body = await verify(
        server, ["detectable_format:title", "length_constraints:number_words"], padded, message_item("<<T>>")
    )
    assert body["follow_instruction_list"] == [True, True]


@pytest.mark.parametrize(
    "items",
    [
        [message_item("My answer is yes."), function_call_item("search", {"q": "x"})],
        [message_item("My answer is yes."), REASONING],
        [],
    ],
    ids=["trailing function call", "trailing reasoning", "no output"],
)
async def test_only_the_last_output_item_is_the_answer(server, items):
    ids = ["detectable_format:constrained_response", "length_constraints:number_words"]
    body = await verify(server, ids, [None, {"num_words": 1, "relation": "less than"}], *items)
    assert body["follow_instruction_list"] == [False, True], "the answer is empty"


async def test_the_answer_is_the_first_text_of_the_last_message(server):
    last = message_item("My answer is no.")
    last["content"].append({"type": "output_text", "text": " My answer is yes.", "annotations": []})
    ids = ["detectable_format:constrained_response", "startend:end_checker"]
    body = await verify(server, ids, [None, {"end_phrase": "no."}], message_item("My answer is yes."), last)
    assert body["follow_instruction_list"] == [True, True]


async def test_a_grading_past_its_deadline_follows_nothing_and_the_server_keeps_answering(server):
    text = "Relationship matters a great deal here. " * 60_000
    ids = ["length_constraints:number_sentences"] * 60
    kwargs = [{"num_sentences": 3, "relation": "at least"}] * 60
    body = await verify(server, ids, kwargs, message_item(text))
    assert body["reward"] == 0.0 and body["follow_instruction_list"] == [False] * 60
    assert "exceeded" in server.log()
    quick = await verify(server, ids[:1], kwargs[:1], message_item("One. Two. Three."))
    assert quick["reward"] == 1.0


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"kwargs": [{}, None]}, "kwargs"),
        ({"kwargs": ["num_words"]}, "kwargs"),
        ({"instruction_id_list": "punctuation:no_comma"}, "instruction_id_list"),
        ({"grading_mode": "partial"}, "grading_mode"),
        ({"prompt": None}, "prompt"),
    ],
)
async def test_a_malformed_row_is_a_422_naming_the_field(server, changes, field):
    body = {**ROLLOUTS[0], "instruction_id_list": ["punctuation:no_comma"], "kwargs": [None], **changes}
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 422, answer
    assert field in str(answer["detail"])


async def test_aggregate_metrics_report_prompt_and_instruction_level_accuracy(server):
    rollouts = [
        {**rollout, "_ng_task_index": index, "_ng_rollout_index": 0} for index, rollout in enumerate(ROLLOUTS)
    ]
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    assert body["key_metrics"]["mean/reward"] == pytest.approx(0.4)
    assert body["key_metrics"]["mean/follow_all_instructions"] == pytest.approx(0.4)
    assert body["key_metrics"]["instruction_level_accuracy"] == pytest.approx(10 / 13)


def test_config_declares_the_environment_and_its_agent():
    _, resources, _ = check_environment_config(FOLDER, "instruction_following", "instruction_following")
    assert resources.model_extra["grading_timeout_s"] == 10
