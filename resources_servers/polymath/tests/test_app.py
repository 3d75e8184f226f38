"""polymath: the weighted metrics in-process, then /verify and /aggregate_metrics against one real server."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from nemo_gym.testing import (
    BASE_VERIFY_FIELDS,
    StartedServer,
    check_environment_config,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_resources_server,
)
from resources_servers.math_with_judge.judging import rollout_scores
from resources_servers.polymath.weighted import majority_solved, unbiased_pass_at_k, weighted_metrics

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "polymath"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
ROW = {key: value for key, value in ROWS[1].items() if key != "agent_ref"}  # fr, weight 2, answer 2
RUN_ONLY_KEYS = (
    "agent_ref",
    "_ng_environment_server",
    "_ng_result_type",
    "_ng_task_index",
    "_ng_rollout_index",
)
# The symbolic check's deadline, generous for a loaded machine: a check past it would be masked, not scored.
DEADLINE_S = 60


def rollout(solved: bool, answer: str | None, weight: float | None = None, language: str = "en") -> dict:
    return {
        "reward": float(solved),
        "library_reward": float(solved),
        "extracted_answer": answer,
        "judge_evaluations": None,
        "weight": weight,
        "language": language,
    }


# --- weighted metrics (in-process) ------------------------------------------------------------------


def test_a_task_counts_with_its_weight():
    tasks = [[rollout(True, "1", weight=1.0)], [rollout(False, "2", weight=4.0)], [rollout(True, "3")]]
    metrics = weighted_metrics(tasks, rollout_scores, "extracted_answer")
    # solved weight 1 + 1 (no weight: 1) of total 1 + 4 + 1
    assert metrics["pass@1/symbolic_accuracy_weighted"] == pytest.approx(100 * 2 / 6)
    assert metrics["pass@1[avg-of-1]/symbolic_accuracy_weighted"] == pytest.approx(100 * 2 / 6)
    assert "majority@1/symbolic_accuracy_weighted" not in metrics


def test_weighted_pass_at_k_average_and_majority_over_repeats():
    heavy = [rollout(True, "7", 8.0), rollout(False, "5", 8.0), rollout(False, "5", 8.0)]
    light = [rollout(False, "1", 2.0), rollout(False, None, 2.0), rollout(True, "2", 2.0)]
    metrics = weighted_metrics([heavy, light], rollout_scores, "extracted_answer")
    pass_2 = (8 * (1 - 1 / 3) + 2 * (1 - 1 / 3)) / 10
    assert metrics["pass@2/symbolic_accuracy_weighted"] == pytest.approx(100 * pass_2)
    assert metrics["pass@3/symbolic_accuracy_weighted"] == pytest.approx(100.0)
    assert metrics["pass@1[avg-of-2]/symbolic_accuracy_weighted"] == pytest.approx(
        100 * (8 * 0.5 + 2 * 0) / 10
    )
    # heavy: "5" (unsolved) wins 2 to 1; light: "1" (unsolved) and "2" (solved) tie, the None vote is ignored
    assert metrics["majority@3/symbolic_accuracy_weighted"] == pytest.approx(100 * (8 * 0 + 2 * 0.5) / 10)
    # k=2: heavy ties ("7", solved) with ("5", unsolved); light has only "1" (unsolved) answered
    assert metrics["majority@2/symbolic_accuracy_weighted"] == pytest.approx(100 * (8 * 0.5) / 10)


def test_the_estimator_and_the_vote():
    assert unbiased_pass_at_k([True, False, False, False], 2) == pytest.approx(1 - 3 / 6)
    assert majority_solved([("a", True), ("b", False), ("b", False)]) == 0.0
    assert majority_solved([(None, True), (None, True)]) == 0.0
    assert majority_solved([(["x"], True), (["x"], True), ({"y": 1}, False)]) == 1.0


@pytest.mark.parametrize("weight", [None, 0, -1.0, "heavy", float("nan")])
def test_a_weight_that_is_not_a_positive_number_counts_as_1(weight):
    tasks = [[rollout(True, "1", weight=weight)], [rollout(False, "2", weight=1.0)]]
    assert (
        weighted_metrics(tasks, rollout_scores, "extracted_answer")["pass@1/symbolic_accuracy_weighted"]
        == 50.0
    )


# --- /verify ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    inner = {"domain": "math", "grading_timeout_s": DEADLINE_S}
    with run_resources_server(INSTANCE, tmp_path_factory.mktemp(INSTANCE), **inner) as started:
        yield started


async def verify(server: StartedServer, text: str, **row_changes: object) -> dict:
    body = {**ROW, **row_changes, "response": response_with(message_item(text), **A_RESPONSE)}
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 200, answer
    return answer


async def test_an_equivalent_boxed_answer_earns_1_and_the_answer_echoes_weight_and_language(server):
    body = await verify(server, "Le minimum est $\\boxed{\\frac{4}{2}}$.")
    assert body["reward"] == 1.0 and body["library_reward"] == 1.0
    assert (body["weight"], body["language"], body["expected_answer"]) == (2.0, "fr", "2")
    assert body["mask_sample"] is False
    assert set(body) == {
        *BASE_VERIFY_FIELDS,
        "expected_answer",
        "extracted_answer",
        "library_reward",
        "judge_evaluations",
        "judge_failure",
        "weight",
        "language",
    }


async def test_a_different_answer_earns_0(server):
    body = await verify(server, "$\\boxed{11}$")
    assert body["reward"] == 0.0 and body["extracted_answer"] == "11"


async def test_a_reply_without_an_answer_earns_0(server):
    body = await verify(server, "Je ne sais pas.")
    assert body["reward"] == 0.0 and body["extracted_answer"] is None and body["mask_sample"] is False


async def test_a_row_without_weight_or_language_still_verifies(server):
    row = {key: value for key, value in ROW.items() if key not in ("weight", "language")}
    body = {**row, "response": response_with(message_item("$\\boxed{2}$"), **A_RESPONSE)}
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 200 and answer["reward"] == 1.0
    assert (answer["weight"], answer["language"]) == (None, None)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"weight": 0}, "weight"),
        ({"weight": -2.0}, "weight"),
        ({"weight": "heavy"}, "weight"),
        ({"language": ["fr"]}, "language"),
        ({"expected_answer": None}, "expected_answer"),
        ({"question": 3}, "question"),
    ],
)
async def test_a_malformed_row_is_a_422_naming_the_field(server, change, field):
    status, body = await post_json(server.url + "/verify", {**ROW, **change, "response": A_RESPONSE})
    assert status == 422 and ["body", field] in [error["loc"] for error in body["detail"]]


# --- metrics, recorded data, config -----------------------------------------------------------------


async def test_aggregate_metrics_add_per_language_and_weighted_families(server):
    results = [
        await verify(server, "$\\boxed{2}$"),  # fr, weight 2: right
        await verify(server, "$\\boxed{3}$"),  # fr, weight 2: wrong
        await verify(server, "$\\boxed{3}$", expected_answer="3", language="zh", weight=8.0),
        await verify(server, "$\\boxed{3}$", expected_answer="3", language="zh", weight=8.0),
    ]
    rollouts = [
        {**result, "_ng_task_index": i // 2, "_ng_rollout_index": i % 2} for i, result in enumerate(results)
    ]
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    metrics = body["agent_metrics"]
    assert metrics["pass@1[avg-of-2]/symbolic_accuracy"] == pytest.approx(100 * (0.5 + 1.0) / 2)
    assert metrics["fr/pass@1[avg-of-2]/symbolic_accuracy"] == pytest.approx(50.0)
    assert metrics["zh/pass@2/symbolic_accuracy"] == pytest.approx(100.0)
    assert metrics["pass@1[avg-of-2]/symbolic_accuracy_weighted"] == pytest.approx(100 * (2 * 0.5 + 8) / 10)
    assert metrics["majority@2/symbolic_accuracy_weighted"] == pytest.approx(100 * (2 * 0.5 + 8) / 10)
    key = body["key_metrics"]
    assert (
        key["pass@1[avg-of-2]/symbolic_accuracy_weighted"]
        == metrics["pass@1[avg-of-2]/symbolic_accuracy_weighted"]
    )
    assert "pass@2/symbolic_accuracy_weighted" in key and "fr/pass@2/symbolic_accuracy" not in key


@pytest.mark.parametrize(
    ("row", "recorded"), list(zip(ROWS, ROLLOUTS, strict=True)), ids=lambda value: value["language"]
)
async def test_recorded_rollouts_verify_to_their_recorded_answer(server, row, recorded):
    # The answer leaves the question out (as math_with_judge's does); the row supplies it again.
    status, body = await post_json(server.url + "/verify", {**recorded, "question": row["question"]})
    assert status == 200, body
    assert body == {key: value for key, value in recorded.items() if key not in RUN_ONLY_KEYS}


def test_the_recordings_mix_right_and_wrong_answers_across_languages_and_weights():
    assert [recorded["reward"] for recorded in ROLLOUTS] == [1.0, 0.0, 1.0, 0.0, 1.0]
    assert len({recorded["language"] for recorded in ROLLOUTS}) == 5
    assert {recorded["weight"] for recorded in ROLLOUTS} == {1.0, 2.0, 4.0, 8.0}


def test_config_declares_the_environment_and_its_agent():
    _, resources, _ = check_environment_config(FOLDER, INSTANCE, "math")
    assert resources.should_use_judge is False
    assert {row["agent_ref"]["name"] for row in ROWS} == {"polymath_simple_agent"}
