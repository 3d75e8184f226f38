"""proof_genselect: the selection parser in-process (cheap); the server over HTTP (one process, plus one for
`assert_think_end`)."""

from __future__ import annotations

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
)
from resources_servers.proof_genselect.grading import Selection, select, tag_contents

FOLDER = Path(__file__).resolve().parents[1]
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
PAIR_ROW = ROWS[1]  # proof_1, proof_2; correct_index 2
SET_ROW = ROWS[3]  # three candidates; expected_answer [1, 3], num_solutions 3
A_RESPONSE = ROLLOUTS[0]["response"]


def pick(index: Any) -> str:
    return f"Proof {index} is rigorous.\n<best_solution>{index}</best_solution>"


# ---- parsing (pure functions) ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "selection"),
    [
        ("<best_solution>2</best_solution>", Selection(2)),
        ("<best_solution> 1 \n</best_solution>", Selection(1)),
        ("I pick <best_solution>2</best_solution> and again <best_solution>2</best_solution>", Selection(2)),
        ("Proof 2 is best.", Selection(None, "missing_best_solution_tag")),
        ("<best_solution>2", Selection(None, "missing_best_solution_tag")),  # never closed
        ("", Selection(None, "missing_best_solution_tag")),
        ("<best_solution>two</best_solution>", Selection(None, "invalid_best_solution_value")),
        ("<best_solution>Proof 2</best_solution>", Selection(None, "invalid_best_solution_value")),
        ("<best_solution>-1</best_solution>", Selection(None, "invalid_best_solution_value")),
        ("<best_solution>٢</best_solution>", Selection(None, "invalid_best_solution_value")),  # not ASCII
        (
            "<best_solution>1</best_solution> or <best_solution>2</best_solution>",
            Selection(None, "conflicting_best_solutions"),
        ),
        ("<best_solution>3</best_solution>", Selection(None, "best_solution_out_of_range")),
        ("<best_solution>0</best_solution>", Selection(None, "best_solution_out_of_range")),
        ("<best_solution>" + "9" * 5000 + "</best_solution>", Selection(None, "best_solution_out_of_range")),
        (
            "<think>maybe <best_solution>2</best_solution></think>Final: <best_solution>1</best_solution>",
            Selection(1),
        ),
        (
            "<think>x</think><think>y <best_solution>1</best_solution></think> none after",
            Selection(None, "missing_best_solution_tag"),
        ),
    ],
)
def test_selection_parsing_with_two_candidates(text, selection):
    assert select(text, 2, require_think_end=False) == selection


def test_without_a_candidate_count_any_positive_index_is_read():
    assert select("<best_solution>7</best_solution>", None, require_think_end=False) == Selection(7)


def test_require_think_end():
    assert select("<best_solution>1</best_solution>", 2, require_think_end=True) == Selection(
        None, "missing_think_end"
    )
    assert select(
        "<think>hm</think><best_solution>1</best_solution>", 2, require_think_end=True
    ) == Selection(1)


def test_tag_scan_is_linear_on_many_unclosed_tags():
    assert tag_contents("<best_solution>" * 200_000) == []


# ---- /verify over HTTP ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("proof_genselect")


@pytest.fixture(scope="module")
def server(workdir: Path) -> Iterator[StartedServer]:
    with run_resources_server("proof_genselect", workdir, domain="math") as started:
        yield started


def body_for(row: dict, *items: dict, **changes: Any) -> dict:
    body = {**row, "response": response_with(*items, **A_RESPONSE), **changes}
    return {key: value for key, value in body.items() if value is not None}


async def verify(server: StartedServer, row: dict, *items: dict, **changes: Any) -> dict:
    status, answer = await post_json(server.url + "/verify", body_for(row, *items, **changes))
    assert status == 200, answer
    return answer


async def outcome(server: StartedServer, row: dict, text: str, **changes: Any) -> tuple[float, Any, Any]:
    answer = await verify(server, row, message_item(text), **changes)
    return answer["reward"], answer["extracted_answer"], answer["parse_error"]


async def test_the_correct_pick_earns_1_and_the_row_is_echoed(server):
    answer = await verify(server, PAIR_ROW, message_item(pick(2)))
    assert (answer["reward"], answer["extracted_answer"], answer["parse_error"]) == (1.0, 2, None)
    assert answer["correct_indices"] == [2]
    for field in ("problem", "proof_1", "proof_2", "correct_index", "agent_ref"):
        assert answer[field] == PAIR_ROW[field]
    assert await outcome(server, PAIR_ROW, pick(1)) == (0.0, 1, None)


async def test_any_index_of_a_correct_set_earns_1(server):
    assert await outcome(server, SET_ROW, pick(1)) == (1.0, 1, None)
    assert await outcome(server, SET_ROW, pick(3)) == (1.0, 3, None)
    assert await outcome(server, SET_ROW, pick(2)) == (0.0, 2, None)
    assert await outcome(server, SET_ROW, pick(4)) == (0.0, None, "best_solution_out_of_range")


async def test_the_candidate_count_comes_from_num_solutions_or_the_proof_fields(server):
    assert await outcome(server, PAIR_ROW, pick(3)) == (0.0, None, "best_solution_out_of_range")
    assert await outcome(server, PAIR_ROW, pick(3), num_solutions=3) == (0.0, 3, None)
    no_fields = {key: value for key, value in PAIR_ROW.items() if not key.startswith("proof_")}
    assert await outcome(server, no_fields, pick(9)) == (0.0, 9, None)  # count unknown: any index is read


@pytest.mark.parametrize(
    ("changes", "correct"),
    [
        ({"correct_index": None, "expected_answer": 2}, [2]),
        ({"correct_index": None, "expected_answer": "2"}, [2]),
        ({"correct_index": [2], "expected_answer": [2]}, [2]),
        ({"correct_index": [1, 2]}, [1, 2]),
    ],
)
async def test_correct_index_and_expected_answer_are_both_accepted(server, changes, correct):
    answer = await verify(server, PAIR_ROW, message_item(pick(2)), **changes)
    assert (answer["reward"], answer["correct_indices"]) == (1.0, correct)


async def test_a_hedge_between_candidates_earns_nothing(server):
    hedge = "<best_solution>1</best_solution> or maybe <best_solution>2</best_solution>"
    assert await outcome(server, PAIR_ROW, hedge) == (0.0, None, "conflicting_best_solutions")


@pytest.mark.parametrize(
    "items",
    [
        [],
        [{"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": pick(2)}]}],
        [function_call_item("select", {"best": 2})],
        [message_item("")],
        [message_item("\u202e\x00\U0001f600 <best_solution>\ufeff2</best_solution>")],
    ],
    ids=["no output", "reasoning only", "function call only", "empty text", "odd unicode"],
)
async def test_answers_without_a_readable_selection_score_zero(server, items):
    answer = await verify(server, PAIR_ROW, *items)
    assert (answer["reward"], answer["extracted_answer"]) == (0.0, None)
    assert answer["parse_error"] in ("missing_best_solution_tag", "invalid_best_solution_value")


async def test_the_selection_is_read_from_every_message_joined_and_in_a_huge_text(server):
    answer = await verify(
        server, PAIR_ROW, message_item("<best_solution>"), message_item("2</best_solution>")
    )
    assert answer["reward"] == 1.0
    assert (await outcome(server, PAIR_ROW, "Checking step. " * 60_000 + pick(2)))[0] == 1.0


async def test_result_fields_in_the_row_do_not_override_the_result(server):
    assert await outcome(server, PAIR_ROW, pick(1), reward=1.0, extracted_answer=2, parse_error="x") == (
        0.0,
        1,
        None,
    )


@pytest.mark.parametrize(
    ("changes", "location", "complaint"),
    [
        ({"correct_index": None}, ["body"], "needs correct_index or expected_answer"),
        ({"expected_answer": 1}, ["body"], "name different candidates"),
        ({"correct_index": 3}, ["body"], "above the number of candidates (2)"),
        ({"correct_index": 0}, ["body", "correct_index"], ""),
        ({"correct_index": []}, ["body", "correct_index"], ""),
        ({"correct_index": "second"}, ["body", "correct_index"], ""),
        ({"num_solutions": 0}, ["body", "num_solutions"], ""),
        ({"response": {"output": "2"}}, ["body", "response"], ""),
    ],
)
async def test_malformed_rows_are_422_naming_the_problem(server, changes, location, complaint):
    status, answer = await post_json(
        server.url + "/verify", body_for(PAIR_ROW, message_item(pick(2)), **changes)
    )
    assert status == 422, answer
    assert any(
        error["loc"][: len(location)] == location and complaint in error["msg"] for error in answer["detail"]
    ), answer


async def test_assert_think_end_requires_closed_reasoning(workdir):
    with run_resources_server(
        "genselect_think", workdir, implementation="proof_genselect", domain="math", assert_think_end=True
    ) as strict:
        assert await outcome(strict, PAIR_ROW, pick(2)) == (0.0, None, "missing_think_end")
        assert await outcome(strict, PAIR_ROW, "<think>checking</think>" + pick(2)) == (1.0, 2, None)


# ---- metrics, recorded data, config ---------------------------------------------------------------------


async def test_aggregate_metrics_report_pass_at_k_and_majority_over_the_selection(server):
    picks = [[2, 1, 2], [1, "none", 3]]
    rollouts = []
    for task, (row, task_picks) in enumerate(zip((PAIR_ROW, SET_ROW), picks, strict=True)):
        for index, choice in enumerate(task_picks):
            answer = await verify(server, row, message_item(pick(choice) if choice != "none" else "unsure"))
            rollouts.append({**answer, "_ng_task_index": task, "_ng_rollout_index": index})
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    keys = body["key_metrics"]
    assert keys["pass@1[avg-of-3]/accuracy"] == pytest.approx(100 * (2 / 3 + 2 / 3) / 2)
    assert keys["pass@1[avg-of-3]/no_answer"] == pytest.approx(100 * (0 + 1 / 3) / 2)
    # Task 0 votes 2 (right) twice; task 1: 1 and 3 tie, both right.
    assert keys["majority@3/accuracy"] == pytest.approx(100.0)
    assert keys["pass@3/accuracy"] == pytest.approx(100.0)
    assert keys["mean/reward"] == pytest.approx(4 / 6)


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["problem"][:30])
async def test_recorded_rollouts_verify_to_their_recorded_reward(server, rollout):
    status, answer = await post_json(server.url + "/verify", rollout)
    assert status == 200, answer
    for field in ("reward", "extracted_answer", "parse_error", "correct_indices"):
        assert answer[field] == rollout[field]


def test_recorded_rollouts_cover_right_wrong_and_unparsable():
    assert [rollout["reward"] for rollout in ROLLOUTS].count(0.0) >= 2
    assert any(rollout["extracted_answer"] is None for rollout in ROLLOUTS)
    assert any(rollout["extracted_answer"] is not None and rollout["reward"] == 0.0 for rollout in ROLLOUTS)


def test_config_declares_the_environment_and_its_agent():
    _, resources, _ = check_environment_config(FOLDER, "proof_genselect", "math")
    assert resources.model_extra["assert_think_end"] is False
