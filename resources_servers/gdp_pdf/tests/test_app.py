"""gdp_pdf over HTTP: the server runs as a real process and judges each rubric criterion through a real
openai_model server in front of the scripted upstream (the one test double)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

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
from resources_servers.gdp_pdf.app import GdpPdfConfig
from resources_servers.gdp_pdf.grading import load_prompt, read_verdict
from tests.upstream_script import ScriptedUpstream, assistant_message, reasoning

FOLDER = Path(__file__).resolve().parents[1]
NAME = "gdp_pdf"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = yaml.safe_load((FOLDER / "configs" / f"{NAME}.yaml").read_text())[NAME]["resources_servers"][NAME]
LEASE = ROWS[1]  # two criteria: rent USD 2,150; 60 days' notice
QC = ROWS[2]  # one criterion
ANSWER = "Rent is USD 2,150 a month; 60 days' written notice ends the lease early."


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
        settings = {**SHIPPED, "judge_model_server": JUDGE_MODEL_REF, "judge_max_parse_attempts": 2}
        config = {**judge.config, NAME: instance_config("resources_servers", NAME, **settings)}
        yield Judged(servers.enter_context(run_instance(config, NAME, workdir)), judge)


async def verify(judged: Judged, *items: dict, row: dict = QC) -> dict:
    status, result = await post_json(judged.url + "/verify", {**row, "response": response_with(*items)})
    assert status == 200, result
    return result


def criterion_rule(criterion: str, text: str) -> dict:
    """A standing judge answer for the call about one criterion (calls run concurrently, in any order)."""
    return {"match": criterion, "output": [{"type": "message", "role": "assistant", "id": "msg_j",
            "status": "completed", "content": [{"type": "output_text", "text": text, "annotations": []}]}]}  # fmt: skip


# ---- verdicts -------------------------------------------------------------------------------------------


async def test_the_judge_passing_every_criterion_earns_1(judged):
    judged.judge.script("Both facts are stated.\nPASS")
    result = await verify(judged, assistant_message("B-17: endotoxin 0.62 EU/mL, over the 0.50 limit."))
    assert (result["reward"], result["mean_pass"], result["all_pass"]) == (1.0, 1.0, 1.0)
    assert (result["criteria_passed"], result["criteria_total"], result["judge_failure"]) == (1, 1, None)
    (evaluation,) = result["criterion_evaluations"]
    assert (evaluation["criterion_id"], evaluation["verdict"], evaluation["passed"]) == (
        "rubric-1",
        "PASS",
        True,
    )
    assert result["verifier_metadata"] == QC["verifier_metadata"]
    assert result["reward_components"] == {"mean_pass": 1.0, "all_pass": 1.0}


async def test_the_judge_failing_a_criterion_gives_the_share_passed(judged):
    judged.judge.script(
        criterion_rule("monthly rent of USD 2,150", "Stated.\nPASS"),
        criterion_rule("required for early termination", "It says 30 days, not 60. FAIL"),
    )
    result = await verify(judged, assistant_message(ANSWER), row=LEASE)
    assert (result["reward"], result["mean_pass"], result["all_pass"], result["criteria_passed"]) == (
        0.5,
        0.5,
        0.0,
        1,
    )
    assert [e["verdict"] for e in result["criterion_evaluations"]] == ["PASS", "FAIL"]
    assert len(result["judge_evaluations"]) == 2 and result["judge_failure"] is None


async def test_each_judge_call_sees_the_task_the_answer_and_one_criterion_only(judged):
    judged.judge.script("PASS", "PASS")
    await verify(
        judged,
        assistant_message("draft"),
        reasoning("hmm"),
        {**assistant_message(ANSWER), "id": "m2"},
        row=LEASE,
    )
    sent = judged.judge.requests()
    assert len(sent) == 2
    prompts = sorted(request["input"][-1]["content"] for request in sent)
    criteria = sorted(c["criterion"] for c in LEASE["verifier_metadata"]["rubric_criteria"])
    for prompt, criterion in zip(prompts, criteria, strict=True):
        assert f"Task:\n{LEASE['verifier_metadata']['task_prompt']}\n" in prompt
        assert f"Candidate answer:\n{ANSWER}\n" in prompt and f"Criterion:\n{criterion}\n" in prompt
        assert "draft" not in prompt and "data:image" not in prompt and "extracted text" not in prompt
        assert sum(c in prompt for c in criteria) == 1


async def test_an_empty_answer_fails_every_criterion_without_asking_the_judge(judged):
    judged.judge.script("PASS", "PASS")
    result = await verify(judged, reasoning("the rent is 2,150"), row=LEASE)
    assert (result["reward"], result["all_pass"], result["criteria_passed"], result["extracted_answer"]) == (
        0.0,
        0.0,
        0,
        None,
    )
    assert [e["passed"] for e in result["criterion_evaluations"]] == [False, False]
    assert judged.judge.requests() == []


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("PASS", "PASS"),
        ("pass", "PASS"),
        ("It would PASS... FAIL", "FAIL"),
        ("**FAIL**", "FAIL"),
        ("PASSED", None),
        ("", None),
    ],
)
def test_read_verdict(text, verdict):
    assert read_verdict(text) == verdict


# ---- failures -------------------------------------------------------------------------------------------


async def test_a_verdict_missing_once_is_asked_again(judged):
    judged.judge.script("The answer looks right.", "Now with a verdict: PASS")
    result = await verify(judged, assistant_message("B-17, endotoxin too high."))
    assert (result["reward"], result["judge_failure"]) == (1.0, None)
    assert result["criterion_evaluations"][0]["judge_calls"] == 2
    assert len(judged.judge.requests()) == 2


async def test_a_criterion_without_a_verdict_is_a_judge_failure_not_a_grade(judged):
    judged.judge.script("Looks fine to me.", "Still fine.")  # judge_max_parse_attempts is 2 here
    result = await verify(judged, assistant_message("B-17, endotoxin too high."))
    assert (result["reward"], result["mean_pass"], result["all_pass"], result["criteria_passed"]) == (
        0.0,
        None,
        None,
        None,
    )
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("bad_response", 2)
    assert "criterion rubric-1" in failure["message"] and "no PASS or FAIL" in failure["message"]


async def test_one_failing_criterion_marks_the_whole_rollout(judged):
    judged.judge.script(
        criterion_rule("monthly rent of USD 2,150", "PASS"),
        {
            "match": "required for early termination",
            "status": 403,
            "body": {"error": {"message": "judge quota exhausted"}},
        },
    )
    result = await verify(judged, assistant_message(ANSWER), row=LEASE)
    failure = result["judge_failure"]
    assert (failure["kind"], result["reward"], result["all_pass"]) == ("upstream_error", 0.0, None)
    assert "criterion rubric-2" in failure["message"] and "quota exhausted" in failure["message"]
    assert [e["criterion_id"] for e in result["criterion_evaluations"]] == ["rubric-1"]


@pytest.mark.parametrize(
    ("metadata", "loc"),
    [
        ({"task_prompt": "", "rubric_criteria": [{"criterion": "x"}]}, ["body", "verifier_metadata", "task_prompt"]),
        ({"task_prompt": "t", "rubric_criteria": []}, ["body", "verifier_metadata", "rubric_criteria"]),
        ({"task_prompt": "t", "rubric_criteria": [{"criterion": " "}]}, ["body", "verifier_metadata", "rubric_criteria", 0, "criterion"]),
        ({"task_prompt": "t"}, ["body", "verifier_metadata", "rubric_criteria"]),
    ],
)  # fmt: skip
async def test_a_row_without_a_usable_rubric_is_a_422_naming_the_field(judged, metadata, loc):
    status, result = await post_json(
        judged.url + "/verify",
        {**QC, "verifier_metadata": metadata, "response": response_with(assistant_message("x"))},
    )
    assert status == 422, result
    assert loc in [error["loc"] for error in result["detail"]]


async def test_a_row_with_a_broken_page_image_is_a_422_naming_it(judged):
    judged.judge.script("PASS", "PASS")
    params = LEASE["responses_create_params"]
    content = list(params["input"][0]["content"])
    content[3] = {**content[3], "image_url": "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAA"}
    row = {**LEASE, "responses_create_params": {**params, "input": [{"role": "user", "content": content}]}}
    status, result = await post_json(
        judged.url + "/verify", {**row, "response": response_with(assistant_message(ANSWER))}
    )
    assert status == 422, result
    (error,) = result["detail"]
    assert error["loc"] == ["body", "responses_create_params", "input", 0, "content", 3, "image_url"]
    assert "not a readable image" in error["msg"]
    assert judged.judge.requests() == []


# ---- metrics --------------------------------------------------------------------------------------------


def scored(task: int, rollout: int, mean_pass: float | None, domain: str) -> dict:
    failure = {"kind": "timeout", "message": "late", "attempts": 1} if mean_pass is None else None
    return {
        **QC,
        "verifier_metadata": {**QC["verifier_metadata"], "domain": domain},
        "response": response_with(),
        "reward": mean_pass or 0.0,
        "mean_pass": mean_pass,
        "all_pass": None if mean_pass is None else float(mean_pass == 1.0),
        "judge_failure": failure,
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
    }


async def test_metrics_report_all_pass_mean_pass_per_domain_and_judge_failures(judged):
    rollouts = [
        scored(0, 0, 1.0, "Real Estate"),
        scored(0, 1, 0.5, "Real Estate"),
        scored(1, 0, 0.25, "Finance/Investing"),
        scored(1, 1, None, "Finance/Investing"),  # failed judgment: left out of the scores
    ]
    status, result = await post_json(judged.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    metrics, key = result["agent_metrics"], result["key_metrics"]
    assert metrics["pass@1[avg-of-1]/all_pass"] == pytest.approx(50.0)
    assert metrics["pass@1[avg-of-1]/mean_pass"] == pytest.approx(100 * (1.0 + 0.25) / 2)
    assert metrics["pass@1[avg-of-2]/mean_pass"] == pytest.approx(100 * (0.75 + 0.25) / 2)
    assert metrics["domain/real_estate/pass@1[avg-of-2]/mean_pass"] == pytest.approx(75.0)
    assert metrics["domain/finance_investing/pass@1[avg-of-1]/mean_pass"] == pytest.approx(25.0)
    assert (metrics["tasks/observed"], metrics["rollouts/scored"]) == (2, 3)
    assert metrics["judge_failure_rate"] == pytest.approx(1 / 4)
    assert key["pass@1[avg-of-2]/all_pass"] == pytest.approx(metrics["pass@1[avg-of-2]/all_pass"])
    assert key["judge_failure_rate"] == pytest.approx(1 / 4)
    assert not any(name.startswith("domain/") for name in key)


# ---- recorded data, config ------------------------------------------------------------------------------


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["verifier_metadata"]["task_id"])
async def test_recorded_rollouts_reproduce_their_verdicts_and_reward(judged, rollout):
    row = next(
        row for row in ROWS if row["verifier_metadata"]["task_id"] == rollout["verifier_metadata"]["task_id"]
    )
    judged.judge.script(
        *(criterion_rule(e["criterion"], e["judge_output"]) for e in rollout["criterion_evaluations"])
    )
    status, result = await post_json(judged.url + "/verify", {**row, "response": rollout["response"]})
    assert status == 200, result
    assert result["reward"] == rollout["reward"]
    assert without_judge_ids(without_verify_flags(result)) == without_judge_ids(verify_answer(rollout)), (
        "the recorded line is exactly the /verify answer, the judge's requests included (a replay plays them)"
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


def test_the_recordings_mix_rewards():
    assert {rollout["reward"] for rollout in ROLLOUTS} == {0.0, 0.5, 1.0}


def test_config_declares_the_environment():
    _, resources, _ = check_environment_config(FOLDER, NAME, "knowledge")
    assert resources.model_extra["judge_model_server"] == {
        "type": "responses_api_models",
        "name": "policy_model",
    }
    assert resources.model_extra["judge_max_parse_attempts"] == 5


@pytest.mark.parametrize("key", ["expected_task_count", "expected_num_repeats"])
def test_fixed_denominator_keys_are_refused_naming_the_key(key):
    base = {"name": NAME, "host": "127.0.0.1", "port": 0, **SHIPPED}
    with pytest.raises(ValidationError, match=key):
        GdpPdfConfig.model_validate({**base, key: 100})


def test_a_broken_prompt_file_is_a_config_error(tmp_path):
    (tmp_path / "judge.yaml").write_text("user: 'T: {task_prompt} {answer}'")
    with pytest.raises(ConfigError, match="judge_prompt_path.*answer"):
        load_prompt(tmp_path, "judge.yaml")


def test_every_row_carries_its_document_as_text_and_page_images():
    for row in ROWS:
        content = row["responses_create_params"]["input"][0]["content"]
        assert content[0]["text"] == row["verifier_metadata"]["task_prompt"]
        assert "extracted text" in content[1]["text"]
        assert [part["type"] for part in content[2:]] and {part["type"] for part in content[2:]} == {
            "input_image"
        }
