"""string_match: extraction and equivalence rules in-process (cheap), everything else over HTTP against a
real server process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nemo_gym.testing import (
    BASE_VERIFY_FIELDS,
    EMPTY_AGGREGATE_METRICS,
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
)
from resources_servers.string_match.grading import extract_answer, match_score, without_latex

FOLDER = Path(__file__).resolve().parents[1]
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
VERIFY_FIELDS = {
    *BASE_VERIFY_FIELDS,
    "expected_answer",
    "extraction_mode",
    "case_sensitive",
    "metadata",
    "extracted_answer",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server(
        "string_match", tmp_path_factory.mktemp("string_match"), domain="other"
    ) as started:
        yield started


def body_for(*items: dict, expected: str = "Paris", **row: Any) -> dict:
    prompt = {"input": [{"role": "user", "content": "What is the capital of France?"}]}
    return {
        "responses_create_params": prompt,
        "expected_answer": expected,
        "response": response_with(*items, **A_RESPONSE),
        **row,
    }


async def verify(server: StartedServer, text: str, **row: Any) -> dict:
    status, answer = await post_json(server.url + "/verify", body_for(message_item(text), **row))
    assert status == 200, answer
    return answer


async def grade(server: StartedServer, text: str, **row: Any) -> tuple[float, str | None]:
    answer = await verify(server, text, **row)
    return answer["reward"], answer["extracted_answer"]


# ---- extraction (pure function) -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "text", "extracted"),
    [
        ("final_answer", "Answer: Rome\nFinal answer: Paris.", "Paris"),  # the last marker wins
        ("final_answer", "final ANSWER：  Paris  \nthanks", "Paris"),  # full-width colon, own line only
        ("final_answer", "I think \\boxed{Paris}", "Paris"),  # no marker: the box
        ("final_answer", "Paris", None),
        ("boxed", "\\boxed{Rome} then \\boxed{\\text{ Paris }}", "Paris"),  # last box, \text unwrapped
        ("boxed", "\\boxed{\\text{\\text{Paris}}}", "Paris"),
        ("boxed", "\\boxed{\\text{a} + \\text{b}}", "\\text{a} + \\text{b}"),  # not one wrapper: kept
        ("boxed", "Final answer: Paris", None),
        ("boxed", "\\boxed{Paris", None),  # an unclosed box is no answer
        ("last_line", "reasoning\n\n  Paris  \n\n", "Paris"),
        ("last_line", " \n ", None),
        ("full_response", "  The capital is Paris. ", "The capital is Paris."),
        ("full_response", "   ", None),
    ],
)
def test_extraction_modes(mode, text, extracted):
    assert extract_answer(text, mode) == extracted


# ---- equivalence (pure function) ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expected", "answer", "score"),
    [
        ("Paris", "paris", 1.0),
        ("Paris", "'Paris!'", 1.0),  # outer quotes and trailing punctuation
        ("Ｐａｒｉｓ", "Paris", 1.0),  # NFKC
        ("3.5", "$3.50", 1.0),
        ("1000", "1,000", 1.0),
        ("12", "\\text{12}", 1.0),
        ("x^2", "$x^2$", 1.0),
        ("red, green, blue", "red; green; blue", 1.0),
        ("New York, Ohio", "NY, OH", 1.0),
        ("West Virginia", "Virginia", 0.0),  # the longer state name is read first
        ("Kansasville", "KSville", 0.0),  # no state name inside another word
        ("212", "211.5", 0.98),  # within about 1%: a near miss, not a match
        ("50", "50%", 0.98),
        ("90", "90°", 0.98),
        ("12 cm", "12", 0.98),
        ("212", "200", 0.0),
        ("nan", "inf", 0.0),  # non-finite numbers are never close
        ("Paris", "Rome", 0.0),
        ("orange", "or ange", 0.0),  # `or` is a separator only as a word
    ],
)
def test_equivalence_ladder(expected, answer, score):
    assert match_score(expected, answer) == score


def test_case_sensitive_asks_for_plain_equality():
    assert match_score("Paris", " Paris ", case_sensitive=True) == 1.0
    assert match_score("Paris", "paris", case_sensitive=True) == 0.0
    assert match_score("1000", "1,000", case_sensitive=True) == 0.0


def test_latex_wrappers_open_in_one_pass_however_deep():
    assert without_latex("\\textbf{a \\text{b}} {c} $x$") == "a b {c} x"
    deep = "\\text{" * 100_000 + "x" + "}" * 100_000
    result, cpu_s = cpu_time_of(match_score, "x", deep)
    assert result == 1.0 and cpu_s < LINEAR_CPU_BUDGET_S


# ---- /verify over HTTP ----------------------------------------------------------------------------------


async def test_verify_answers_the_row_and_what_it_read(server):
    answer = await verify(server, "Reasoning...\nFinal answer: paris", metadata={"source": "t"})
    assert set(answer) == VERIFY_FIELDS
    assert (answer["reward"], answer["extracted_answer"]) == (1.0, "paris")
    assert answer["extraction_mode"] == "final_answer" and answer["case_sensitive"] is False
    assert answer["metadata"] == {"source": "t"}


async def test_wrong_and_missing_answers_score_zero(server):
    assert await grade(server, "Final answer: Rome") == (0.0, "Rome")
    assert await grade(server, "no marker anywhere") == (0.0, None)


async def test_the_row_mode_and_case_rule_apply(server):
    assert await grade(server, "\\boxed{paris}", extraction_mode="boxed") == (1.0, "paris")
    assert await grade(server, "\\boxed{paris}", extraction_mode="boxed", case_sensitive=True) == (
        0.0,
        "paris",
    )
    assert await grade(server, "thinking\nParis", extraction_mode="last_line") == (1.0, "Paris")


async def test_a_numeric_near_miss_earns_098(server):
    assert await grade(server, "Final answer: 211.5", expected="212") == (0.98, "211.5")


async def test_assistant_messages_are_joined_by_lines_and_reasoning_is_ignored(server):
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Berlin"}]}
    items = [reasoning, message_item("thinking", id="m1"), message_item("Paris", id="m2")]
    status, answer = await post_json(server.url + "/verify", body_for(*items, extraction_mode="last_line"))
    assert status == 200 and (answer["reward"], answer["extracted_answer"]) == (1.0, "Paris")


@pytest.mark.parametrize(
    "items", [[], [function_call_item("lookup", {"city": "Paris"})]], ids=["no output", "tool call only"]
)
async def test_a_response_without_assistant_text_scores_zero(server, items):
    status, answer = await post_json(
        server.url + "/verify", body_for(*items, extraction_mode="full_response")
    )
    assert status == 200 and (answer["reward"], answer["extracted_answer"]) == (0.0, None)


async def test_an_image_question_is_accepted(server):
    image_row = next(row for row in ROWS if row.get("metadata", {}).get("modality") == "image")
    content = image_row["responses_create_params"]["input"][0]["content"]
    assert any(part["type"] == "input_image" for part in content)
    status, answer = await post_json(
        server.url + "/verify", {**image_row, "response": response_with(message_item("Circle"), **A_RESPONSE)}
    )
    assert status == 200 and answer["reward"] == 1.0
    assert await post_json(server.url + "/seed_session", image_row) == (200, {})


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"expected_answer": None}, "expected_answer"),
        ({"expected_answer": "  "}, "expected_answer"),
        ({"extraction_mode": "regex"}, "extraction_mode"),
        ({"case_sensitive": "maybe"}, "case_sensitive"),
        ({"response": None}, "response"),
    ],
)
async def test_malformed_rows_are_422_naming_the_field(server, change, field):
    status, answer = await post_json(server.url + "/verify", {**body_for(message_item("Paris")), **change})
    assert status == 422
    assert any(error["loc"][:2] == ["body", field] for error in answer["detail"])


async def test_a_missing_expected_answer_is_a_422(server):
    body = body_for(message_item("Paris"))
    del body["expected_answer"]
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 422 and ["body", "expected_answer"] in [error["loc"] for error in answer["detail"]]


# ---- recorded rollouts ----------------------------------------------------------------------------------


@pytest.mark.parametrize("index", range(len(ROLLOUTS)))
async def test_recorded_rollouts_reproduce_their_reward(server, index):
    rollout = ROLLOUTS[index]
    row = ROWS[rollout["_ng_task_index"]]
    status, answer = await post_json(server.url + "/verify", {**row, "response": rollout["response"]})
    assert status == 200, answer
    assert (answer["reward"], answer["extracted_answer"]) == (rollout["reward"], rollout["extracted_answer"])


def test_recorded_rewards_cover_right_near_and_wrong():
    assert {rollout["reward"] for rollout in ROLLOUTS} == {0.0, 0.98, 1.0}


# ---- aggregate metrics ----------------------------------------------------------------------------------


def scored(task: int, rollout: int, reward: float, extracted: str | None) -> dict:
    return {
        "responses_create_params": ROWS[0]["responses_create_params"],
        "response": A_RESPONSE,
        "reward": reward,
        "expected_answer": "6",
        "extracted_answer": extracted,
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
    }


async def test_aggregate_metrics_report_pass_at_k_majority_and_no_answer(server):
    rollouts = [
        scored(0, 0, 1.0, "6"),
        scored(0, 1, 0.0, "7"),
        scored(1, 0, 0.98, "211.5"),
        scored(1, 1, 0.0, None),
    ]
    status, result = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    metrics, key = result["agent_metrics"], result["key_metrics"]
    assert metrics["pass@2/accuracy"] == pytest.approx(100 * (1.0 + 0.98) / 2)  # best of the first 2
    assert metrics["pass@1[avg-of-2]/no_answer"] == pytest.approx(25.0)
    assert metrics["majority@2/accuracy"] == pytest.approx(100 * (0.5 + 0.98) / 2)  # task 0 ties 6/7
    assert key["mean/reward"] == pytest.approx(1.98 / 4)
    assert {"pass@1[avg-of-2]/accuracy", "pass@2/accuracy", "majority@2/accuracy"} <= set(key)


async def test_aggregate_metrics_of_nothing_is_empty(server):
    assert await post_json(server.url + "/aggregate_metrics", {"verify_responses": []}) == (
        200,
        EMPTY_AGGREGATE_METRICS,
    )


def test_config_declares_the_environment_and_its_agent():
    check_environment_config(FOLDER, "string_match", "other")
