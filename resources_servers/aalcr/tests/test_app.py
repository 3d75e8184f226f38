"""aalcr over HTTP: the server runs as a real process (once per judge protocol) and judges through a real
openai_model server in front of the scripted upstream (the one test double)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from nemo_gym.config_types import ConfigError
from nemo_gym.testing import (
    JUDGE_MODEL_REF,
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
from resources_servers.aalcr.aalcr_grading import (
    BAND_FIELDS,
    PROTOCOL_DATASETS,
    checked_template,
    load_prompts,
    parse_verdict,
)
from resources_servers.aalcr.app import AalcrConfig
from tests.upstream_script import ScriptedUpstream, assistant_message, reasoning

FOLDER = Path(__file__).resolve().parents[1]
NAME = "aalcr"
V11 = "aalcr_v11"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = yaml.safe_load((FOLDER / "configs" / f"{NAME}.yaml").read_text())[NAME]["resources_servers"][NAME]
ROW = ROWS[0]  # Northwind revenue growth: 10.0%
V11_VERSION, V11_REVISION = PROTOCOL_DATASETS["official_v1_1"]
V11_ROW = {
    **ROW,
    "aa_lcr_version": V11_VERSION,
    "aa_lcr_dataset_revision": V11_REVISION,
    "aa_lcr_judge_protocol": "official_v1_1",
}


@dataclass
class Judged:
    legacy: StartedServer
    v11: StartedServer
    judge: ScriptedJudge


@pytest.fixture(scope="module")
def judged(scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judged]:
    workdir = tmp_path_factory.mktemp(NAME)
    with ExitStack() as servers:
        judge = servers.enter_context(run_scripted_judge(scripted_upstream, workdir))
        settings = {**SHIPPED, "judge_model_server": JUDGE_MODEL_REF}
        config = {
            **judge.config,
            NAME: instance_config("resources_servers", NAME, **settings),
            V11: instance_config(
                "resources_servers",
                NAME,
                **{
                    **settings,
                    "judge_protocol": "official_v1_1",
                    "judge_responses_create_params_overrides": {"max_output_tokens": 128},
                },
            ),
        }
        legacy = servers.enter_context(run_instance(config, NAME, workdir))
        v11 = servers.enter_context(run_instance(config, V11, workdir))
        yield Judged(legacy, v11, judge)


async def verify(server: StartedServer, *items: dict, row: dict = ROW, **changes: Any) -> dict:
    status, result = await post_json(
        server.url + "/verify", {**row, **changes, "response": response_with(*items)}
    )
    assert status == 200, result
    return result


# ---- legacy_v1_0: a one-word verdict --------------------------------------------------------------------


async def test_the_judge_agreeing_earns_1_in_the_rows_band_and_the_row_is_echoed(judged):
    judged.judge.script("CORRECT")
    result = await verify(judged.legacy, assistant_message("Revenue grew by about 10.0%."))
    assert (result["verdict"], result["reward"], result["judge_output"]) == ("CORRECT", 1.0, "CORRECT")
    assert (result["invalid_model_response"], result["invalid_judge_response"]) == (False, False)
    assert (result["reward_lt_80k"], result["reward_80k_100k"], result["judge_failure"]) == (1.0, None, None)
    assert (result["document_set_id"], result["question_id"], result["answer"]) == (
        ROW["document_set_id"], 1, "10.0%",
    )  # fmt: skip


async def test_the_judge_disagreeing_earns_0(judged):
    judged.judge.script("INCORRECT")
    result = await verify(judged.legacy, assistant_message("Revenue grew by 4.8 million, so 9.9%."))
    assert (result["verdict"], result["reward"], result["reward_lt_80k"]) == ("INCORRECT", 0.0, 0.0)
    assert (result["invalid_judge_response"], result["judge_failure"]) == (False, None)


@pytest.mark.parametrize("band", list(BAND_FIELDS))
async def test_the_reward_lands_in_the_field_of_the_rows_band(judged, band):
    judged.judge.script("CORRECT")
    result = await verify(judged.legacy, assistant_message("10.0%"), input_tokens_band=band)
    assert {field: result[field] for field in BAND_FIELDS.values()} == {
        field: (1.0 if field == BAND_FIELDS[band] else None) for field in BAND_FIELDS.values()
    }


@pytest.mark.parametrize("judge_text", ["**CORRECT**", " CORRECT.\n"])
async def test_a_verdict_wrapped_in_markdown_or_a_full_stop_is_read(judged, judge_text):
    judged.judge.script(judge_text)
    result = await verify(judged.legacy, assistant_message("10.0%"))
    assert (result["verdict"], result["reward"]) == ("CORRECT", 1.0)


async def test_the_judge_sees_question_official_and_candidate_answers(judged):
    judged.judge.script("CORRECT")
    await verify(judged.legacy, assistant_message("Working: 53.0 / 48.2.\nFinal answer: 10.0%"))
    (sent,) = judged.judge.requests()
    assert [message["role"] for message in sent["input"]] == ["user"]
    prompt = sent["input"][0]["content"]
    assert f"Question: {ROW['question']}\n\nOfficial answer: 10.0%\n\n" in prompt
    assert "Candidate answer: Working: 53.0 / 48.2.\nFinal answer: 10.0%" in prompt
    assert (sent["temperature"], sent["max_output_tokens"], sent["top_p"]) == (0.0, 64, 1.0)


@pytest.mark.parametrize(
    "items", [(), (reasoning("10.0%"),), (assistant_message("  \n"),)], ids=["empty", "no_message", "blank"]
)
async def test_an_empty_answer_earns_0_without_a_judge_call(judged, items):
    judged.judge.script("CORRECT")
    result = await verify(judged.legacy, *items)
    assert (result["reward"], result["invalid_model_response"], result["verdict"]) == (0.0, True, None)
    assert (result["reward_lt_80k"], result["invalid_judge_response"]) == (0.0, None)
    assert judged.judge.requests() == []


# ---- official_v1_1: system notes and a JSON verdict -----------------------------------------------------


async def test_v11_sends_the_notes_as_system_prompt_and_reads_a_json_verdict(judged):
    judged.judge.script('{"verdict": "CORRECT"}')
    result = await verify(judged.v11, assistant_message("10.0%"), row=V11_ROW)
    assert (result["verdict"], result["reward"], result["reward_lt_80k"]) == ("CORRECT", 1.0, 1.0)
    (sent,) = judged.judge.requests()
    assert [message["role"] for message in sent["input"]] == ["system", "user"]
    assert "percentage points" in sent["input"][0]["content"]
    assert "<official_answer>\n10.0%\n</official_answer>" in sent["input"][1]["content"]
    assert sent["max_output_tokens"] == 128  # judge_responses_create_params_overrides
    judged.judge.script('{"verdict": "INCORRECT"}')
    result = await verify(judged.v11, assistant_message("9%"), row=V11_ROW)
    assert (result["verdict"], result["reward"]) == ("INCORRECT", 0.0)


@pytest.mark.parametrize(
    ("judge_text", "problem"),
    [
        ("CORRECT", "not JSON"),
        ('{"verdict": "CORRECT", "reason": "same value"}', "exactly one key"),
        ('{"verdict": "MOSTLY"}', "not CORRECT or INCORRECT"),
    ],
)
async def test_v11_a_verdict_off_the_format_is_a_judge_failure(judged, judge_text, problem):
    judged.judge.script(judge_text)
    result = await verify(judged.v11, assistant_message("10.0%"), row=V11_ROW)
    assert (result["verdict"], result["reward"], result["invalid_judge_response"]) == (None, 0.0, True)
    assert result["judge_failure"]["kind"] == "bad_response"
    assert problem in result["judge_failure"]["message"]


@pytest.mark.parametrize(("server", "row"), [("legacy", V11_ROW), ("v11", ROW)])
async def test_a_row_of_the_other_release_is_refused_naming_both(judged, server, row):
    judged.judge.script("CORRECT")
    status, result = await post_json(
        getattr(judged, server).url + "/verify", {**row, "response": response_with(assistant_message("x"))}
    )
    assert status == 422
    assert "judge_protocol" in result["detail"] and "official_v1_1" in result["detail"]
    assert judged.judge.requests() == []


# ---- the judge failing ----------------------------------------------------------------------------------


@pytest.mark.parametrize("judge_text", ["The candidate matches the official answer.", "correct", ""])
async def test_a_malformed_verdict_is_a_judge_failure_not_a_wrong_answer(judged, judge_text):
    judged.judge.script(judge_text)
    result = await verify(judged.legacy, assistant_message("10.0%"))
    assert (result["verdict"], result["reward"], result["judge_output"]) == (None, 0.0, None)
    assert (result["invalid_judge_response"], result["reward_lt_80k"]) == (True, None)
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("bad_response", 1)
    assert "not CORRECT or INCORRECT" in failure["message"]


async def test_a_failing_judge_is_a_judge_failure(judged):
    judged.judge.script({"status": 403, "body": {"error": {"message": "this model is not enabled here"}}})
    result = await verify(judged.legacy, assistant_message("10.0%"))
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("upstream_error", 1)
    assert "not enabled here" in failure["message"]
    assert (result["verdict"], result["reward"], result["invalid_judge_response"]) == (None, 0.0, False)


@pytest.mark.parametrize(
    ("field", "value"), [("input_tokens_band", "64k"), ("question_id", "first"), ("answer", None)]
)
async def test_a_bad_row_field_is_a_422_naming_it(judged, field, value):
    status, result = await post_json(
        judged.legacy.url + "/verify", {**ROW, field: value, "response": response_with()}
    )
    assert status == 422
    assert ["body", field] in [error["loc"][:2] for error in result["detail"]]


# ---- metrics --------------------------------------------------------------------------------------------


def graded(task: int, rollout: int, reward: float | None, band: str = "<80k") -> dict:
    failure = {"kind": "timeout", "message": "late", "attempts": 1} if reward is None else None
    return {
        **ROW,
        "input_tokens_band": band,
        "response": response_with(),
        "reward": reward or 0.0,
        "judge_failure": failure,
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
    }


async def test_metrics_report_accuracy_overall_and_per_band_and_judge_failures(judged):
    rollouts = [
        graded(0, 0, 1.0),
        graded(0, 1, 0.0),
        graded(1, 0, 1.0, "128k+"),
        graded(1, 1, 1.0, "128k+"),
        graded(2, 0, None),  # the judgment failed: left out of the accuracy
        graded(2, 1, 0.0),
    ]
    status, result = await post_json(judged.legacy.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    metrics, key = result["agent_metrics"], result["key_metrics"]
    assert metrics["pass@1[avg-of-2]/accuracy"] == pytest.approx(100 * (0.5 + 1 + 0) / 3)
    assert metrics["pass@2/accuracy"] == pytest.approx(100.0)  # only tasks with 2 judged rollouts
    assert metrics["<80k/pass@1[avg-of-2]/accuracy"] == pytest.approx(100 * 0.5 / 2)
    assert metrics["128k+/pass@1[avg-of-2]/accuracy"] == pytest.approx(100.0)
    assert metrics["judge_failure_rate"] == pytest.approx(1 / 6)
    assert metrics["judge_failures/timeout"] == 1
    assert key["pass@1[avg-of-2]/accuracy"] == metrics["pass@1[avg-of-2]/accuracy"]
    assert key["judge_failure_rate"] == pytest.approx(1 / 6)


# ---- recorded data, config ------------------------------------------------------------------------------


def row_of(rollout: dict) -> dict:
    return next(
        row for row in ROWS if (row["document_set_id"], row["question_id"]) == (
            rollout["document_set_id"], rollout["question_id"],
        )
    )  # fmt: skip


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["document_set_id"])
async def test_recorded_rollouts_reproduce_their_verdict_and_reward(judged, rollout):
    judged.judge.script(*([rollout["judge_output"]] if rollout["judge_output"] is not None else []))
    status, result = await post_json(
        judged.legacy.url + "/verify", {**row_of(rollout), "response": rollout["response"]}
    )
    assert status == 200, result
    assert (result["verdict"], result["reward"]) == (rollout["verdict"], rollout["reward"])
    assert without_judge_ids(without_verify_flags(result)) == without_judge_ids(rollout), (
        "the recorded line is exactly the /verify answer, the judge's request included (a replay plays it)"
    )


def without_judge_ids(record: dict) -> dict:
    """The record with each judge evaluation reduced to its request and answer text (the ids and times of a
    judge's response are new on every call)."""
    evaluations = [
        (evaluation["responses_create_params"], evaluation["response"]["output"][-1]["content"][-1]["text"])
        for evaluation in record["judge_evaluations"]
    ]
    return {**record, "judge_evaluations": evaluations}


def test_the_recordings_cover_both_verdicts_and_an_empty_answer():
    assert sorted(str(rollout["verdict"]) for rollout in ROLLOUTS) == [
        "CORRECT", "CORRECT", "INCORRECT", "INCORRECT", "None",
    ]  # fmt: skip
    assert [rollout["invalid_model_response"] for rollout in ROLLOUTS].count(True) == 1


def test_config_declares_the_environment():
    _, resources, _ = check_environment_config(FOLDER, NAME, "long_context")
    assert resources.model_extra["judge_model_server"] == {
        "type": "responses_api_models",
        "name": "policy_model",
    }
    assert resources.model_extra["judge_protocol"] == "legacy_v1_0"


def base_config(**changes: Any) -> dict:
    return {"name": NAME, "host": "127.0.0.1", "port": 0, **SHIPPED, **changes}


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"judge_protocol": "v2"}, "judge_protocol"),
        ({"judge_responses_create_params_overrides": {"input": []}}, "must not set `input`"),
        ({"judge_responses_create_params_overrides": {"temperature": "hot"}}, "not valid Responses API"),
    ],
)
def test_a_bad_setting_is_refused_naming_it(changes, problem):
    with pytest.raises(ValidationError, match=problem):
        AalcrConfig.model_validate(base_config(**changes))


def test_a_template_with_an_unknown_placeholder_is_refused():
    template = checked_template("{question}|{official_answer}|{candidate_answer}", "here")
    assert template.format(question="q", official_answer="o", candidate_answer="c") == "q|o|c"
    with pytest.raises(ConfigError, match="here"):
        checked_template("{question} {answer}", "here")


@pytest.mark.parametrize(
    ("content", "problem"),
    [("system: hi", "`user` prompt"), ("user: 'x {answer}'", "answer"), ("[", "not YAML")],
)
def test_a_broken_prompt_file_is_a_config_error(tmp_path, content, problem):
    (tmp_path / "judge.yaml").write_text(content)
    with pytest.raises(ConfigError, match=f"judge_prompt_path.*{problem}"):
        load_prompts(tmp_path, "judge.yaml")


def test_each_protocol_ships_its_prompt():
    assert load_prompts(FOLDER, "prompts/legacy_v1_0.yaml")[0] is None
    system, user = load_prompts(FOLDER, "prompts/official_v1_1.yaml")
    assert system is not None and "ordered list" in system
    assert '{"verdict": "CORRECT"}' in user.format(question="q", official_answer="o", candidate_answer="c")


@pytest.mark.parametrize(
    ("text", "protocol", "verdict"),
    [
        ("CORRECT", "legacy_v1_0", "CORRECT"),
        ("`INCORRECT`", "legacy_v1_0", "INCORRECT"),
        ("Correct", "legacy_v1_0", None),
        ("CORRECT, because", "legacy_v1_0", None),
        ('{"verdict": "INCORRECT"}', "official_v1_1", "INCORRECT"),
        ('["CORRECT"]', "official_v1_1", None),
    ],
)
def test_parse_verdict(text, protocol, verdict):
    parsed = parse_verdict(text, protocol)
    assert (parsed if parsed in ("CORRECT", "INCORRECT") else None) == verdict
