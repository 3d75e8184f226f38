"""bunsenbench_chemistry_mcq: answer reading in-process (cheap), everything else over HTTP against a real
server process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nemo_gym.testing import (
    BASE_VERIFY_FIELDS,
    EMPTY_AGGREGATE_METRICS,
    StartedServer,
    check_environment_config,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_resources_server,
)
from resources_servers.bunsenbench_chemistry_mcq.grading import (
    gold_letter,
    grade_text,
    normalize_chemistry_text,
    parse_candidate,
)

FOLDER = Path(__file__).resolve().parents[1]
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
FOUR = (("A", "OH⁻"), ("B", "H₂O"), ("C", "H₃O⁺"), ("D", "O₂"))
ALLOWED = frozenset("ABCD")
VERIFY_FIELDS = {
    *BASE_VERIFY_FIELDS,
    "options",
    "choices",
    "expected_answer",
    "extracted_answer",
    "no_answer",
    "error_mode",
    "uuid",
    "bunsen_id",
    "source",
    "bct_field",
    "bct_subfield",
    "metadata",
    "grading_mode",
    "template_metadata",
}
QUESTION = (
    "Which is water?\n<choices>\n<choice>OH⁻</choice>\n<choice>H₂O</choice>\n<choice>H₃O⁺</choice>\n"
    "<choice>O₂</choice>\n</choices>"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp("bunsenbench")
    with run_resources_server("bunsenbench_chemistry_mcq", workdir, domain="knowledge") as started:
        yield started


def row(**fields: Any) -> dict:
    return {
        "responses_create_params": {"input": [{"role": "user", "content": QUESTION}]},
        "options": [{letter: text} for letter, text in FOUR],
        "expected_answer": "B",
        "metadata": {"source": "unit", "bct_field": "general", "bct_subfield": "acids bases"},
        **fields,
    }


async def verify(server: StartedServer, *items: dict, response: dict | None = None, **fields: Any) -> dict:
    body = {**row(**fields), "response": response or response_with(*items, **A_RESPONSE)}
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 200, answer
    return answer


async def grade(server: StartedServer, text: str, **fields: Any) -> tuple[float, str | None, str]:
    answer = await verify(server, message_item(text), **fields)
    return answer["reward"], answer["extracted_answer"], answer["error_mode"]


# ---- reading the answer (pure functions) ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "letter"),
    [
        ("<choice>H2O</choice>", "B"),  # the option text, subscripts normalized
        ("<choice> h₂o </choice>", None),  # text must match exactly (case included)
        (QUESTION + "\nSo: <choice>H₃O⁺</choice>", "C"),  # the echoed <choices> list is not an answer
        ("<answer>B</answer>", "B"),
        ("Answer: D", "D"),
        ("**Answer:** (A)", "A"),
        ("- Answer: option c", "C"),
        ("The correct answer is B) H2O", "B"),
        ("I choose D.", "D"),
        ("\\boxed{\\text{C}}", "C"),
        ("\\boxed{A} ... wait, \\boxed{B}", "B"),  # the last candidate wins
        ("Answer: B\n<choice>OH-</choice>", "A"),  # positions decide, not marker kinds
        ("Answer: E\nAnswer: B", "B"),  # the last one that parses
        ("I reckon it is\nH₂O", "B"),  # no marker: the last line
        ("C\nbecause it has three hydrogens", "C"),  # ... then the first
        ("Answer: water", None),
        ("nothing here", None),
    ],
)
def test_reading_the_choice(text, letter):
    assert grade_text(text, FOUR, "B")[0] == letter


@pytest.mark.parametrize(
    ("candidate", "letter"),
    [("b", "B"), ("(B)", "B"), ("B.", "B"), ("Choice b", "B"), ("`H2O`", "B"), ("E", None), ("BC", None)],
)
def test_parsing_one_candidate(candidate, letter):
    assert parse_candidate(candidate, FOUR, ALLOWED) == letter


def test_chemistry_normalization():
    assert normalize_chemistry_text("Fe³⁺ · 6H₂O — µmol &amp; x\u200b") == "Fe3+ . 6H2O - umol & x"


@pytest.mark.parametrize(
    ("text", "mode"),
    [
        ("<choice>H2O</choice>", "correct"),
        ("Answer: A", "wrong_answer"),
        ("I'm sorry, but I can't answer chemistry questions.", "refusal"),
        ("<think>The proton count is", "early_termination"),
        ("<choice>water</choice>", "malformed_choice"),
        ("It is the second one.", "format_violation"),
    ],
)
def test_error_modes_from_the_text(text, mode):
    assert grade_text(text, FOUR, "B")[1] == mode


@pytest.mark.parametrize(("expected", "letter"), [("b", "B"), ("(C)", "C"), ("H2O", "B"), ("water", None)])
def test_the_gold_may_be_a_letter_or_an_option_text(expected, letter):
    assert gold_letter(expected, FOUR) == letter


# ---- /verify over HTTP ----------------------------------------------------------------------------------


async def test_verify_answers_its_fields_with_metadata_lifted(server):
    answer = await verify(server, message_item("<choice>H₂O</choice>"), uuid="u1", undeclared="dropped")
    assert set(answer) == VERIFY_FIELDS
    assert (answer["reward"], answer["extracted_answer"], answer["no_answer"]) == (1.0, "B", False)
    assert (answer["source"], answer["bct_field"], answer["bct_subfield"]) == (
        "unit",
        "general",
        "acids bases",
    )
    assert answer["uuid"] == "u1" and answer["error_mode"] == "correct"


async def test_right_wrong_and_unread_answers(server):
    assert await grade(server, "Answer: C") == (0.0, "C", "wrong_answer")
    assert await grade(server, "<choice>steam</choice>") == (0.0, None, "malformed_choice")
    assert await grade(server, "") == (0.0, None, "format_violation")


async def test_top_level_group_fields_win_over_metadata(server):
    answer = await verify(server, message_item("Answer: B"), source="top", bct_field=None)
    assert (answer["source"], answer["bct_field"]) == ("top", "general")


async def test_a_gold_given_as_option_text_is_reported_as_its_letter(server):
    answer = await verify(server, message_item("Answer: B"), expected_answer="H₂O")
    assert (answer["reward"], answer["expected_answer"]) == (1.0, "B")


async def test_choices_stand_in_for_options(server):
    choices = ["OH-", {"label": "b", "text": "H2O"}, {"letter": "C", "content": "H3O+"}]
    answer = await verify(server, message_item("<choice>H2O</choice>"), options=[], choices=choices)
    assert (answer["reward"], answer["extracted_answer"]) == (1.0, "B")
    assert await grade(server, "Answer: D", options=[], choices=choices) == (0.0, None, "format_violation")


async def test_a_refusal_part_and_a_truncated_response_set_the_error_mode(server):
    refusal = {
        "type": "message",
        "role": "assistant",
        "id": "m1",
        "status": "completed",
        "content": [{"type": "refusal", "refusal": "No."}],
    }
    assert (await verify(server, refusal))["error_mode"] == "refusal"
    cut = response_with(
        message_item("Let me think about the"),
        **{**A_RESPONSE, "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}},
    )
    assert (await verify(server, response=cut))["error_mode"] == "early_termination"
    # A choice that was read counts even when the generation was cut afterwards.
    cut_after = response_with(
        message_item("Answer: B\nand then I would"), **{**A_RESPONSE, "status": "incomplete"}
    )
    assert (await verify(server, response=cut_after))["error_mode"] == "correct"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"expected_answer": "water"}, "expected_answer"),
        ({"expected_answer": None}, "expected_answer"),
        ({"options": "A, B"}, "options"),
        ({"choices": "A, B"}, "choices"),
        ({"metadata": ["x"]}, "metadata"),
        ({"response": None}, "response"),
    ],
)
async def test_malformed_rows_are_422_naming_the_field(server, change, field):
    body = {**row(), "response": response_with(message_item("Answer: B"), **A_RESPONSE), **change}
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 422, answer
    assert any(error["loc"][:2] == ["body", field] for error in answer["detail"]), answer


# ---- recorded rollouts ----------------------------------------------------------------------------------


@pytest.mark.parametrize("index", range(len(ROLLOUTS)))
async def test_recorded_rollouts_reproduce_their_reward(server, index):
    rollout = ROLLOUTS[index]
    task = ROWS[rollout["_ng_task_index"]]
    status, answer = await post_json(server.url + "/verify", {**task, "response": rollout["response"]})
    assert status == 200, answer
    fields = ("reward", "extracted_answer", "error_mode", "bct_field")
    assert {key: answer[key] for key in fields} == {key: rollout[key] for key in fields}


def test_recorded_rollouts_show_several_error_modes():
    assert {rollout["error_mode"] for rollout in ROLLOUTS} == {
        "correct",
        "wrong_answer",
        "refusal",
        "malformed_choice",
    }


# ---- aggregate metrics ----------------------------------------------------------------------------------


def scored(
    task: int, rollout: int, reward: float, extracted: str | None, mode: str | None, **group: Any
) -> dict:
    return {
        "responses_create_params": ROWS[0]["responses_create_params"],
        "response": A_RESPONSE,
        "reward": reward,
        "extracted_answer": extracted,
        **({"error_mode": mode} if mode else {}),
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
        **group,
    }


async def test_aggregate_metrics_by_group_and_error_mode(server):
    organic = {"source": "set one", "bct_field": "organic", "bct_subfield": "rings/aromatic"}
    physical = {"source": "set one", "bct_field": "physical"}
    rollouts = [
        scored(0, 0, 1.0, "A", "correct", **organic),
        scored(0, 1, 0.0, "B", "wrong_answer", **organic),
        scored(1, 0, 0.0, None, "refusal", **physical),
        scored(1, 1, 0.0, None, None, **physical),  # recorded without a mode: format_violation
    ]
    status, result = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    metrics, key = result["agent_metrics"], result["key_metrics"]
    assert metrics["pass@2/accuracy"] == 50.0
    assert metrics["by_source/set_one/pass@1[avg-of-2]/accuracy"] == 25.0
    assert metrics["by_bct_field/organic/pass@2/accuracy"] == 100.0
    assert metrics["by_bct_field/physical/pass@2/accuracy"] == 0.0
    assert metrics["by_bct_subfield/organic/rings__aromatic/majority@2/accuracy"] == 50.0
    assert not any(name.startswith("by_bct_subfield/physical") for name in metrics)
    assert (metrics["error_modes/format_violation"], metrics["error_modes/format_violation/count"]) == (
        25.0,
        1.0,
    )
    assert metrics["error_modes/early_termination"] == 0.0
    assert key["error_modes/refusal"] == 25.0 and "error_modes/refusal/count" not in key
    assert {"mean/reward", "pass@2/accuracy", "majority@2/accuracy", "pass@1/accuracy"} <= set(key)


async def test_aggregate_metrics_of_nothing_is_empty(server):
    assert await post_json(server.url + "/aggregate_metrics", {"verify_responses": []}) == (
        200,
        EMPTY_AGGREGATE_METRICS,
    )


def test_config_declares_the_environment_and_its_agent():
    _, resources, _ = check_environment_config(FOLDER, "bunsenbench_chemistry_mcq", "knowledge")
    assert resources.grading_timeout_seconds == 5
