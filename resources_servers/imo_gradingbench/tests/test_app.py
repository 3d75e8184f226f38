"""imo_gradingbench: the grade reader in-process, then /verify and /aggregate_metrics against one real server."""

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
)
from resources_servers.imo_gradingbench.grading import extract_grade

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "imo_gradingbench"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
ROW = {key: value for key, value in ROWS[0].items() if key != "agent_ref"}  # gold: correct
RUN_ONLY_KEYS = (
    "agent_ref",
    "_ng_environment_server",
    "_ng_result_type",
    "_ng_task_index",
    "_ng_rollout_index",
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server(INSTANCE, tmp_path_factory.mktemp(INSTANCE), domain="math") as started:
        yield started


async def verify(server: StartedServer, *items: dict, gold: str = "correct") -> dict:
    body = {**ROW, "expected_answer": gold, "response": response_with(*items, **A_RESPONSE)}
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 200, answer
    return answer


# --- the grade reader (in-process) ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "grade"),
    [
        ("The proof is fine.\n\nGrade: correct", "correct"),
        ("**Almost**.", "almost"),
        ("verdict: (partial)!", "partial"),
        ("`INCORRECT`", "incorrect"),
        ("[correct]   \n\n", "correct"),
        ("I first thought incorrect, but it is correct", "correct"),
        ("correct\nalmost", "almost"),  # the last word wins
    ],
)
def test_the_grade_is_the_last_word_without_its_decoration(text, grade):
    assert extract_grade(text) == grade


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n",
        "The grade is correct, I think so",
        "Grade: excellent",
        "correct-ish",
        "«correct»",
        "correctly",
    ],
)
def test_a_last_word_that_is_no_grade_gives_no_grade(text):
    assert extract_grade(text) is None


# --- /verify ----------------------------------------------------------------------------------------


async def test_the_expert_grade_earns_1_and_the_answer_reports_the_match(server):
    body = await verify(server, message_item("All steps hold.\nGrade: **Correct**"))
    assert body["reward"] == 1.0
    assert (body["extracted_grade"], body["binary_match"], body["score_diff"]) == ("correct", True, 0.0)
    assert {key: body[key] for key in ("grading_id", "problem_id")} == {
        "grading_id": ROW["grading_id"],
        "problem_id": ROW["problem_id"],
    }
    assert set(body) == {
        *BASE_VERIFY_FIELDS,
        "expected_answer",
        "grading_id",
        "problem_id",
        "extracted_grade",
        "binary_match",
        "score_diff",
    }


@pytest.mark.parametrize(
    ("said", "gold", "binary_match", "score_diff"),
    [
        ("almost", "correct", True, 1.0),  # the same half, one point off
        ("partial", "almost", False, 5.0),
        ("correct", "incorrect", False, 7.0),
        ("incorrect", "partial", True, 1.0),
    ],
)
async def test_another_grade_earns_0_with_its_half_and_points_gap(
    server, said, gold, binary_match, score_diff
):
    body = await verify(server, message_item(f"My grade: {said}"), gold=gold)
    assert body["reward"] == 0.0 and body["extracted_grade"] == said
    assert (body["binary_match"], body["score_diff"]) == (binary_match, score_diff)


async def test_the_gold_grade_is_read_in_any_case_and_spacing(server):
    body = await verify(server, message_item("almost"), gold="  Almost ")
    assert body["reward"] == 1.0 and body["expected_answer"] == "almost"


async def test_messages_are_joined_by_lines_and_reasoning_is_not_read(server):
    reasoning = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "incorrect"}],
    }
    body = await verify(server, message_item("Grade:"), message_item("correct", id="msg_2"), reasoning)
    assert body["reward"] == 1.0 and body["extracted_grade"] == "correct"


@pytest.mark.parametrize(
    "items",
    [
        (message_item("The proof looks correct to me overall, thanks"),),
        (message_item(""),),
        (),
        (function_call_item("grade", {"grade": "correct"}),),
    ],
    ids=["grade-not-last", "empty-text", "no-output", "function-call-only"],
)
async def test_a_reply_without_a_final_grade_earns_0_and_no_error(server, items):
    body = await verify(server, *items)
    assert body["reward"] == 0.0 and body["extracted_grade"] is None
    assert body["binary_match"] is False and body["score_diff"] is None
    assert body["mask_sample"] is False  # the model's fault, a measured 0


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"expected_answer": "excellent"}, "expected_answer"),
        ({"expected_answer": 7}, "expected_answer"),
        ({"expected_answer": None}, "expected_answer"),
        ({"grading_id": ["a"]}, "grading_id"),
    ],
)
async def test_a_malformed_row_is_a_422_naming_the_field(server, change, field):
    status, body = await post_json(server.url + "/verify", {**ROW, **change, "response": A_RESPONSE})
    assert status == 422 and ["body", field] in [error["loc"] for error in body["detail"]]


async def test_a_row_without_gold_is_a_422(server):
    row = {key: value for key, value in ROW.items() if key != "expected_answer"}
    status, body = await post_json(server.url + "/verify", {**row, "response": A_RESPONSE})
    assert status == 422 and ["body", "expected_answer"] in [error["loc"] for error in body["detail"]]


# --- metrics, recorded data, config -----------------------------------------------------------------


async def test_aggregate_metrics_give_both_accuracies_and_the_grade_error(server):
    # task 0 (gold correct): correct, almost; task 1 (gold partial): no grade, incorrect.
    results = [
        await verify(server, message_item("correct")),
        await verify(server, message_item("almost")),
        await verify(server, message_item("no grade here"), gold="partial"),
        await verify(server, message_item("incorrect"), gold="partial"),
    ]
    rollouts = [
        {**result, "_ng_task_index": i // 2, "_ng_rollout_index": i % 2} for i, result in enumerate(results)
    ]
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    metrics = body["agent_metrics"]
    assert metrics["pass@1[avg-of-2]/exact_accuracy"] == pytest.approx(100 * (0.5 + 0.0) / 2)
    assert metrics["pass@1[avg-of-2]/binarized_accuracy"] == pytest.approx(100 * (1.0 + 0.5) / 2)
    assert metrics["pass@2/binarized_accuracy"] == pytest.approx(100.0)
    assert metrics["pass@1[avg-of-2]/no_answer"] == pytest.approx(100 * (0.0 + 0.5) / 2)
    # errors: task 0 -> 0 and 1, task 1 -> 1 (the unanswered rollout has none)
    assert metrics["pass@1[avg-of-2]/mae"] == pytest.approx(2 / 3)
    assert metrics["pass@1[avg-of-2]/mae_count"] == 3.0
    assert metrics["pass@2/mae"] == pytest.approx((0 + 1) / 2) and metrics["pass@2/mae_count"] == 2.0
    assert metrics["pass@1/mae"] == pytest.approx(0.0) and metrics["pass@1/mae_count"] == 1.0
    assert (metrics["mae"], metrics["mae_count"]) == (metrics["pass@1[avg-of-2]/mae"], 3.0)
    assert "majority@2/exact_accuracy" in metrics
    key = body["key_metrics"]
    assert key["pass@2/mae"] == metrics["pass@2/mae"] and key["mae"] == metrics["mae"]
    assert "pass@1/exact_accuracy" not in key and "pass@1[avg-of-2]/exact_accuracy" in key


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["grading_id"])
async def test_recorded_rollouts_verify_to_their_recorded_answer(server, rollout):
    status, body = await post_json(server.url + "/verify", rollout)
    assert status == 200, body
    assert body == {key: value for key, value in rollout.items() if key not in RUN_ONLY_KEYS}


def test_the_recordings_mix_right_wrong_and_unanswered_grades():
    assert sorted(rollout["reward"] for rollout in ROLLOUTS) == [0.0, 0.0, 0.0, 1.0, 1.0]
    assert any(rollout["extracted_grade"] is None for rollout in ROLLOUTS)


def test_config_declares_the_environment_and_its_agent():
    check_environment_config(FOLDER, INSTANCE, "math")
    assert {row["agent_ref"]["name"] for row in ROWS} == {"imo_gradingbench_simple_agent"}
