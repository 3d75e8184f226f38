"""multichallenge over HTTP: the server runs as a real process and judges each rubric item through a real
openai_model server in front of the scripted upstream, whose rules answer per item (matched on the item's
question, since the items are judged concurrently and arrive in any order)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from nemo_gym.testing import (
    JUDGE_MODEL_REF,
    ScriptedJudge,
    StartedServer,
    check_environment_config,
    instance_config,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_instance,
    run_scripted_judge,
    without_verify_flags,
)
from resources_servers.multichallenge.app import MultiChallengeConfig, item_score, read_labels
from resources_servers.multichallenge.rubric_grading import AggregationMode, aggregate, without_thinking
from tests.upstream_script import ScriptedUpstream, assistant_message

FOLDER = Path(__file__).resolve().parents[1]
NAME = "multichallenge"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = yaml.safe_load((FOLDER / "configs" / f"{NAME}.yaml").read_text())[NAME]["resources_servers"][NAME]
ROW = ROWS[1]  # bicycle budget: three items, the second one passes on NO
QUESTIONS = [item["question"] for item in ROW["rubric"]]


@dataclass
class Judged:
    server: StartedServer
    judge: ScriptedJudge

    @property
    def url(self) -> str:
        return self.server.url

    def answer(self, *per_item: str | dict) -> None:
        """The judge's answer to each rubric item of ROW, by item (a rule matched on its question)."""
        self.judge.script(
            *(
                {
                    "match": question,
                    **(answer if isinstance(answer, dict) else {"output": [message_item(answer)]}),
                }
                for question, answer in zip(QUESTIONS, per_item, strict=True)
            )
        )


@pytest.fixture(scope="module")
def judged(scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judged]:
    workdir = tmp_path_factory.mktemp(NAME)
    with ExitStack() as servers:
        judge = servers.enter_context(run_scripted_judge(scripted_upstream, workdir))
        settings = {**SHIPPED, "judge_model_server": JUDGE_MODEL_REF, "judge_max_attempts": 1}
        config = {**judge.config, NAME: instance_config("resources_servers", NAME, **settings)}
        yield Judged(servers.enter_context(run_instance(config, NAME, workdir)), judge)


REPLY = "With 800 euros and 8 km each way, a hybrid bike with hub gears fits well."


async def verify(judged: Judged, text: str = REPLY, **row: Any) -> dict:
    status, result = await post_json(
        judged.url + "/verify", {**ROW, **row, "response": response_with(assistant_message(text))}
    )
    assert status == 200, result
    return result


def verdicts(result: dict) -> list[tuple[str | None, float | None]]:
    return [(item["verdict"], item["score"]) for item in result["rubric_evaluations"]]


# ---- item verdicts and the reward ----------------------------------------------------------------------


async def test_every_item_passing_earns_1_with_one_judge_call_per_item(judged):
    judged.answer("The budget is 800.\n[[YES]]", "It recommends a hybrid.\n[[NO]]", "[[YES]]")
    result = await verify(judged)
    assert verdicts(result) == [("YES", 1.0), ("NO", 1.0), ("YES", 1.0)]
    assert (result["reward"], result["num_passed"], result["num_total"]) == (1.0, 3, 3)
    assert (result["judge_failure"], result["aggregation_mode"]) == (None, "mean")
    assert len(result["judge_evaluations"]) == 3
    prompts = sorted(request["input"][-1]["content"] for request in judged.judge.requests())
    assert len(prompts) == 3 and all(REPLY in prompt and ROW["context"] in prompt for prompt in prompts)
    assert [sum(question in prompt for prompt in prompts) for question in QUESTIONS] == [1, 1, 1]
    assert all(request["input"][0]["role"] == "system" for request in judged.judge.requests())
    assert (result["uuid"], result["metadata"], result["rubric"]) == (
        ROW["uuid"],
        ROW["metadata"],
        ROW["rubric"],
    )


async def test_some_items_failing_give_the_fraction_passed(judged):
    # Item 1 passes (YES wanted), item 2 fails (NO wanted, judge says YES), item 3 fails (YES wanted).
    judged.answer(
        "[[YES]]", "It suggests a 1200 euro e-bike.\n[[YES]]", "[[NO]] since [[YES]] was a typo... [[NO]]"
    )
    result = await verify(judged)
    assert verdicts(result) == [("YES", 1.0), ("YES", 0.0), ("NO", 0.0)]
    assert (result["reward"], result["num_passed"], result["num_total"]) == (pytest.approx(1 / 3), 1, 3)
    assert result["judge_failure"] is None


async def test_a_verdict_without_a_label_leaves_the_reward_not_computable(judged):
    judged.answer("[[YES]]", "The reply seems fine to me.", "[[NO]]")
    result = await verify(judged)
    assert verdicts(result) == [("YES", 1.0), (None, None), ("NO", 0.0)]
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("bad_response", 1)
    assert "1 of 3 rubric item(s) without a verdict; item 1:" in failure["message"]
    assert "[[YES]] or [[NO]]" in failure["message"]
    assert result["rubric_evaluations"][1]["judge_failure"]["kind"] == "bad_response"
    assert result["reward"] == SHIPPED["judge_failure_reward"]
    assert len(result["judge_evaluations"]) == 2  # the two items with a verdict


async def test_a_failing_judge_call_is_a_judge_failure_of_its_item(judged):
    refused = {"status": 403, "body": {"error": {"message": "this model is not enabled for the project"}}}
    judged.answer("[[YES]]", "[[NO]]", refused)
    result = await verify(judged)
    assert verdicts(result)[:2] == [("YES", 1.0), ("NO", 1.0)]
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("upstream_error", 1)
    assert "item 2:" in failure["message"] and "not enabled for the project" in failure["message"]
    assert result["rubric_evaluations"][2]["judge_failure"]["kind"] == "upstream_error"
    assert (result["num_passed"], result["reward"]) == (2, SHIPPED["judge_failure_reward"])


async def test_without_context_the_judge_reads_the_conversation_and_not_the_thinking(judged):
    judged.answer("[[YES]]", "[[NO]]", "[[YES]]")
    row = {key: value for key, value in ROW.items() if key != "context"}
    status, result = await post_json(
        judged.url + "/verify",
        {**row, "response": response_with(assistant_message("<think>maybe 600?</think>" + REPLY))},
    )
    assert status == 200, result
    assert result["context"] == ROW["context"] and result["generated_response"] == REPLY
    assert all("maybe 600" not in request["input"][-1]["content"] for request in judged.judge.requests())


@pytest.mark.parametrize("rubric", [[], None], ids=["empty", "missing"])
async def test_a_task_without_rubric_items_is_a_422_naming_the_rubric(judged, rubric):
    row = {**ROW, "rubric": rubric} if rubric is not None else {k: v for k, v in ROW.items() if k != "rubric"}
    status, result = await post_json(judged.url + "/verify", {**row, "response": response_with()})
    assert status == 422
    assert "rubric" in str(result["detail"])


async def test_a_rubric_item_without_a_question_is_a_422_naming_it(judged):
    rubric = [{"pass_criteria": "YES"}]
    status, result = await post_json(
        judged.url + "/verify", {**ROW, "rubric": rubric, "response": response_with()}
    )
    assert status == 422
    assert ["body", "rubric", 0, "question"] in [error["loc"] for error in result["detail"]]


# ---- grading rules --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "reward"),
    [("mean", 2 / 4), ("min", 0.0), ("max", 1.0), ("all", 0.0), ("any", 1.0), ("weighted", (3 + 1) / 7)],
)
def test_aggregation_modes_by_hand(mode, reward):
    scores, weights = [1.0, 0.0, 1.0, 0.0], [3.0, 2.0, 1.0, 1.0]
    assert aggregate(scores, weights, AggregationMode(mode)) == pytest.approx(reward)


def test_all_and_weighted_edge_cases():
    assert aggregate([1.0, 1.0], [1.0, 1.0], AggregationMode.ALL) == 1.0
    assert aggregate([1.0], [0.0], AggregationMode.WEIGHTED) == 0.0


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("[[YES]]", "YES"),
        ("Not [[YES]]: the reply says 600.\n[[NO]]", "NO"),
        ("[[NO]] at first, but on reflection [[YES]]", "YES"),
        ("Reasoning.\n**Yes.**", "YES"),
        ("no", "NO"),
        ("The reply is fine.", None),
        ("", None),
    ],
)
def test_read_labels(text, verdict):
    assert read_labels(text, "[[YES]]", "[[NO]]") == verdict


def test_item_score_matches_the_pass_criteria():
    assert [item_score(v, c) for v, c in [("YES", "YES"), ("NO", "no"), ("NO", "YES"), ("YES", "maybe")]] == [
        1.0,
        1.0,
        0.0,
        1.0,
    ]


def test_thinking_is_removed_even_without_its_opening_tag():
    assert without_thinking("<thinking>a</thinking>B <think>c</think>D") == "B D"
    assert without_thinking("half a thought</think>Answer") == "Answer"


# ---- metrics --------------------------------------------------------------------------------------------


def graded(task: int, rollout: int, reward: float, passed: int, challenge: str, failed: bool = False) -> dict:
    return {
        **ROW,
        "metadata": {"challenge": challenge},
        "response": response_with(),
        "reward": reward,
        "num_passed": passed,
        "num_total": 2,
        "judge_failure": {"kind": "timeout", "message": "late", "attempts": 1} if failed else None,
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
    }


async def test_metrics_per_challenge_axis_and_judge_failures(judged):
    rollouts = [
        graded(0, 0, 1.0, 2, "Memory"),
        graded(0, 1, 0.5, 1, "Memory"),
        graded(1, 0, 0.0, 0, "Editing"),
        graded(1, 1, 0.0, 0, "Editing", failed=True),  # not computable: left out of the reward metrics
    ]
    status, result = await post_json(judged.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    metrics, key = result["agent_metrics"], result["key_metrics"]
    assert metrics["pass@1[avg-of-1]/accuracy"] == pytest.approx(100 * (1.0 + 0.0) / 2)
    assert metrics["pass@1[avg-of-1]/all_passed"] == pytest.approx(100 * 1 / 2)
    assert metrics["Memory/pass@1[avg-of-2]/accuracy"] == pytest.approx(100 * 0.75)
    assert metrics["Editing/pass@1[avg-of-1]/accuracy"] == 0.0
    assert metrics["judge_failure_rate"] == pytest.approx(1 / 4)
    assert metrics["judge_failures/timeout"] == 1
    assert key["judge_failure_rate"] == pytest.approx(1 / 4)


# ---- recorded data, config ------------------------------------------------------------------------------


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["uuid"])
async def test_recorded_rollouts_reproduce_their_verdicts_and_reward(judged, rollout):
    row = next(row for row in ROWS if row["uuid"] == rollout["uuid"])
    judged.judge.script(
        *(
            {"match": item["question"], "output": [message_item(item["judge_output"])]}
            for item in rollout["rubric_evaluations"]
        )
    )
    status, result = await post_json(judged.url + "/verify", {**row, "response": rollout["response"]})
    assert status == 200, result
    assert (verdicts(result), result["reward"]) == (verdicts(rollout), rollout["reward"])
    assert without_judge_ids(without_verify_flags(result)) == without_judge_ids(rollout), (
        "the recorded line is exactly the /verify answer, the judge's requests included (a replay plays them)"
    )


def without_judge_ids(record: dict) -> dict:
    """The record with its judge evaluations reduced to request and answer text, in a fixed order (ids and
    times are new on every call; concurrent items finish in any order)."""
    evaluations = sorted(
        (
            str(evaluation["responses_create_params"]),
            evaluation["response"]["output"][-1]["content"][-1]["text"],
        )
        for evaluation in record["judge_evaluations"]
    )
    return {**record, "judge_evaluations": evaluations}


def test_config_declares_the_environment():
    _, resources, _ = check_environment_config(FOLDER, NAME, "knowledge")
    extra = resources.model_extra
    assert extra["judge_model_server"] == {"type": "responses_api_models", "name": "policy_model"}
    assert (extra["aggregation_mode"], extra["yes_label"], extra["no_label"]) == ("mean", "[[YES]]", "[[NO]]")


@pytest.mark.parametrize(
    ("key", "value"),
    [("judge_prompt_template", "{context} {answer}"), ("aggregation_mode", "median"), ("yes_label", "")],
)
def test_a_bad_setting_is_refused_naming_its_key(key, value):
    base = {"name": NAME, "host": "127.0.0.1", "port": 0, **SHIPPED}
    with pytest.raises(ValidationError, match=key):
        MultiChallengeConfig.model_validate({**base, key: value})
