"""gpqa_diamond: the extraction rules in-process (cheap), everything else over HTTP against one real server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
from resources_servers.gpqa_diamond.grading import extract_letter

FOLDER = Path(__file__).resolve().parents[1]
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
ROW = ROWS[0]  # gold B
A_RESPONSE = ROLLOUTS[0]["response"]
FOUR = (("A", "0.50"), ("B", "0.36"), ("C", "0.72"), ("D", "0.25"))
VERIFY_FIELDS = {
    *BASE_VERIFY_FIELDS,
    "expected_answer",
    "extracted_answer",
}
DEADLINE_S = 2.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    """A deadline far above any real extraction yet short enough to test a runaway template regex."""
    workdir = tmp_path_factory.mktemp("gpqa_diamond")
    with run_resources_server(
        "gpqa_diamond", workdir, domain="knowledge", grading_timeout_seconds=DEADLINE_S
    ) as started:
        yield started


def body_for(*items: dict, row: dict = ROW, **changes: Any) -> dict:
    return {**row, "response": response_with(*items, **A_RESPONSE), **changes}


async def verify(server: StartedServer, *items: dict, **changes: Any) -> dict:
    status, answer = await post_json(server.url + "/verify", body_for(*items, **changes))
    assert status == 200, answer
    return answer


async def grade(server: StartedServer, text: str, **changes: Any) -> tuple[float, str | None]:
    answer = await verify(server, message_item(text), **changes)
    return answer["reward"], answer["extracted_answer"]


# ---- extraction rules (pure function) -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "letter"),
    [
        ("Answer: B", "B"),
        ("answer: b", "B"),
        ("**Answer:** C", "C"),
        ("**Answer: D**", "D"),
        ("__Answer__: A", "A"),
        ("Answer: A\nOn reflection...\nAnswer: C", "C"),  # the last Answer line wins
        ("\\boxed{A} then \\boxed{D}", "D"),  # the last box wins
        ("\\boxed{\\text{(C)}}", "C"),  # the last standalone capital inside the box
        ("\\boxed{B) 0.36}", "B"),
        ("\\boxed{C}\nAnswer: A", "C"),  # a box beats an Answer line
        ("\\boxed{0.36}\nAnswer: B", "B"),  # a box without a capital letter gives way
        ("\\boxed{E}", None),  # not one of the options
        ("Answer: Both", None),  # a letter that starts a word is not a choice
        ("I think it is B.", None),  # no marker, no answer
        ("   ", None),
        ("\\boxed{A} and \\boxed{", "A"),  # an unclosed box at the end is ignored
    ],
)
def test_gpqa_extraction_rules(text, letter):
    assert extract_letter(text, FOUR, ()) == letter


def test_without_options_any_letter_counts():
    assert extract_letter("Answer: F", (), ()) == "F"


@pytest.mark.parametrize(
    ("text", "patterns", "letter"),
    [
        ("Final: A ... Final: C\nAnswer: B", [r"final:\s*([A-D])"], "C"),  # template first, last match
        ("Final choice: Ｄ", [r"final choice:\s*(\S)"], "D"),  # full-width letter mapped
        ("Final: 0.72", [r"final:\s*(\S+)"], "C"),  # option text mapped to its letter
        ("Final: Z", [r"final:\s*(\S)"], "Z"),  # a template letter counts even if not an option
        ("Answer: B", [r"final:\s*(\S)"], "B"),  # template finds nothing: GPQA rules
        ("Answer: B", ["(unclosed", r"answer:\s*(\w)"], "B"),  # an invalid pattern is skipped
    ],
)
def test_template_regex_comes_first(text, patterns, letter):
    assert extract_letter(text, FOUR, patterns) == letter


def test_boxes_are_read_in_linear_time_and_the_inner_of_nested_boxes_wins():
    assert extract_letter("\\boxed{" * 200_000, FOUR, ()) is None
    assert extract_letter("\\boxed{A \\boxed{B}}", FOUR, ()) == "B"


# ---- /verify over HTTP ----------------------------------------------------------------------------------


async def test_verify_rewards_the_gold_letter_and_answers_only_its_fields(server):
    answer = await verify(server, message_item("Reasoning...\nAnswer: B"))
    assert set(answer) == VERIFY_FIELDS
    assert (answer["reward"], answer["expected_answer"], answer["extracted_answer"]) == (1.0, "B", "B")
    assert await grade(server, "Answer: C") == (0.0, "C")


async def test_the_gold_letter_is_normalized(server):
    answer = await verify(server, message_item("\\boxed{B}"), expected_answer=" b ")
    assert (answer["reward"], answer["expected_answer"]) == (1.0, "B")


async def test_the_row_grading_mode_does_not_change_the_gpqa_rules(server):
    assert await grade(server, "Answer: B", grading_mode="lenient_boxed") == (1.0, "B")
    assert await grade(server, "\\boxed{B}", grading_mode="lenient_answer_colon") == (1.0, "B")


async def test_null_options_are_not_choices(server):
    options = [{"A": "x"}, {"B": "y"}, {"C": None}]
    assert await grade(server, "Answer: C", options=options, expected_answer="C") == (0.0, None)


async def test_template_regex_from_the_row_is_applied(server):
    template = {"template_metadata": {"template_id": "t1", "output_regex": r"my pick is \((\w)\)"}}
    assert await grade(server, "my pick is (B)\nAnswer: D", **template) == (1.0, "B")


@pytest.mark.parametrize(
    "items",
    [
        [],
        [{"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Answer: B"}]}],
        [function_call_item("lookup", {"q": "B"})],
        [message_item("")],
        [message_item("\u202e\u0000 Answer: \U0001f600")],
    ],
    ids=["no output", "reasoning only", "function call only", "empty text", "odd unicode"],
)
async def test_outputs_without_an_answer_score_zero(server, items):
    answer = await verify(server, *items)
    assert (answer["reward"], answer["extracted_answer"]) == (0.0, None)


async def test_the_answer_is_read_from_every_message_joined(server):
    answer = await verify(server, message_item("Answer:"), message_item(" B", id="msg_2"))
    assert (answer["reward"], answer["extracted_answer"]) == (1.0, "B")


async def test_a_huge_answer_is_graded(server):
    assert await grade(server, "Let me think. " * 50_000 + "\nAnswer: B") == (1.0, "B")


async def test_a_runaway_template_regex_scores_zero_and_the_server_keeps_answering(server):
    template = {"template_metadata": {"output_regex": "^(a+)+$"}}
    assert await grade(server, "a" * 60 + "!", **template) == (0.0, None)
    assert "extract_letter exceeded its" in server.log()
    assert await grade(server, "Answer: B") == (1.0, "B")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"expected_answer": None}, "expected_answer"),
        ({"expected_answer": 2}, "expected_answer"),
        ({"options": "A, B"}, "options"),
        ({"grading_mode": "fuzzy"}, "grading_mode"),
        ({"template_metadata": {"output_regex": 7}}, "template_metadata"),
        ({"response": None}, "response"),
    ],
)
async def test_malformed_rows_are_422_naming_the_field(server, change, field):
    status, answer = await post_json(server.url + "/verify", body_for(message_item("Answer: B"), **change))
    assert status == 422
    assert any(error["loc"][:2] == ["body", field] for error in answer["detail"])


# ---- metrics, recorded data, config ---------------------------------------------------------------------


async def test_aggregate_metrics_report_pass_at_k_and_majority_over_the_extracted_letters(server):
    texts = [["Answer: B", "Answer: C", "Answer: C"], ["Answer: A", "no idea", "\\boxed{A}"]]
    rollouts = []
    for task, (row, task_texts) in enumerate(zip((ROWS[0], ROWS[3]), texts, strict=True)):
        for index, text in enumerate(task_texts):
            answer = await verify(server, message_item(text), row=row)
            rollouts.append({**answer, "_ng_task_index": task, "_ng_rollout_index": index})
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    metrics, keys = body["agent_metrics"], body["key_metrics"]
    # Task 0: 1 of 3 right, majority says C (wrong). Task 1: 2 of 3 right, one unanswered, majority A.
    assert metrics["pass@1/accuracy"] == pytest.approx(100 * (1 / 3 + 2 / 3) / 2)
    assert metrics["pass@3/accuracy"] == pytest.approx(100.0)
    assert metrics["majority@3/accuracy"] == pytest.approx(50.0)
    assert metrics["pass@1[avg-of-3]/no_answer"] == pytest.approx(100 * (0 + 1 / 3) / 2)
    assert keys == {
        "mean/reward": pytest.approx(0.5),
        "pass@1[avg-of-3]/accuracy": pytest.approx(50.0),
        "pass@1[avg-of-3]/no_answer": pytest.approx(100 / 6),
        "pass@3/accuracy": pytest.approx(100.0),
        "majority@3/accuracy": pytest.approx(50.0),
    }


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["response"]["id"][:12])
async def test_recorded_rollouts_verify_to_their_recorded_reward(server, rollout):
    status, answer = await post_json(server.url + "/verify", rollout)
    assert status == 200, answer
    assert (answer["reward"], answer["extracted_answer"]) == (rollout["reward"], rollout["extracted_answer"])


def test_recorded_rollouts_cover_right_wrong_and_unanswered():
    assert {rollout["reward"] for rollout in ROLLOUTS} == {0.0, 1.0}
    assert any(rollout["extracted_answer"] is None for rollout in ROLLOUTS)
    assert [rollout["expected_answer"] for rollout in ROLLOUTS] == [row["expected_answer"] for row in ROWS]


def test_config_declares_the_environment_and_its_agent():
    _, resources, _ = check_environment_config(FOLDER, "gpqa_diamond", "knowledge")
    assert resources.model_extra["grading_timeout_seconds"] > 0
