"""iheval over HTTP: one real server process started from its own app.py."""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nemo_gym.testing import (
    StartedServer,
    check_environment_config,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_resources_server,
    without_verify_flags,
)

FOLDER = Path(__file__).resolve().parents[1]
IMPLEMENTATION = "iheval"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
DEADLINE_S = 2.0
RULES = {"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp(IMPLEMENTATION)
    with run_resources_server(
        IMPLEMENTATION, workdir, domain="instruction_following", grading_timeout_s=DEADLINE_S
    ) as started:
        yield started


def row(task: str, answer: Any, *items: dict, **fields: Any) -> dict:
    return {
        "responses_create_params": {"input": [{"role": "user", "content": "Hello"}]},
        "id": 9,
        "task": task,
        "domain": "task-execution",
        "setting": "conflict/default",
        "instruction": "Hello",
        "answer": json.dumps(answer),
        **fields,
        "response": response_with(*items, **A_RESPONSE),
    }


async def verify(server: StartedServer, body: dict) -> dict:
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 200, answer
    return answer


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=[str(rollout["id"]) for rollout in ROLLOUTS])
async def test_recorded_rollouts_verify_to_their_recorded_answer(server, rollout):
    assert without_verify_flags(await verify(server, rollout)) == rollout


async def test_the_example_rows_grade_the_recorded_responses(server):
    rollout_of_id = {rollout["id"]: rollout for rollout in ROLLOUTS}
    for example in ROWS:
        recorded = rollout_of_id[example["id"]]
        assert (await verify(server, {**example, "response": recorded["response"]}))["reward"] == recorded[
            "reward"
        ]
    assert len({rollout["reward"] for rollout in ROLLOUTS}) == 4, "the recordings earn different rewards"


async def test_the_answer_is_every_output_message_without_thinking(server):
    items = (message_item("<think>maybe Bob</think>"), message_item("Alice", id="msg_2"))
    body = await verify(server, row("slack-user", "Alice", *items))
    assert body["reward"] == 1.0 and body["generation"] == "Alice" and body["correct"] is True


async def test_nested_verifier_metadata_routes_the_row(server):
    nested = {"task": "slack-user", "setting": "aligned/default", "answer": "Alice", "id": "s-1"}
    body = row("", None, message_item("alice"), verifier_metadata=nested)
    for field in ("task", "setting", "answer", "id"):
        body.pop(field)
    answer = await verify(server, body)
    assert (answer["task"], answer["setting"], answer["row_id"], answer["reward"]) == (
        "slack-user",
        "aligned/default",
        "s-1",
        1.0,
    )


@pytest.mark.parametrize(
    ("task", "answer", "problem"),
    [
        ("poetry", "x", "not an IHEval task"),
        (
            "single-turn",
            {"instruction_id_list": ["count:nonsense"], "kwargs": [{}]},
            "unknown instruction id",
        ),
        (
            "single-turn",
            {"instruction_id_list": ["punctuation:no_comma"], "kwargs": []},
            "one entry per instruction",
        ),
        ("multi-turn", {"instruction_id_list": ["count:numbers"], "kwargs": [{"N": "x"}]}, "valid integer"),
        ("single-turn", "be nice", "instruction_id_list"),
        ("system-prompt-extract", {"access_code": "x"}, "label"),
        ("get-webpage", {"task": "summarize", "content": "x"}, "verb_extract"),
        ("lang-detect", [], "language name"),
        ("verb-extract", ["ran"], "a string"),
    ],
)
async def test_a_row_that_cannot_be_scored_is_a_422_saying_why(server, task, answer, problem):
    status, body = await post_json(server.url + "/verify", row(task, answer, message_item("x")))
    assert status == 422, body
    assert problem in str(body["detail"])


async def test_a_rule_following_row_reports_its_four_scores(server):
    body = await verify(server, row("single-turn", RULES, message_item("Yes, sure")))
    assert body["reward"] == 0.0 and body["instruction_total"] == 1.0 and body["prompt_loose"] == 0.0
    assert (await verify(server, row("single-turn", RULES, message_item("Yes sure"))))["reward"] == 1.0


async def test_a_scoring_past_its_deadline_is_masked_and_the_server_keeps_answering(server):
    gold = " ".join(f"w{index}" for index in range(3000))
    body = await verify(server, row("translation", gold, message_item(" ".join(reversed(gold.split())))))
    assert body["mask_sample"] is True and body["failure_kind"], body
    assert (await verify(server, row("translation", "hola", message_item("hola"))))["reward"] == 1.0


async def test_aggregate_metrics_give_the_benchmark_scores_by_hand(server):
    rollouts = [
        {**rollout, "_ng_task_index": index, "_ng_rollout_index": 0} for index, rollout in enumerate(ROLLOUTS)
    ]
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    rewards = {rollout["task"]: rollout["reward"] for rollout in ROLLOUTS}
    # aligned: verb-extract 1, system-prompt-extract 0; conflict: lang-detect 1, single-turn
    # (0 + 0 + 1/2 + 1/2) / 4, translation its ROUGE-L
    conflict = (1.0 + 0.25 + rewards["translation"]) / 3
    assert rewards["single-turn"] == 0.25 and 0 < rewards["translation"] < 1
    key = body["key_metrics"]
    assert key["aligned_score"] == pytest.approx(0.5)
    assert key["conflict_score"] == pytest.approx(conflict) == key["result_score"]
    assert key["mean_reward"] == pytest.approx(sum(rewards.values()) / 5)
    assert key["conflict/single-turn/score"] == pytest.approx(0.25)


def test_config_declares_the_environment_and_its_agent():
    _, resources, _ = check_environment_config(FOLDER, "iheval", "instruction_following")
    assert resources.model_extra["accuracy_mode"] == "hierarchy"
    assert resources.model_extra["grading_timeout_s"] == 10
