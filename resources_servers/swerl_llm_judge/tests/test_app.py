"""swerl_llm_judge: the choice readers in-process, then /verify and /aggregate_metrics against one real server."""

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
)
from resources_servers.swerl_llm_judge.grading import last_solution_block, lenient_choice, strict_choice

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "swerl_llm_judge"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
ROW = {key: value for key, value in ROWS[1].items() if key != "agent_ref"}  # options A-C, gold A, lenient
RUN_ONLY_KEYS = (
    "agent_ref",
    "_ng_environment_server",
    "_ng_result_type",
    "_ng_task_index",
    "_ng_rollout_index",
)
ABC = frozenset("ABC")


# --- reading the choice (in-process) ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "choice"),
    [
        ("<solution>B</solution>", "B"),
        ("<SOLUTION> [c] </Solution>", "C"),
        ("<solution>Option B is best</solution>", "B"),
        ("<solution>A</solution> on reflection <solution>C.</solution>", "C"),  # the last block
        ("<solution>The answer: B</solution>", "B"),  # words are skipped, the first standalone letter counts
        ("<solution>D</solution>", None),  # no such option
        ("<solution>I pick D, not A</solution>", None),  # the first standalone letter decides
        ("<solution>The second patch</solution>", None),
        ("<solution></solution>", None),
        ("B", None),
        ("<solution>B", None),
        ("<solution><solution>A</solution>", "A"),
    ],
)
def test_lenient_reads_the_first_standalone_letter_of_the_last_block(text, choice):
    assert lenient_choice(text, ABC) == choice


@pytest.mark.parametrize(
    ("text", "choice"),
    [
        ("<solution>B</solution>", "B"),
        ("<solution> [a] </solution>", "A"),
        ("<solution>A</solution> <solution>C</solution>", "A"),  # the first block
        ("<solution>Option B</solution>", None),
        ("<SOLUTION>B</SOLUTION>", None),
        ("<solution>D</solution>", None),
        ("<solution>AB</solution>", None),
    ],
)
def test_strict_reads_the_first_block_holding_only_a_letter(text, choice):
    assert strict_choice(text, ABC) == choice


def test_without_options_any_letter_is_a_choice():
    assert lenient_choice("<solution>Z</solution>", frozenset()) == "Z"
    assert strict_choice("<solution>Z</solution>", frozenset()) == "Z"


def reference_block(text: str) -> str | None:
    """The rule as the plain lazy pattern: fine on short texts, quadratic on unclosed tags."""
    matches = list(re.finditer(r"<solution>\s*(.*?)\s*</solution>", text, flags=re.DOTALL | re.IGNORECASE))
    return matches[-1].group(1).strip() if matches else None


def test_the_block_finder_agrees_with_the_lazy_pattern_on_random_texts():
    rng = random.Random(29)
    pieces = ["<solution>", "</solution>", "<SOLUTION>", "</Solution>", "A", " ", "\n", "x", "<", "/"]
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(10)))
        assert last_solution_block(text) == reference_block(text), repr(text)


def test_finding_the_block_is_linear_in_the_text():
    unclosed, first_s = cpu_time_of(last_solution_block, "<solution> A " * 200_000)
    closed, second_s = cpu_time_of(last_solution_block, "<solution>" * 200_000 + "B</solution>")
    assert unclosed is None and closed == "<solution>" * 199_999 + "B"
    assert first_s + second_s < LINEAR_CPU_BUDGET_S, (first_s, second_s)


# --- /verify ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server(INSTANCE, tmp_path_factory.mktemp(INSTANCE), domain="coding") as started:
        yield started


async def verify(server: StartedServer, *items: dict, **row_changes: object) -> dict:
    body = {**ROW, **row_changes, "response": response_with(*items, **A_RESPONSE)}
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 200, answer
    return answer


async def test_the_gold_letter_earns_1_and_the_answer_echoes_the_row(server):
    body = await verify(server, message_item("Reasoning.\n<solution>[A]</solution>"))
    assert body["reward"] == 1.0 and body["extracted_answer"] == "A"
    row_fields = (
        "options",
        "expected_answer",
        "grading_mode",
        "instance_id",
        "dataset_name",
        "dataset_split",
    )
    assert {key: body[key] for key in row_fields} == {key: ROW[key] for key in row_fields}
    assert body["metadata"] == ROW["metadata"]
    assert set(body) == {*BASE_VERIFY_FIELDS, *row_fields, "metadata", "extracted_answer"}


async def test_another_option_earns_0(server):
    body = await verify(server, message_item("<solution>C</solution>"))
    assert body["reward"] == 0.0 and body["extracted_answer"] == "C"


async def test_strict_mode_refuses_words_in_the_block(server):
    body = await verify(server, message_item("<solution>A is best</solution>"), grading_mode="strict")
    assert body["reward"] == 0.0 and body["extracted_answer"] is None


async def test_any_of_several_gold_letters_earns_1_and_gold_is_normalized(server):
    body = await verify(server, message_item("<solution>C</solution>"), expected_answer=[" c", "A", "a"])
    assert body["reward"] == 1.0 and body["expected_answer"] == ["C", "A"]


async def test_messages_are_joined_by_lines_and_reasoning_is_not_read(server):
    reasoning = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "<solution>C</solution>"}],
    }
    body = await verify(
        server, message_item("<solution>"), message_item("A</solution>", id="msg_2"), reasoning
    )
    assert body["reward"] == 1.0 and body["extracted_answer"] == "A"


@pytest.mark.parametrize(
    "items",
    [
        (message_item("I choose A."),),
        (message_item("<solution>D</solution>"),),
        (message_item(""),),
        (),
        (function_call_item("choose", {"letter": "A"}),),
    ],
    ids=["no-block", "not-an-option", "empty-text", "no-output", "function-call-only"],
)
async def test_a_reply_without_a_readable_choice_earns_0(server, items):
    body = await verify(server, *items)
    assert body["reward"] == 0.0 and body["extracted_answer"] is None and body["mask_sample"] is False


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"expected_answer": "D"}, "expected_answer"),  # not an option
        ({"expected_answer": "AB"}, "expected_answer"),
        ({"expected_answer": []}, "expected_answer"),
        ({"expected_answer": None}, "expected_answer"),
        ({"options": [{"A": "x", "B": "y"}]}, "options"),
        ({"options": [{"1": "x"}]}, "options"),
        ({"options": "A: x"}, "options"),
        ({"grading_mode": "fuzzy"}, "grading_mode"),
        ({"metadata": "repo"}, "metadata"),
    ],
)
async def test_a_malformed_row_is_a_422_naming_the_field(server, change, field):
    status, body = await post_json(server.url + "/verify", {**ROW, **change, "response": A_RESPONSE})
    assert status == 422 and ["body", field] in [error["loc"][:2] for error in body["detail"]]


async def test_a_row_without_gold_is_a_422(server):
    row = {key: value for key, value in ROW.items() if key != "expected_answer"}
    status, body = await post_json(server.url + "/verify", {**row, "response": A_RESPONSE})
    assert status == 422 and ["body", "expected_answer"] in [error["loc"] for error in body["detail"]]


# --- metrics, recorded data, config -----------------------------------------------------------------


async def test_aggregate_metrics_give_pass_at_k_and_majority(server):
    results = [
        await verify(server, message_item("<solution>A</solution>")),
        await verify(server, message_item("<solution>B</solution>")),
        await verify(server, message_item("<solution>B</solution>")),
        await verify(server, message_item("no choice")),
    ]
    rollouts = [
        {**result, "_ng_task_index": i // 2, "_ng_rollout_index": i % 2} for i, result in enumerate(results)
    ]
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    metrics = body["agent_metrics"]
    assert metrics["pass@1[avg-of-2]/accuracy"] == pytest.approx(100 * (0.5 + 0.0) / 2)
    assert metrics["pass@2/accuracy"] == pytest.approx(100 * (1.0 + 0.0) / 2)
    assert metrics["majority@2/accuracy"] == pytest.approx(100 * (0.5 + 0.0) / 2)  # A/B tie shares the win
    assert metrics["pass@1[avg-of-2]/no_answer"] == pytest.approx(100 * (0.0 + 0.5) / 2)
    assert body["key_metrics"]["pass@2/accuracy"] == metrics["pass@2/accuracy"]
    assert "pass@1/accuracy" not in body["key_metrics"]


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["instance_id"])
async def test_recorded_rollouts_verify_to_their_recorded_answer(server, rollout):
    status, body = await post_json(server.url + "/verify", rollout)
    assert status == 200, body
    assert body == {key: value for key, value in rollout.items() if key not in RUN_ONLY_KEYS}


def test_the_recordings_mix_right_wrong_and_unreadable_choices_in_both_modes():
    assert [rollout["reward"] for rollout in ROLLOUTS] == [1.0, 1.0, 0.0, 0.0, 1.0]
    assert {rollout["grading_mode"] for rollout in ROLLOUTS} == {"strict", "lenient"}
    assert any(rollout["extracted_answer"] is None for rollout in ROLLOUTS)


def test_config_declares_the_environment_and_its_agent():
    _, resources, _ = check_environment_config(FOLDER, INSTANCE, "coding")
    assert resources.dataset_name == "SWE-RL-llm-judge"
    assert {row["agent_ref"]["name"] for row in ROWS} == {"swerl_llm_judge_simple_agent"}
