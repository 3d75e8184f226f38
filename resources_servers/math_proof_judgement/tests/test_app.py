"""math_proof_judgement: verdict reading and classification metrics in-process (cheap), everything else
over HTTP against real server processes."""

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
from resources_servers.math_proof_judgement.grading import (
    classification_metrics,
    majority_verdict,
    parse_judgement,
    pass_verdict,
    strip_thinking,
)

FOLDER = Path(__file__).resolve().parents[1]
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
GRADED_FIELDS = {"extracted_judgement", "tp", "fp", "fn", "tn"}
MUSING = "<think>Judgement: No, unless the base case holds.</think>It is fine.\nJudgement: Yes"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server(
        "math_proof_judgement", tmp_path_factory.mktemp("mpj"), domain="math"
    ) as started:
        yield started


@pytest.fixture(scope="module")
def parity_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp("mpj_parity")
    with run_resources_server(
        "mpj_parity", workdir, implementation="math_proof_judgement", domain="math", skills_parity_mode=True
    ) as started:
        yield started


def body_for(*items: dict, **row: Any) -> dict:
    return {
        "responses_create_params": {"input": [{"role": "user", "content": "Judge this proof."}]},
        "expected_judgement": "Judgement: Yes",
        "problem_id": "p1",
        "response": response_with(*items, **A_RESPONSE),
        **row,
    }


async def verify(server: StartedServer, text: str, **row: Any) -> dict:
    status, answer = await post_json(server.url + "/verify", body_for(message_item(text), **row))
    assert status == 200, answer
    return answer


# ---- reading the verdict (pure functions) ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("Judgement: Yes", True),
        ("judgement:no.", False),
        ("**Judgement**: **Yes**", True),
        ("**Judgement:** No", False),
        ("Judgement: Yes\nJudgement: No", True),  # the first one counts
        ("Judgement: maybe", None),
        ("Judgment: Yes", None),  # the spelling is part of the format
        ("The proof is correct.", None),
        ("", None),
    ],
)
def test_reading_the_verdict(text, verdict):
    assert parse_judgement(text) is verdict


def test_reasoning_is_removed_before_reading():
    assert strip_thinking(MUSING) == "It is fine.\nJudgement: Yes"
    assert (
        strip_thinking("Judgement: No maybe...</think>Judgement: Yes") == "Judgement: Yes"
    )  # opener stripped
    assert strip_thinking("<thinking>Judgement: No</thinking> Judgement: Yes") == "Judgement: Yes"
    result, cpu_s = cpu_time_of(strip_thinking, "<think>" * 100_000 + "Judgement: Yes")
    assert parse_judgement(result) is True and cpu_s < LINEAR_CPU_BUDGET_S


def test_best_of_k_and_majority_verdicts():
    assert pass_verdict([False, None, True], gold=True) is True
    assert pass_verdict([None, False, True], gold=None) is False
    assert pass_verdict([None, None], gold=True) is None
    assert majority_verdict([True, False, False]) is False
    assert majority_verdict([None, False, True]) is False  # a tie goes to the first readable verdict
    assert majority_verdict([None]) is None


def judged(gold: str, *labels: str | None) -> list[dict[str, Any]]:
    return [{"expected_judgement": f"Judgement: {gold}", "extracted_judgement": label} for label in labels]


def test_classification_metrics_follow_skills_averaging():
    tasks = [judged("Yes", "Yes", "No"), judged("Yes", "No", None), judged("No", "Yes", "No")]
    metrics = classification_metrics(tasks)
    assert metrics["total_positives"] == 2.0
    # Sample 0: tp 1, fp 1, fn 1 → P 1/2, R 1/2, F1 1/2. Sample 1: tp 0, fp 0, fn 1 → P 1, R 0, F1 0.
    assert metrics["pass@1[avg-of-1]/precision"] == pytest.approx(50.0)
    assert metrics["pass@1[avg-of-2]/precision"] == pytest.approx(75.0)
    assert metrics["pass@1[avg-of-2]/recall"] == pytest.approx(25.0)
    assert metrics["pass@1[avg-of-2]/f1"] == pytest.approx(25.0)
    # Best of 2: task 0 Yes (tp), task 1 No (fn), task 2 No (tn) → P 1/1, R 1/2.
    assert metrics["pass@2/precision"] == pytest.approx(100.0)
    assert metrics["pass@2/recall"] == pytest.approx(50.0)
    # Majority of 2: ties go to the first verdict: Yes (tp), No (fn), Yes (fp).
    assert metrics["majority@2/precision"] == pytest.approx(50.0)
    assert metrics["majority@2/recall"] == pytest.approx(50.0)


def test_classification_metrics_defaults_without_positives():
    metrics = classification_metrics([judged("No", "No")])
    assert (metrics["pass@1[avg-of-1]/precision"], metrics["pass@1[avg-of-1]/recall"]) == (100.0, 100.0)
    assert classification_metrics([]) == {}


# ---- /verify over HTTP ----------------------------------------------------------------------------------


async def test_verify_echoes_the_row_and_one_hot_confusion(server):
    answer = await verify(server, "Correct.\nJudgement: Yes", source="proofbench")
    expected_fields = {
        *BASE_VERIFY_FIELDS,
        *GRADED_FIELDS,
        "expected_judgement",
        "problem_id",
        "problem",
        "proof",
    }
    assert set(answer) == {*expected_fields, "source"}
    assert (answer["reward"], answer["extracted_judgement"]) == (1.0, "Yes")
    assert (answer["tp"], answer["fp"], answer["fn"], answer["tn"]) == (1.0, 0.0, 0.0, 0.0)


@pytest.mark.parametrize(
    ("gold", "text", "reward", "cell"),
    [
        ("Yes", "Judgement: No", 0.0, "fn"),
        ("No", "Judgement: Yes", 0.0, "fp"),
        ("No", "**Judgement**: No", 1.0, "tn"),
    ],
)
async def test_each_confusion_cell(server, gold, text, reward, cell):
    answer = await verify(server, text, expected_judgement=f"Judgement: {gold}")
    assert answer["reward"] == reward
    assert {name for name in ("tp", "fp", "fn", "tn") if answer[name] == 1.0} == {cell}


async def test_no_verdict_scores_zero_with_no_confusion_cell(server):
    answer = await verify(server, "The proof looks right to me.")
    assert (answer["reward"], answer["extracted_judgement"]) == (0.0, None)
    assert answer["tp"] == answer["fp"] == answer["fn"] == answer["tn"] == 0.0


async def test_tool_calls_and_empty_output_have_no_verdict(server):
    status, answer = await post_json(server.url + "/verify", body_for(function_call_item("check", {"x": 1})))
    assert status == 200 and (answer["reward"], answer["extracted_judgement"]) == (0.0, None)


async def test_reasoning_blocks_are_skipped_unless_skills_parity_is_asked(server, parity_server):
    assert (await verify(server, MUSING))["extracted_judgement"] == "Yes"
    assert (await verify(parity_server, MUSING))["extracted_judgement"] == "No"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"expected_judgement": "Yes"}, "expected_judgement"),
        ({"expected_judgement": "Judgement: unsure"}, "expected_judgement"),
        ({"expected_judgement": None}, "expected_judgement"),
        ({"problem_id": ["p"]}, "problem_id"),
        ({"response": None}, "response"),
    ],
)
async def test_malformed_rows_are_422_naming_the_field(server, change, field):
    status, answer = await post_json(
        server.url + "/verify", {**body_for(message_item("Judgement: Yes")), **change}
    )
    assert status == 422, answer
    assert any(error["loc"][:2] == ["body", field] for error in answer["detail"]), answer


# ---- recorded rollouts ----------------------------------------------------------------------------------


@pytest.mark.parametrize("index", range(len(ROLLOUTS)))
async def test_recorded_rollouts_reproduce_their_reward(server, index):
    rollout = ROLLOUTS[index]
    task = ROWS[rollout["_ng_task_index"]]
    status, answer = await post_json(server.url + "/verify", {**task, "response": rollout["response"]})
    assert status == 200, answer
    assert {key: answer[key] for key in ("reward", *GRADED_FIELDS)} == {
        key: rollout[key] for key in ("reward", *GRADED_FIELDS)
    }


def test_recorded_rollouts_fill_every_confusion_cell_and_a_missing_verdict():
    cells = {name for rollout in ROLLOUTS for name in ("tp", "fp", "fn", "tn") if rollout[name] == 1.0}
    assert cells == {"tp", "fp", "fn", "tn"}
    assert any(rollout["extracted_judgement"] is None for rollout in ROLLOUTS)


# ---- aggregate metrics ----------------------------------------------------------------------------------


async def test_aggregate_metrics_add_confusion_pass_at_k_and_precision_recall(server):
    rollouts = [
        {
            k: v
            for k, v in rollout.items()
            if not k.startswith("_ng_") or k in ("_ng_task_index", "_ng_rollout_index")
        }
        for rollout in ROLLOUTS
    ]
    status, result = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    metrics, key = result["agent_metrics"], result["key_metrics"]
    assert metrics["pass@1/true_positive"] == 20.0 and metrics["pass@1/false_negative"] == 20.0
    assert metrics["pass@1[avg-of-1]/no_answer"] == 20.0
    assert metrics["total_positives"] == 3.0
    assert metrics["pass@1[avg-of-1]/precision"] == pytest.approx(50.0)  # tp 1, fp 1
    assert metrics["pass@1[avg-of-1]/recall"] == pytest.approx(100 / 3)  # 1 of 3 positives
    assert metrics["majority@1/f1"] == pytest.approx(40.0)
    assert key == {
        "mean/reward": pytest.approx(0.4),
        "pass@1[avg-of-1]/accuracy": 40.0,
        "pass@1[avg-of-1]/f1": pytest.approx(40.0),
        "pass@1[avg-of-1]/precision": pytest.approx(50.0),
        "pass@1[avg-of-1]/recall": pytest.approx(100 / 3),
        "pass@1[avg-of-1]/no_answer": 20.0,
        "pass@1/accuracy": 40.0,
        "pass@1/f1": pytest.approx(40.0),
        "pass@1/no_answer": 20.0,
        "majority@1/accuracy": 40.0,
        "majority@1/f1": pytest.approx(40.0),
    }


async def test_aggregate_metrics_of_nothing_is_empty(server):
    assert await post_json(server.url + "/aggregate_metrics", {"verify_responses": []}) == (
        200,
        EMPTY_AGGREGATE_METRICS,
    )


def test_config_declares_the_environment_and_its_agent():
    _, resources, _ = check_environment_config(FOLDER, "math_proof_judgement", "math")
    assert resources.skills_parity_mode is False
