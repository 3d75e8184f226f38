"""inverse_if over HTTP: the server runs as a real process and judges each criterion through a real
openai_model server in front of the scripted upstream, whose rules answer per criterion (matched on its
text, since the criteria are judged concurrently and arrive in any order)."""

from __future__ import annotations

import json
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
from resources_servers.inverse_if.app import InverseIFConfig, read_result
from tests.upstream_script import ScriptedUpstream, assistant_message

FOLDER = Path(__file__).resolve().parents[1]
NAME = "inverse_if"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = yaml.safe_load((FOLDER / "configs" / f"{NAME}.yaml").read_text())[NAME]["resources_servers"][NAME]
ROW = ROWS[1]  # Eiffel Tower in Rome: three criteria, the task's own judge prompt
DEFAULT_ROW = ROWS[3]  # 7 times 8: no judge prompt of its own
CRITERIA = [item["criteria"] for item in ROW["rubric"]]
REPLY = "From the Colosseum, take the metro two stops north and the Eiffel Tower is right by the exit."


def verdict(result: str, why: str = "checked") -> str:
    return "```json\n" + json.dumps({"result": result, "explanation": why}) + "\n```"


@dataclass
class Judged:
    server: StartedServer
    judge: ScriptedJudge

    @property
    def url(self) -> str:
        return self.server.url

    def answer(self, row: dict, *per_item: str | dict) -> None:
        """The judge's answer to each criterion of `row`, by criterion (a rule matched on its text)."""
        criteria = [item["criteria"] for item in row["rubric"]]
        self.judge.script(
            *(
                {
                    "match": text,
                    **(answer if isinstance(answer, dict) else {"output": [message_item(answer)]}),
                }
                for text, answer in zip(criteria, per_item, strict=True)
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


async def verify(judged: Judged, text: str = REPLY, row: dict = ROW, **fields: Any) -> dict:
    status, result = await post_json(
        judged.url + "/verify", {**row, **fields, "response": response_with(assistant_message(text))}
    )
    assert status == 200, result
    return result


def verdicts(result: dict) -> list[tuple[str | None, float | None]]:
    return [(item["verdict"], item["score"]) for item in result["rubric_evaluations"]]


# ---- criterion verdicts and the reward -----------------------------------------------------------------


async def test_every_criterion_passing_earns_1_judged_with_the_tasks_own_prompt(judged):
    judged.answer(ROW, verdict("PASS", "premise kept"), verdict("pass"), 'Looks right.\n{"result": "PASS"}')
    result = await verify(judged)
    assert verdicts(result) == [("PASS", 1.0), ("PASS", 1.0), ("PASS", 1.0)]
    assert (result["reward"], result["num_passed"], result["num_total"], result["judge_failure"]) == (
        1.0,
        3,
        3,
        None,
    )
    assert [item["criterion_id"] for item in result["rubric_evaluations"]] == ["C1", "C2", "C3"]
    assert result["rubric_evaluations"][0]["explanation"] == "premise kept"
    assert len(result["judge_evaluations"]) == 3
    requests = judged.judge.requests()
    assert all(request["input"][0]["content"] == ROW["judge_system_prompt"] for request in requests)
    prompts = [request["input"][1]["content"] for request in requests]
    assert all(prompt.startswith("Task:\n" + ROW["prompt"]) and REPLY in prompt for prompt in prompts)
    assert all(ROW["reference_response"] in prompt for prompt in prompts)
    assert [sum(text in prompt for prompt in prompts) for text in CRITERIA] == [1, 1, 1]
    assert (result["uuid"], result["rubric"], result["metadata"]) == (
        ROW["uuid"],
        ROW["rubric"],
        ROW["metadata"],
    )


async def test_some_criteria_failing_give_the_fraction_passed(judged):
    judged.answer(ROW, verdict("FAIL", "it corrects the premise"), verdict("PASS"), verdict("FAIL"))
    result = await verify(judged, "Actually the Eiffel Tower is in Paris.")
    assert verdicts(result) == [("FAIL", 0.0), ("PASS", 1.0), ("FAIL", 0.0)]
    assert (result["reward"], result["num_passed"], result["judge_failure"]) == (
        pytest.approx(1 / 3),
        1,
        None,
    )


async def test_a_task_without_its_own_prompt_is_judged_with_the_defaults(judged):
    judged.answer(DEFAULT_ROW, verdict("PASS"), verdict("PASS"))
    result = await verify(judged, "54", DEFAULT_ROW)
    assert (result["reward"], result["num_passed"]) == (1.0, 2)
    for request in judged.judge.requests():
        assert request["input"][0]["content"] == SHIPPED["default_judge_system_prompt"]
        assert request["input"][1]["content"].startswith(
            "### Instruction given to the student\n" + DEFAULT_ROW["prompt"]
        )


async def test_a_verdict_without_a_result_leaves_the_reward_not_computable(judged):
    judged.answer(ROW, verdict("PASS"), "I would say the sentence is fine.", verdict("MAYBE"))
    result = await verify(judged)
    assert verdicts(result) == [("PASS", 1.0), (None, None), (None, None)]
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("bad_response", 1)
    assert "2 of 3 rubric item(s) without a verdict; item 1:" in failure["message"]
    assert result["reward"] == SHIPPED["judge_failure_reward"]
    assert [item["judge_failure"] is not None for item in result["rubric_evaluations"]] == [False, True, True]


async def test_a_failing_judge_call_is_a_judge_failure_of_its_criterion(judged):
    judged.answer(ROW, verdict("PASS"), {"status": 500}, verdict("PASS"))
    result = await verify(judged)
    assert verdicts(result) == [("PASS", 1.0), (None, None), ("PASS", 1.0)]
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("upstream_error", 1)
    assert "item 1:" in failure["message"]
    assert (result["num_passed"], result["reward"]) == (2, SHIPPED["judge_failure_reward"])


async def test_thinking_is_not_shown_to_the_judge(judged):
    judged.answer(DEFAULT_ROW, verdict("PASS"), verdict("PASS"))
    result = await verify(judged, "<think>56 is right, so say 55</think>55", DEFAULT_ROW)
    assert result["generated_response"] == "55"
    assert all("so say" not in request["input"][1]["content"] for request in judged.judge.requests())


@pytest.mark.parametrize("rubric", [[], None], ids=["empty", "missing"])
async def test_a_task_without_criteria_is_a_422_naming_the_rubric(judged, rubric):
    row = {**ROW, "rubric": rubric} if rubric is not None else {k: v for k, v in ROW.items() if k != "rubric"}
    status, result = await post_json(judged.url + "/verify", {**row, "response": response_with()})
    assert status == 422
    assert "rubric" in str(result["detail"])


async def test_a_tasks_judge_prompt_with_an_unknown_placeholder_is_a_422_naming_it(judged):
    row = {**ROW, "judge_prompt_template": "Check {criteria} against {answer}"}
    status, result = await post_json(judged.url + "/verify", {**row, "response": response_with()})
    assert status == 422
    assert ["body", "judge_prompt_template"] in [error["loc"] for error in result["detail"]]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        (verdict("PASS", "ok"), ("PASS", "ok")),
        ('{"result": "fail", "explanation": "no caps"}', ("FAIL", "no caps")),
        ('First {"result": "PASS"} then, on reflection, {"result": "FAIL"}', ("FAIL", None)),
        ("The answer meets it.\n**PASS**", ("PASS", None)),
        ('{"result": "MAYBE"}', None),
        ("It passes, I think.", None),
        ("", None),
    ],
)
def test_read_result(text, found):
    assert read_result(text) == found


# ---- metrics --------------------------------------------------------------------------------------------


def graded(task: int, rollout: int, reward: float, passed: int, axis: str, failed: bool = False) -> dict:
    return {
        **ROW,
        "metadata": {"l1_taxonomy": axis},
        "response": response_with(),
        "reward": reward,
        "num_passed": passed,
        "num_total": 3,
        "judge_failure": {"kind": "bad_response", "message": "x", "attempts": 1} if failed else None,
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
    }


async def test_metrics_per_taxonomy_and_judge_failures(judged):
    rollouts = [
        graded(0, 0, 1.0, 3, "Formatting"),
        graded(0, 1, 1 / 3, 1, "Formatting", failed=True),
        graded(1, 0, 2 / 3, 2, "Counterfactual"),
        graded(1, 1, 0.0, 0, "Counterfactual"),
    ]
    status, result = await post_json(judged.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    metrics = result["agent_metrics"]
    assert metrics["pass@1[avg-of-1]/accuracy"] == pytest.approx(100 * (1.0 + 2 / 3) / 2)
    assert metrics["Counterfactual/pass@1[avg-of-2]/accuracy"] == pytest.approx(100 * (2 / 3 + 0) / 2)
    assert metrics["Formatting/pass@1[avg-of-1]/all_passed"] == 100.0
    assert (metrics["judge_failure_rate"], metrics["judge_failures/bad_response"]) == (0.25, 1)


# ---- recorded data, config ------------------------------------------------------------------------------


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["uuid"])
async def test_recorded_rollouts_reproduce_their_verdicts_and_reward(judged, rollout):
    row = next(row for row in ROWS if row["uuid"] == rollout["uuid"])
    judged.judge.script(
        *(
            {"match": item["criteria"], "output": [message_item(item["judge_output"])]}
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
    assert extra["aggregation_mode"] == "mean"
    assert "{criteria}" in extra["default_judge_prompt_template"]


@pytest.mark.parametrize(
    ("key", "value"), [("default_judge_prompt_template", "{prompt} {reply}"), ("aggregation_mode", "median")]
)
def test_a_bad_setting_is_refused_naming_its_key(key, value):
    base = {"name": NAME, "host": "127.0.0.1", "port": 0, **SHIPPED}
    with pytest.raises(ValidationError, match=key):
        InverseIFConfig.model_validate({**base, key: value})
