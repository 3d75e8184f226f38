"""spartqa: answer reading and label resolution in-process (cheap), everything else over HTTP against a
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
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_resources_server,
)
from resources_servers.spartqa.grading import candidate_labels, extract_answer, resolve_label

FOLDER = Path(__file__).resolve().parents[1]
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
OPTIONS = ["the red ball", "the big blue box"]
LABELS = candidate_labels(OPTIONS)
GRADED_FIELDS = {"exact", "parsed", "extracted", "predicted_label"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server("spartqa", tmp_path_factory.mktemp("spartqa"), domain="other") as started:
        yield started


def body_for(text: str, **row: Any) -> dict:
    return {
        "responses_create_params": {"input": [{"role": "user", "content": "Which is left?"}]},
        "target": "the red ball",
        "options": OPTIONS,
        "response": response_with(message_item(text), **A_RESPONSE),
        **row,
    }


async def verify(server: StartedServer, text: str, **row: Any) -> dict:
    status, answer = await post_json(server.url + "/verify", body_for(text, **row))
    assert status == 200, answer
    return answer


# ---- reading the answer (pure function) -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "extracted"),
    [
        ("reasoning\nFinal answer: the red ball", "the red ball"),
        ("Final answer: box\n...\nFinal answer: **the red ball**", "the red ball"),  # the last one counts
        ("**Final Answer:** `The red ball`", "The red ball"),
        ("Final answer -\n\n  - the red ball\nmore", "the red ball"),  # the first line after the marker
        ("Selected answer: both", "both"),
        ("Answer is: none of them", "none of them"),
        ("I think the answer is the red ball.", "the red ball."),
        ("<think>Final answer: the big blue box</think>Final answer: the red ball", "the red ball"),
        ("<|channel>thought Final answer: no <channel|>\nthe red ball", "the red ball"),
        ("the red ball\nsince it is left", "the red ball"),  # no marker: the first line
        ("Analysis: the ball is left\nso\nthe red ball", "the red ball"),  # ... unless it opens reasoning
        ("Final answer:", ""),
        ("   ", ""),
    ],
)
def test_reading_the_answer(text, extracted):
    assert extract_answer(text) == extracted


def test_an_unclosed_think_is_kept_and_reading_is_linear():
    assert extract_answer("<think>\nFinal answer: the red ball") == "the red ball"
    # The marker must start a line: after an unclosed think tag the first line is read whole.
    assert extract_answer("<think>Final answer: the red ball") == "Final answer: the red ball"
    text = "<think>" * 50_000 + "\nFinal answer: the red ball"
    result, cpu_s = cpu_time_of(extract_answer, text)
    assert result == "the red ball" and cpu_s < LINEAR_CPU_BUDGET_S


def test_extracted_answers_are_cut_to_200_characters():
    assert len(extract_answer("Final answer: " + "x" * 500)) == 200


# ---- resolving to a label (pure function) ---------------------------------------------------------------


def test_the_candidates_are_the_objects_then_both_and_none():
    assert LABELS == ["the red ball", "the big blue box", "both of them", "none of them"]
    assert candidate_labels(["Both of them", "the ball"]) == ["Both of them", "the ball", "none of them"]


@pytest.mark.parametrize(
    ("prediction", "label"),
    [
        ("The red ball.", "the red ball"),
        ("red ball", "the red ball"),  # the article does not matter
        ("It is the big blue box, clearly", "the big blue box"),  # contains exactly one label
        ("both", "both of them"),
        ("Neither", "none of them"),
        ("DK", "none of them"),
        ("the red ball or the big blue box", None),  # names two labels: ambiguous
        ("a green cone", None),
        ("", None),
    ],
)
def test_resolving_to_one_label(prediction, label):
    assert resolve_label(prediction, LABELS) == label


def test_a_label_inside_a_longer_label_gives_way():
    labels = candidate_labels(["a triangle in block B", "a big blue triangle in block B"])
    assert resolve_label("it is a big blue triangle in block B", labels) == "a big blue triangle in block B"


# ---- /verify over HTTP ----------------------------------------------------------------------------------


async def test_verify_echoes_the_row_and_reports_the_reading(server):
    answer = await verify(server, "Final answer: the red ball", split="test")
    assert set(answer) == {
        *BASE_VERIFY_FIELDS,
        *GRADED_FIELDS,
        "target",
        "options",
        "verifier_metadata",
        "split",
    }
    assert (answer["reward"], answer["exact"], answer["parsed"]) == (1.0, True, True)
    assert answer["predicted_label"] == "the red ball" and answer["split"] == "test"


async def test_a_right_label_inside_a_sentence_is_right_but_not_exact(server):
    answer = await verify(server, "Final answer: I would say the red ball is")
    assert (answer["reward"], answer["exact"]) == (1.0, False)


@pytest.mark.parametrize(
    "text",
    [
        "Final answer: the big blue box",
        "Final answer: both of them",
        "Final answer: the red ball or the big blue box",
    ],
)
async def test_wrong_and_ambiguous_answers_score_zero(server, text):
    assert (await verify(server, text))["reward"] == 0.0


async def test_an_empty_response_is_unparsed(server):
    answer = await verify(server, "")
    assert (answer["reward"], answer["parsed"], answer["predicted_label"]) == (0.0, False, "")


async def test_both_and_none_golds(server):
    assert (await verify(server, "Final answer: both", target="both of them"))["reward"] == 1.0
    assert (await verify(server, "Final answer: neither", target="none of them"))["reward"] == 1.0


async def test_target_and_options_fall_back_to_verifier_metadata(server):
    metadata = {"target": "the big blue box", "options": OPTIONS}
    body = {**body_for("Final answer: the big blue box"), "verifier_metadata": metadata}
    del body["target"], body["options"]
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 200 and answer["reward"] == 1.0


async def test_without_options_the_gold_is_the_only_object(server):
    answer = await verify(server, "Final answer: the red ball", options=[])
    assert answer["reward"] == 1.0
    assert (await verify(server, "Final answer: the big blue box", options=[]))["reward"] == 0.0


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"target": ""}, "target"),
        ({"target": "..."}, "target"),  # nothing left after normalization
        ({"target": 3}, "target"),
        ({"options": "a, b"}, "options"),
        ({"verifier_metadata": []}, "verifier_metadata"),
        ({"response": None}, "response"),
    ],
)
async def test_malformed_rows_are_422_naming_the_field(server, change, field):
    status, answer = await post_json(server.url + "/verify", {**body_for("Final answer: x"), **change})
    assert status == 422, answer
    assert any(error["loc"][:2] == ["body", field] for error in answer["detail"]), answer


# ---- recorded rollouts ----------------------------------------------------------------------------------


@pytest.mark.parametrize("index", range(len(ROLLOUTS)))
async def test_recorded_rollouts_reproduce_their_reward(server, index):
    rollout = ROLLOUTS[index]
    row = ROWS[rollout["_ng_task_index"]]
    status, answer = await post_json(server.url + "/verify", {**row, "response": rollout["response"]})
    assert status == 200, answer
    assert {key: answer[key] for key in ("reward", *GRADED_FIELDS)} == {
        key: rollout[key] for key in ("reward", *GRADED_FIELDS)
    }


# ---- aggregate metrics ----------------------------------------------------------------------------------


def scored(task: int, target: str, reward: float, exact: bool, label: str) -> dict:
    return {
        "responses_create_params": ROWS[0]["responses_create_params"],
        "response": A_RESPONSE,
        "reward": reward,
        "target": target,
        "exact": exact,
        "parsed": True,
        "predicted_label": label,
        "_ng_task_index": task,
        "_ng_rollout_index": 0,
    }


async def test_aggregate_metrics(server):
    rollouts = [
        scored(0, "both of them", 1.0, True, "both of them"),
        scored(1, "both of them", 0.0, False, ""),
        scored(2, "none of them", 1.0, False, "none of them"),
        scored(3, "the red ball", 0.0, False, "the big blue box"),
    ]
    status, result = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    metrics = result["agent_metrics"]
    assert (metrics["mean_reward"], metrics["count"]) == (0.5, 4)
    assert (metrics["exact_match_rate"], metrics["parse_rate"], metrics["label_resolve_rate"]) == (
        0.25,
        1.0,
        0.75,
    )
    assert (metrics["accuracy_both_of_them"], metrics["accuracy_none_of_them"]) == (0.5, 1.0)
    assert result["key_metrics"] == {"mean_reward": 0.5, "exact_match_rate": 0.25}


async def test_aggregate_metrics_of_nothing_is_empty(server):
    assert await post_json(server.url + "/aggregate_metrics", {"verify_responses": []}) == (
        200,
        EMPTY_AGGREGATE_METRICS,
    )


def test_config_declares_the_environment_and_its_agent():
    check_environment_config(FOLDER, "spartqa", "other")
