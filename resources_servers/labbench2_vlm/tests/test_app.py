"""labbench2_vlm over HTTP: the server runs as a real process and judges through a real openai_model server
in front of the scripted upstream (the one test double)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from nemo_gym.config_types import ConfigError
from nemo_gym.testing import (
    JUDGE_MODEL_REF,
    VERIFY_FLAGS,
    ScriptedJudge,
    StartedServer,
    check_environment_config,
    instance_config,
    post_json,
    read_jsonl,
    response_with,
    run_instance,
    run_scripted_judge,
    without_verify_flags,
)
from resources_servers.labbench2_vlm.grading import PLAIN_FIELDS, load_template, read_verdict
from resources_servers.labbench2_vlm.prompt_media import image_problem
from tests.upstream_script import ScriptedUpstream, assistant_message, reasoning

FOLDER = Path(__file__).resolve().parents[1]
NAME = "labbench2_vlm"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = yaml.safe_load((FOLDER / "configs" / f"{NAME}.yaml").read_text())[NAME]["resources_servers"][NAME]
FIGURE = ROWS[0]  # Fig. 2A: highest activity at pH 7
PROTOCOL = ROWS[4]  # miniprep eluted with ethanol


@dataclass
class Judged:
    server: StartedServer
    judge: ScriptedJudge

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture(scope="module")
def judged(scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judged]:
    workdir = tmp_path_factory.mktemp(NAME)
    with ExitStack() as servers:
        judge = servers.enter_context(run_scripted_judge(scripted_upstream, workdir))
        settings = {**SHIPPED, "judge_model_server": JUDGE_MODEL_REF}
        config = {**judge.config, NAME: instance_config("resources_servers", NAME, **settings)}
        yield Judged(servers.enter_context(run_instance(config, NAME, workdir)), judge)


async def verify(judged: Judged, *items: dict, row: dict = FIGURE) -> dict:
    status, result = await post_json(judged.url + "/verify", {**row, "response": response_with(*items)})
    assert status == 200, result
    return result


def with_image(row: dict, url: str) -> dict:
    params = row["responses_create_params"]
    image, question = params["input"][0]["content"]
    broken = {"role": "user", "content": [{**image, "image_url": url}, question]}
    return {**row, "responses_create_params": {**params, "input": [broken]}}


# ---- verdicts -------------------------------------------------------------------------------------------


async def test_the_judge_agreeing_earns_1_and_the_row_is_echoed(judged):
    judged.judge.script("Both name pH 7.\n[[A=B]]")
    result = await verify(judged, assistant_message("The activity peaks at pH 7."))
    assert (result["verdict"], result["reward"], result["verdict_label"]) == ("equal", 1.0, "[[A=B]]")
    assert (result["extracted_answer"], result["expected_answer"]) == ("The activity peaks at pH 7.", "pH 7")
    assert result["verifier_metadata"] == FIGURE["verifier_metadata"]
    assert result["judge_failure"] is None and len(result["judge_evaluations"]) == 1


@pytest.mark.parametrize(
    "judge_text",
    ["The answer says pH 6.\n[[A!=B]]", "[[ A != B ]]", "[[A!=B]] since [[A=B]] would need pH 7"],
)
async def test_the_judge_disagreeing_earns_0(judged, judge_text):
    judged.judge.script(judge_text)
    result = await verify(judged, assistant_message("pH 6"))
    assert (result["verdict"], result["reward"], result["verdict_label"]) == ("not_equal", 0.0, "[[A!=B]]")
    assert result["judge_failure"] is None


async def test_the_judge_sees_question_ideal_and_the_last_message_but_no_image(judged):
    judged.judge.script("[[A=B]]")
    await verify(
        judged, assistant_message("pH 5?"), reasoning("hmm"), {**assistant_message("pH 7"), "id": "m2"}
    )
    (sent,) = judged.judge.requests()
    prompt = sent["input"][-1]["content"]
    question = FIGURE["responses_create_params"]["input"][0]["content"][1]["text"]
    assert f"Question:\n{question}\n\nReference answer:\npH 7\n\nAnswer to check:\npH 7\n" in prompt
    assert "pH 5?" not in prompt and "data:image" not in str(sent)
    assert "Reference passage" not in prompt
    assert sent["max_output_tokens"] == 1024


async def test_protocol_rows_use_the_protocol_prompt_with_the_reference_passage(judged):
    judged.judge.script("[[A=B]]")
    result = await verify(judged, assistant_message("Step 7: elute with water, not ethanol."), row=PROTOCOL)
    assert result["reward"] == 1.0
    prompt = judged.judge.requests()[0]["input"][-1]["content"]
    assert f"Reference passage:\n{PROTOCOL['verifier_metadata']['reference_passage']}\n" in prompt
    assert "laboratory protocol" in prompt


async def test_an_empty_answer_is_not_equal_without_asking_the_judge(judged):
    judged.judge.script("[[A=B]]")
    result = await verify(judged, reasoning("pH 7"))
    assert (result["verdict"], result["reward"], result["extracted_answer"]) == ("not_equal", 0.0, None)
    assert judged.judge.requests() == []


# ---- failures -------------------------------------------------------------------------------------------


async def test_a_judge_answer_without_a_label_is_a_judge_failure_not_a_grade(judged):
    judged.judge.script("The two answers agree.")
    result = await verify(judged, assistant_message("pH 7"))
    assert (result["verdict"], result["reward"], result["judge_output"]) == (None, 0.0, None)
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("bad_response", 1)
    assert "no label" in failure["message"]


async def test_a_failing_judge_is_a_judge_failure(judged):
    judged.judge.script({"status": 403, "body": {"error": {"message": "this model is not enabled here"}}})
    result = await verify(judged, assistant_message("pH 7"))
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"], result["verdict"]) == ("upstream_error", 1, None)
    assert "not enabled here" in failure["message"]


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAA", "not a readable image"),
        ("data:image/png;base64,***", "does not decode"),
        ("data:text/plain;base64," + base64.b64encode(b"hello").decode(), "data:image/<format>;base64"),
        ("file:///etc/passwd", "not a data: or http(s) URL"),
    ],
)
async def test_a_row_with_a_broken_image_is_a_422_naming_it(judged, url, problem):
    judged.judge.script("[[A=B]]")
    status, result = await post_json(
        judged.url + "/verify",
        {**with_image(FIGURE, url), "response": response_with(assistant_message("pH 7"))},
    )
    assert status == 422, result
    (error,) = result["detail"]
    assert error["loc"] == ["body", "responses_create_params", "input", 0, "content", 0, "image_url"]
    assert problem in error["msg"]
    assert judged.judge.requests() == []


# ---- metrics --------------------------------------------------------------------------------------------


def graded(task: int, rollout: int, verdict: str | None, tag: str) -> dict:
    failure = {"kind": "timeout", "message": "late", "attempts": 1} if verdict is None else None
    return {
        **FIGURE,
        "verifier_metadata": {**FIGURE["verifier_metadata"], "tag": tag},
        "response": response_with(),
        "reward": float(verdict == "equal"),
        "verdict": verdict,
        "extracted_answer": "x",
        "judge_failure": failure,
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
    }


async def test_metrics_report_accuracy_per_tag_and_judge_failures(judged):
    rollouts = [
        graded(0, 0, "equal", "figqa2-img"),
        graded(0, 1, "not_equal", "figqa2-img"),
        graded(1, 0, "equal", "tableqa2-img"),
        graded(1, 1, "equal", "tableqa2-img"),
        graded(2, 0, None, "protocolqa2"),  # failed judgment: left out of the accuracy
        graded(2, 1, "not_equal", "protocolqa2"),
    ]
    status, result = await post_json(judged.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    metrics, key = result["agent_metrics"], result["key_metrics"]
    assert metrics["pass@1[avg-of-1]/accuracy"] == pytest.approx(100 * 2 / 3)
    assert metrics["pass@1[avg-of-2]/accuracy"] == pytest.approx(100 * (0.5 + 1 + 0) / 3)
    assert metrics["pass@2/accuracy"] == pytest.approx(100.0)  # pass@2 needs 2 judged rollouts of a task
    assert metrics["figqa2-img/pass@1[avg-of-2]/accuracy"] == pytest.approx(50.0)
    assert metrics["tableqa2-img/pass@1[avg-of-2]/accuracy"] == pytest.approx(100.0)
    assert metrics["protocolqa2/pass@1[avg-of-1]/accuracy"] == pytest.approx(0.0)
    assert metrics["judge_failure_rate"] == pytest.approx(1 / 6)
    assert metrics["judge_failures/timeout"] == 1
    assert key["pass@1[avg-of-2]/accuracy"] == pytest.approx(100 * 1.5 / 3)
    assert key["judge_failure_rate"] == pytest.approx(1 / 6)


# ---- recorded data, config ------------------------------------------------------------------------------


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["verifier_metadata"]["id"])
async def test_recorded_rollouts_reproduce_their_verdict_and_reward(judged, rollout):
    row = next(row for row in ROWS if row["verifier_metadata"]["id"] == rollout["verifier_metadata"]["id"])
    judged.judge.script(rollout["judge_output"])
    status, result = await post_json(judged.url + "/verify", {**row, "response": rollout["response"]})
    assert status == 200, result
    assert (result["verdict"], result["reward"]) == (rollout["verdict"], rollout["reward"])
    assert without_judge_ids(without_verify_flags(result)) == without_judge_ids(verify_answer(rollout)), (
        "the recorded line is exactly the /verify answer, the judge's request included (a replay plays it)"
    )


def verify_answer(rollout: dict) -> dict:
    """The recorded result row without what the rollout collection adds around the verify answer."""
    added = {"agent_ref", "task_source", *VERIFY_FLAGS}
    return {key: value for key, value in rollout.items() if key not in added and not key.startswith("_ng_")}


def without_judge_ids(record: dict) -> dict:
    evaluations = [
        (evaluation["responses_create_params"], evaluation["response"]["output"][-1]["content"][-1]["text"])
        for evaluation in record["judge_evaluations"]
    ]
    return {**record, "judge_evaluations": evaluations}


def test_the_recordings_mix_verdicts():
    assert {rollout["reward"] for rollout in ROLLOUTS} == {0.0, 1.0}


def test_config_declares_the_environment():
    _, resources, _ = check_environment_config(FOLDER, NAME, "knowledge")
    assert resources.model_extra["judge_model_server"] == {
        "type": "responses_api_models",
        "name": "policy_model",
    }
    assert resources.model_extra["judge_equal_label"] == "[[A=B]]"


def test_a_template_with_an_unknown_placeholder_is_a_config_error(tmp_path):
    (tmp_path / "judge.txt").write_text("Q: {question} {answer}")
    with pytest.raises(ConfigError, match="judge_prompt_template_fpath.*answer"):
        load_template(tmp_path, "judge.txt", "judge_prompt_template_fpath", PLAIN_FIELDS)


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("[[A=B]]", "equal"),
        ("reasoning...\n[[a=b]]", "equal"),
        ("[[A != B]]", "not_equal"),
        ("[[A=B]] ... no, [[A!=B]]", "equal"),
        ("A=B", None),
        ("", None),
    ],
)
def test_read_verdict(text, verdict):
    assert read_verdict(text, "[[A=B]]", "[[A!=B]]") == verdict


def test_every_example_image_decodes():
    for row in ROWS:
        for part in row["responses_create_params"]["input"][0]["content"]:
            if part["type"] == "input_image":
                assert image_problem(part["image_url"]) is None
