"""generative_reward_model: the verdict reader and the reward in-process, then /verify and
/aggregate_metrics against one real server."""

import json
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
from resources_servers.generative_reward_model.reward import Weights, compare
from resources_servers.generative_reward_model.verdict import Unreadable, read_verdict, top_level_objects

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "generative_reward_model"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
RUN_ONLY_KEYS = (
    "agent_ref",
    "_ng_environment_server",
    "_ng_result_type",
    "_ng_task_index",
    "_ng_rollout_index",
)
ROW = {
    "responses_create_params": ROWS[0]["responses_create_params"],
    "id": "t-1",
    "ground_truth_overall": {"score_1": 4.0, "score_2": 2.0, "ranking": 2.0},
    "ground_truth_rubric_scores": [
        {"rubric_id": 1, "score_1": 4.0, "score_2": 1.0, "ranking": 1.0},
        {"rubric_id": 2, "ranking": 3.0},
    ],
}
WEIGHTS = Weights(score=1.0, ranking=2.0, rubric=0.5)
ERROR_FIELDS = (
    "overall_score_1_l1",
    "overall_score_2_l1",
    "overall_ranking_l1",
    "overall_ranking_binary_acc",
    "rubric_score_l1",
    "rubric_ranking_l1",
)


def verdict_json(overall=(4, 2, 2), rubrics=((1, 4, 1, 1), (2, 3, 3, 3))) -> str:
    return json.dumps(
        {
            "rubric_evaluations": [
                {"rubric_id": rid, "response_1_analysis": "a", "score_1": s1, "score_2": s2, "ranking": rank}
                for rid, s1, s2, rank in rubrics
            ],
            "overall": dict(zip(("score_1", "score_2", "ranking"), overall, strict=True)),
        }
    )


# --- reading the verdict (in-process) ---------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        verdict_json(),
        f"Thinking it over...\n```json\n{verdict_json()}\n```\nThat's my verdict.",
        "Don't worry, it's fine: " + verdict_json(),  # apostrophes in the prose do not derail the scan
        verdict_json().replace('"a"', '"compares \\\\Delta with \\\\ln"').replace("\\\\", "\\"),  # LaTeX
        verdict_json(overall=("4", "2", "2.0")),  # quoted numbers
        "The set {1, 2} is not JSON. " + verdict_json(),
    ],
)
def test_one_complete_verdict_is_read(text):
    verdict = read_verdict(text)
    assert (verdict.overall.score_1, verdict.overall.score_2, verdict.overall.ranking) == (4.0, 2.0, 2.0)
    assert sorted(verdict.rubrics) == [1, 2] and verdict.rubrics[1].score_2 == 1.0


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("no verdict at all", "no JSON object"),
        (verdict_json() + "\n" + verdict_json(), "2 JSON objects"),  # a repeated verdict
        (verdict_json() + ' and {"note": 1}', "2 JSON objects"),
        ('{"overall": {"score_1": 4, "score_2": 2, "ranking": 2}}', "rubric_evaluations"),
        (verdict_json(rubrics=()), "rubric_evaluations"),
        ('{"rubric_evaluations": [{"rubric_id": 1, "score_1": 1, "score_2": 1, "ranking": 1}]}', "overall"),
        (verdict_json(overall=(4, 2, None)), "overall.ranking"),
        (verdict_json(overall=(4, True, 2)), "overall.score_2"),
        (verdict_json(overall=(4, "high", 2)), "overall.score_2"),
        (verdict_json(rubrics=((1, 4, 1, 1), (1, 3, 3, 3))), "evaluated twice"),
        (verdict_json(rubrics=(("one", 4, 1, 1),)), "rubric_id"),
        (verdict_json()[:-1], "no JSON object"),  # cut off
    ],
)
def test_anything_but_one_complete_verdict_is_unreadable(text, why):
    with pytest.raises(Unreadable, match=why):
        read_verdict(text)


def test_braces_inside_strings_do_not_split_objects():
    assert top_level_objects('x {"a": "}{"} y {"b": 1}') == ['{"a": "}{"}', '{"b": 1}']


# --- the reward (in-process) ------------------------------------------------------------------------


def test_a_perfect_verdict_earns_0():
    result = compare(
        read_verdict(verdict_json()), ROW["ground_truth_overall"], ROW["ground_truth_rubric_scores"], WEIGHTS
    )
    assert result.reward == 0.0 and result.overall_ranking_binary_acc == 1.0


def test_errors_are_weighted_and_rubrics_averaged_including_perfect_ones():
    verdict = read_verdict(verdict_json(overall=(3, 2, 4), rubrics=((1, 4, 1, 1), (2, 1, 1, 5))))
    result = compare(verdict, ROW["ground_truth_overall"], ROW["ground_truth_rubric_scores"], WEIGHTS)
    overall = 1.0 * 1 + 2.0 * 2  # score_1 off by 1, ranking by 2
    rubrics = 0.5 * (0.0 + 2.0 * 2) / 2  # rubric 1 perfect still counts; rubric 2 has a ranking only
    assert result.reward == pytest.approx(-(overall + rubrics))
    assert (result.overall_score_1_l1, result.overall_score_2_l1, result.overall_ranking_l1) == (
        1.0,
        0.0,
        2.0,
    )
    assert result.overall_ranking_binary_acc == 0.0  # 2 favours response 1, 4 response 2
    assert result.rubric_score_l1 == 0.0 and result.rubric_ranking_l1 == pytest.approx(1.0)


def test_only_fields_the_ground_truth_has_are_compared():
    verdict = read_verdict(verdict_json(overall=(1, 1, 2), rubrics=((1, 1, 1, 1),)))
    result = compare(verdict, {"ranking": 2.0}, None, WEIGHTS)
    assert result.reward == 0.0 and result.overall_score_1_l1 is None and result.rubric_ranking_l1 is None


def test_rubric_ids_must_be_the_ground_truths():
    verdict = read_verdict(verdict_json(rubrics=((1, 4, 1, 1),)))
    assert compare(verdict, None, ROW["ground_truth_rubric_scores"], WEIGHTS) is None


# --- /verify ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server(INSTANCE, tmp_path_factory.mktemp(INSTANCE), domain="rlhf") as started:
        yield started


async def verify(server: StartedServer, *items: dict, **row_changes: object) -> dict:
    body = {**ROW, **row_changes, "response": response_with(*items, **A_RESPONSE)}
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 200, answer
    return answer


async def test_a_perfect_verdict_earns_0_and_the_answer_echoes_the_row(server):
    body = await verify(server, message_item(verdict_json()))
    assert body["reward"] == 0.0 and body["format_correct"] == 1.0 and body["parse_error"] is None
    assert (body["predicted_score_1"], body["predicted_score_2"], body["predicted_ranking"]) == (
        4.0,
        2.0,
        2.0,
    )
    assert {key: body[key] for key in ("id", "ground_truth_overall", "ground_truth_rubric_scores")} == {
        key: ROW[key] for key in ("id", "ground_truth_overall", "ground_truth_rubric_scores")
    }
    assert set(body) == {
        *BASE_VERIFY_FIELDS,
        "id",
        "ground_truth_overall",
        "ground_truth_rubric_scores",
        "predicted_score_1",
        "predicted_score_2",
        "predicted_ranking",
        "format_correct",
        "parse_error",
        *ERROR_FIELDS,
    }


async def test_a_wrong_verdict_earns_minus_its_weighted_error(server):
    body = await verify(
        server, message_item(verdict_json(overall=(4, 2, 5), rubrics=((1, 4, 1, 1), (2, 3, 3, 3))))
    )
    assert body["reward"] == pytest.approx(-2.0 * 3) and body["overall_ranking_binary_acc"] == 0.0


async def test_the_text_of_several_messages_is_read_as_one(server):
    text = verdict_json()
    body = await verify(server, message_item(text[:20]), message_item(text[20:], id="msg_2"))
    assert body["reward"] == 0.0


@pytest.mark.parametrize(
    ("items", "why"),
    [
        ((message_item(verdict_json() + verdict_json()),), "2 JSON objects"),
        ((message_item(verdict_json(rubrics=((1, 4, 1, 1), (5, 1, 1, 1)))),), "not the ground truth's"),
        ((message_item("Response 1 is better."),), "no JSON object"),
        ((), "no JSON object"),
        ((function_call_item("submit", {"ranking": 2}),), "no JSON object"),
    ],
    ids=["repeated", "other-rubrics", "prose", "no-output", "function-call-only"],
)
async def test_a_reply_without_a_usable_verdict_earns_the_parse_failure_penalty(server, items, why):
    body = await verify(server, *items)
    assert body["reward"] == -100.0 and body["format_correct"] == 0.0 and why in body["parse_error"]
    assert body["predicted_ranking"] is None and all(body[key] is None for key in ERROR_FIELDS)
    assert body["mask_sample"] is False  # the policy's format failure is a measured reward


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"id": None}, "id"),
        ({"ground_truth_overall": {"ranking": "high"}}, "ground_truth_overall"),
        ({"ground_truth_overall": {"score_1": True}}, "ground_truth_overall"),
        ({"ground_truth_overall": [2.0]}, "ground_truth_overall"),
        ({"ground_truth_rubric_scores": [{"ranking": 1.0}]}, "ground_truth_rubric_scores"),
        ({"ground_truth_rubric_scores": [{"rubric_id": 1}, {"rubric_id": 1}]}, "ground_truth_rubric_scores"),
        ({"ground_truth_rubric_scores": [{"rubric_id": 1, "score_2": "x"}]}, "ground_truth_rubric_scores"),
        ({"ground_truth_overall": None, "ground_truth_rubric_scores": None}, "ground_truth_rubric_scores"),
        (
            {"ground_truth_overall": {}, "ground_truth_rubric_scores": [{"rubric_id": 1}]},
            "ground_truth_rubric_scores",
        ),
    ],
)
async def test_a_malformed_row_is_a_422_naming_the_field(server, change, field):
    status, body = await post_json(server.url + "/verify", {**ROW, **change, "response": A_RESPONSE})
    assert status == 422 and ["body", field] in [error["loc"][:2] for error in body["detail"]]


async def test_a_row_without_id_is_a_422(server):
    row = {key: value for key, value in ROW.items() if key != "id"}
    status, body = await post_json(server.url + "/verify", {**row, "response": A_RESPONSE})
    assert status == 422 and ["body", "id"] in [error["loc"] for error in body["detail"]]


# --- metrics, recorded data, config -----------------------------------------------------------------


async def test_aggregate_metrics_average_the_error_terms(server):
    results = [
        await verify(server, message_item(verdict_json())),
        await verify(server, message_item(verdict_json(overall=(4, 2, 5)))),
        await verify(server, message_item("no verdict")),
    ]
    rollouts = [{**result, "_ng_task_index": i, "_ng_rollout_index": 0} for i, result in enumerate(results)]
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    metrics = body["agent_metrics"]
    assert metrics["mean/reward"] == pytest.approx((0.0 - 6.0 - 100.0) / 3)
    assert metrics["mean/format_correct"] == pytest.approx(2 / 3)
    assert metrics["mean/overall_ranking_l1"] == pytest.approx(1.5)  # the unreadable rollout has none
    assert metrics["mean/overall_ranking_binary_acc"] == pytest.approx(0.5)
    key = body["key_metrics"]
    assert {"mean/reward", "mean/format_correct", "mean/overall_ranking_binary_acc"} <= set(key)
    assert "mean/input_tokens" not in key


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: str(rollout["id"]))
async def test_recorded_rollouts_verify_to_their_recorded_answer(server, rollout):
    status, body = await post_json(server.url + "/verify", rollout)
    assert status == 200, body
    assert body == {key: value for key, value in rollout.items() if key not in RUN_ONLY_KEYS}


def test_the_recordings_mix_perfect_close_far_and_unreadable_verdicts():
    assert [rollout["reward"] for rollout in ROLLOUTS] == [0.0, -1.5, -100.0, -13.0, -100.0]


def test_config_declares_the_environment_and_its_agent():
    _, resources, _ = check_environment_config(FOLDER, INSTANCE, "rlhf")
    assert (resources.score_weight, resources.ranking_weight, resources.rubric_weight) == (1.0, 2.0, 0.5)
    assert resources.parse_failure_penalty == -100.0
    assert {row["agent_ref"]["name"] for row in ROWS} == {"generative_reward_model_simple_agent"}
