"""ruler2: the soft match and the letter reader in-process, everything else over HTTP against one server."""

from collections.abc import Iterator
from pathlib import Path

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
    without_verify_flags,
)
from resources_servers.ruler2.app import RULER2_TASKS, suite_means
from resources_servers.ruler2.grading import option_letter, soft_match, string_match, word_error_rate

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "ruler2_resources_server"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
ALL_ROW = {
    **ROWS[0],
    "expected_answer": ["blue heron", "red fox"],
    "match_type": "all",
    "task": "mk_niah_basic",
}
CHOICE_ROW = ROWS[4]
DEADLINE_S = 3.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp("ruler2")
    with run_resources_server(
        INSTANCE, workdir, implementation="ruler2", domain="long_context", grading_timeout_s=DEADLINE_S
    ) as started:
        yield started


async def verify(server: StartedServer, *items: dict, row: dict = ALL_ROW) -> dict:
    status, body = await post_json(
        server.url + "/verify", {**row, "response": response_with(*items, **A_RESPONSE)}
    )
    assert status == 200, body
    return body


async def score(server: StartedServer, text: str, row: dict = ALL_ROW) -> float:
    return (await verify(server, message_item(text), row=row))["reward"]


# --- the scores (in-process) ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prediction", "reference", "value"),
    [
        ("It is the Blue Heron.", "blue heron", 1.0),  # substring, ignoring case
        ("blue herons", "blue heron", 1.0),  # a substring need not end on a word boundary
        ("blue egret", "blue heron", 0.5),  # 1 of 2 words wrong
        ("the blue", "blue heron", 0.0),  # 2 edits over 2 words
        ("a very long answer that never names it", "blue heron", 0.0),  # 1 - WER < 0 is floored
        ("anything", "", 1.0),  # the empty reference occurs everywhere
    ],
)
def test_the_soft_match_is_the_larger_of_substring_and_one_minus_wer(prediction, reference, value):
    assert soft_match(prediction, reference) == pytest.approx(value)


def test_the_wer_of_a_reference_without_words_is_infinite():
    assert word_error_rate("a b", "  ") == float("inf")
    assert word_error_rate("a c", "a b") == 0.5


def test_the_match_types_combine_the_references_differently():
    references = ["alpha", "beta"]
    assert string_match("all", "alpha", references) == 0.5
    assert string_match("part", "alpha", references) == 1.0
    assert string_match("2steps", "alpha beta\n\nonly beta", references) == 0.5
    assert string_match("all", "alpha beta\n\nonly beta", references) == 1.0
    quoted = "Document 1: alpha is here\nstill quoting\n\nThe answer is gamma."
    assert string_match("part", quoted, references) == 0.0
    assert string_match("all", quoted, references) == 0.5


@pytest.mark.parametrize(
    ("text", "letter"),
    [
        ("so \\boxed{C}", "C"),
        ("\\boxed{b}", "B"),  # a lone letter is upper-cased
        ("\\boxed{A} then \\boxed{(D) Argon}", "D"),  # the last box; its last standalone capital
        ("The final answer is B\nbye", "B"),
        ("**Answer:** c", "C"),
        ("\\boxed{Ｃ}", "C"),  # a full-width letter
        ("\\boxed{nitrogen}\nAnswer: D", "D"),  # a box without a letter falls back to the answer line
        ("I think it is nitrogen.", None),
    ],
)
def test_the_option_letter_is_read_from_the_box_then_the_answer_lines(text, letter):
    assert option_letter(text) == letter


def test_the_suite_mean_needs_all_twelve_tasks():
    metrics = {f"{task}/pass@1/accuracy": float(i) for i, task in enumerate(RULER2_TASKS)}
    assert suite_means(metrics) == {"ruler2_suite_avg/pass@1/accuracy": sum(range(12)) / 12}
    metrics.pop("qa_hard/pass@1/accuracy")
    assert suite_means(metrics) == {}


# --- /verify ----------------------------------------------------------------------------------------


async def test_a_right_answer_earns_1_and_the_answer_echoes_the_row(server):
    body = await verify(server, message_item("  Blue heron\x07 and red fox.  "))
    assert body["reward"] == 1.0
    assert body["predicted_answer"] == "Blue heron\n and red fox." and body["extracted_answer"] is None
    row_fields = ("expected_answer", "eval_type", "match_type", "task", "length")
    assert {key: body[key] for key in row_fields} == {key: ALL_ROW[key] for key in row_fields}
    assert set(body) == {*BASE_VERIFY_FIELDS, *row_fields, "predicted_answer", "extracted_answer"}


async def test_partial_answers_earn_their_soft_match(server):
    assert await score(server, "blue heron") == 0.5
    assert await score(server, "blue egret") == pytest.approx((0.5 + 0.0) / 2)  # 1 of 2 words, then 2 of 2


async def test_the_part_match_drops_quoted_documents_and_takes_the_best_reference(server):
    row = ROWS[3]
    assert await score(server, "It was Marisol Vega.", row=row) == 1.0
    assert await score(server, "Document 2: ... Marisol Vega ...\n\nTomas Reed.", row=row) == 0.0


async def test_the_2steps_match_reads_the_last_paragraph_only(server):
    row = ROWS[2]
    assert await score(server, "Codes 3318 and 7702.\n\n3318 7702", row=row) == 1.0
    assert await score(server, "Codes 3318 and 7702.\n\n3318", row=row) == 0.5


async def test_a_multichoice_row_compares_the_option_letter(server):
    right = await verify(server, message_item("Mostly nitrogen: \\boxed{C}"), row=CHOICE_ROW)
    assert right["reward"] == 1.0 and right["extracted_answer"] == "C"
    wrong = await verify(server, message_item("\\boxed{A}"), row=CHOICE_ROW)
    assert wrong["reward"] == 0.0 and wrong["extracted_answer"] == "A"
    unread = await verify(server, message_item("nitrogen"), row=CHOICE_ROW)
    assert unread["reward"] == 0.0 and unread["extracted_answer"] is None
    listed = await verify(server, message_item("\\boxed{c}"), row={**CHOICE_ROW, "expected_answer": [" c "]})
    assert listed["reward"] == 1.0


async def test_an_answer_without_text_scores_0(server):
    assert (await verify(server, function_call_item("search", {"q": "x"})))["reward"] == 0.0


async def test_a_grading_past_its_deadline_is_masked_and_the_server_keeps_answering(server):
    # Quoted-document headers with no blank line after them: each one is matched to the end of the text.
    row = {**ALL_ROW, "match_type": "part"}
    body = await verify(server, message_item("Document 1: x\n" * 60_000), row=row)
    assert body["mask_sample"] is True and body["failure_kind"] == "verifier_error" and body["reward"] == 0.0
    assert await score(server, "blue heron, red fox") == 1.0


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"expected_answer": []}, "expected_answer"),
        ({"expected_answer": None}, "expected_answer"),
        ({"expected_answer": [1, 2]}, "expected_answer"),
        ({"eval_type": "ruler"}, "eval_type"),
        ({"match_type": "any"}, "match_type"),
        ({"length": "long"}, "length"),
    ],
)
async def test_a_malformed_row_is_a_422_naming_the_field(server, change, field):
    status, body = await post_json(server.url + "/verify", {**ALL_ROW, **change, "response": A_RESPONSE})
    assert status == 422
    assert any(field in str(error["loc"]) or field in error["msg"] for error in body["detail"]), body


async def test_a_multichoice_row_with_several_letters_is_a_422(server):
    row = {**CHOICE_ROW, "expected_answer": ["A", "C"]}
    status, body = await post_json(server.url + "/verify", {**row, "response": A_RESPONSE})
    assert status == 422 and "expected_answer" in str(body["detail"])


# --- metrics, recorded data, config -----------------------------------------------------------------


async def test_aggregate_metrics_give_pass_at_k_overall_and_per_task(server):
    results = [
        await verify(server, message_item("blue heron red fox")),
        await verify(server, message_item("blue heron")),
        await verify(server, message_item("\\boxed{C}"), row=CHOICE_ROW),
    ]
    rollouts = [
        {**result, "_ng_task_index": task, "_ng_rollout_index": rollout}
        for result, (task, rollout) in zip(results, [(0, 0), (0, 1), (1, 0)], strict=True)
    ]
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    metrics = body["agent_metrics"]
    assert metrics["mk_niah_basic/pass@1[avg-of-2]/accuracy"] == pytest.approx(100 * (1.0 + 0.5) / 2)
    assert metrics["mk_niah_hard/pass@1/accuracy"] == pytest.approx(100.0)
    assert not any(name.startswith("ruler2_suite_avg/") for name in metrics)  # 2 of the 12 tasks
    assert "pass@1[avg-of-2]/accuracy" in body["key_metrics"]


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["task"])
async def test_recorded_rollouts_verify_to_their_recorded_answer(server, rollout):
    status, body = await post_json(server.url + "/verify", rollout)
    assert status == 200, body
    assert without_verify_flags(body) == without_verify_flags({key: rollout[key] for key in body})


def test_config_declares_the_environment_and_its_agent():
    check_environment_config(FOLDER, INSTANCE, "long_context")
    assert {row["agent_ref"]["name"] for row in ROWS} == {"ruler2_simple_agent"}
