"""gdpval over HTTP: the server runs as a real process and judges through a real openai_model server in
front of the scripted upstream (the one test double). Deliverables are real docx/pptx/xlsx files."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docx
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
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_instance,
    run_scripted_judge,
)
from resources_servers.gdpval.app import GDPValConfig
from resources_servers.gdpval.deliverables import Limits, read_deliverable
from resources_servers.gdpval.rubric import load_prompt, read_scores, rubric_text
from tests.upstream_script import ScriptedUpstream

FOLDER = Path(__file__).resolve().parents[1]
NAME = "gdpval"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = yaml.safe_load((FOLDER / "configs" / f"{NAME}.yaml").read_text())[NAME]["resources_servers"][NAME]
ROW = ROWS[0]  # the clinic memo, memo.docx, five criteria
LIMITS = Limits(max_files=20, max_file_bytes=10**6, max_unpacked_bytes=10**6, max_chars=5000)


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
        settings = {**SHIPPED, "judge_model_server": JUDGE_MODEL_REF, "judge_max_attempts": 1}
        config = {**judge.config, NAME: instance_config("resources_servers", NAME, **settings)}
        yield Judged(servers.enter_context(run_instance(config, NAME, workdir)), judge)


def verdict(*scores: int, overall: float | None = None) -> str:
    criteria = [{"criterion": i + 1, "score": s, "reason": "r"} for i, s in enumerate(scores)]
    return json.dumps(
        {
            "criteria_scores": criteria,
            "overall_score": overall if overall is not None else sum(scores) / len(scores),
        }
    )


async def verify(judged: Judged, text: str = "done", **row: Any) -> dict:
    status, result = await post_json(
        judged.url + "/verify", {**ROW, **row, "response": response_with(message_item(text))}
    )
    assert status == 200, result
    return result


def write_docx(path: Path, *paragraphs: str) -> None:
    document = docx.Document()
    for paragraph in paragraphs:
        document.add_paragraph(paragraph)
    document.save(str(path))


# ---- judge agrees / disagrees ---------------------------------------------------------------------------


async def test_a_deliverable_the_judge_finds_complete_earns_1(judged):
    judged.judge.script(verdict(1, 1, 1, 1, 1))
    result = await verify(judged)
    assert (result["reward"], result["deliverable_status"], result["judge_failure"]) == (1.0, "read", None)
    assert result["deliverable_files"] == ["memo.docx"]
    assert result["judge_response"]["criteria_met"] == 5 and result["invalid_judge_response"] is False
    (sent,) = judged.judge.requests()
    prompt = sent["input"][-1]["content"]
    assert "From 1 March our Saturday opening hours change to 9:00-13:00" in prompt  # the docx text
    assert "5. It names a contact person or channel for questions." in prompt  # the rubric, numbered
    assert ROW["prompt"] in prompt and "done" not in prompt.split("<work>")[1]


async def test_a_deliverable_the_judge_finds_lacking_earns_its_share(judged):
    judged.judge.script("```json\n" + verdict(1, 0, 0, 0, 0) + "\n```")
    result = await verify(judged)
    assert result["reward"] == pytest.approx(0.2) and result["judge_response"]["criteria_scores"] == [
        1,
        0,
        0,
        0,
        0,
    ]


async def test_xlsx_and_pptx_deliverables_reach_the_judge_as_text(judged):
    judged.judge.script(verdict(1, 1, 1, 1), verdict(1, 1, 0, 1))
    budget = await verify(judged, **ROWS[1])
    deck = await verify(judged, **ROWS[2])
    assert (budget["reward"], deck["reward"]) == (1.0, 0.75)
    first, second = (request["input"][-1]["content"] for request in judged.judge.requests())
    assert "Total | =SUM(B2:B5) | =SUM(C2:C5)" in first
    assert "--- slide 2 ---\nNext month\nRestock the entrance display weekly." in second


async def test_without_a_deliverables_dir_the_reply_is_the_deliverable(judged):
    judged.judge.script(verdict(1, 1, 1, 0))
    result = await verify(
        judged,
        "Notice: water off on 12 June, 10:00-14:00, pipe repairs; fill a kettle.",
        **{**ROWS[4], "deliverables_dir": None},
    )
    assert (result["reward"], result["deliverable_status"]) == (0.75, "from_reply")
    assert "fill a kettle" in judged.judge.requests()[0]["input"][-1]["content"]


# ---- deliverable problems: 0 with a reason, the judge never asked -----------------------------------------


async def test_a_corrupt_deliverable_earns_0_with_the_reason(judged):
    judged.judge.script(verdict(1, 1, 1))
    result = await verify(judged, **ROWS[3])
    assert (result["reward"], result["deliverable_status"], result["judge_failure"]) == (
        0.0,
        "unreadable",
        None,
    )
    assert "lesson_plan.docx: not a valid docx file" in result["failure_reason"]
    assert judged.judge.requests() == []


@pytest.mark.parametrize(
    ("setup", "status", "reason"),
    [
        ("missing", "missing", "is not a folder"),
        ("empty", "empty", "holds no file"),
        ("bomb", "unreadable", "unpacks to more than"),
        ("unknown", "unreadable", "a .bin file is not read"),
    ],
)
async def test_missing_empty_or_unreadable_deliverables_earn_0_with_a_reason(
    judged, tmp_path, setup, status, reason
):
    folder = tmp_path / "task"
    if setup != "missing":
        folder.mkdir()
    if setup == "bomb":
        with zipfile.ZipFile(folder / "big.docx", "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("word/document.xml", b"\0" * 150_000_000)
    if setup == "unknown":
        (folder / "data.bin").write_bytes(b"\1\2")
    judged.judge.script(verdict(1))
    result = await verify(judged, deliverables_dir=str(folder))
    assert (result["reward"], result["deliverable_status"]) == (0.0, status)
    assert reason in result["failure_reason"]
    assert judged.judge.requests() == []


async def test_a_readable_file_is_judged_beside_a_broken_one_and_agent_bookkeeping_is_skipped(
    judged, tmp_path
):
    write_docx(tmp_path / "memo.docx", "Saturday hours are 9:00-13:00 from 1 March.")
    (tmp_path / "broken.xlsx").write_bytes(b"not a zip")
    (tmp_path / "finish_params.json").write_text('{"summary": "SECRET-SUMMARY"}')
    (tmp_path / "reference_files").mkdir()
    (tmp_path / "reference_files" / "input.txt").write_text("REFERENCE-INPUT")
    judged.judge.script(verdict(1, 1, 0, 0, 0))
    result = await verify(judged, deliverables_dir=str(tmp_path))
    assert (result["reward"], result["deliverable_files"]) == (0.4, ["broken.xlsx", "memo.docx"])
    assert result["deliverable_errors"] == ["broken.xlsx: not a valid xlsx file (File is not a zip file)"]
    prompt = judged.judge.requests()[0]["input"][-1]["content"]
    assert "9:00-13:00 from 1 March" in prompt and "SECRET" not in prompt and "REFERENCE-INPUT" not in prompt


# ---- malformed verdicts, failing judge: judge_failure, never a grade --------------------------------------


@pytest.mark.parametrize(
    ("judge_text", "problem"),
    [
        ("All five criteria are met.", "no JSON object"),
        ('{"criteria_scores": [{"score": 2}], "overall_score": 1.0}', "not 0 or 1"),
        ('{"overall_score": 1.7}', "overall_score must be a number in [0, 1]"),
        ('{"verdict": "good"}', "overall_score must be a number in [0, 1]"),
    ],
)
async def test_a_malformed_verdict_is_a_judge_failure(judged, judge_text, problem):
    judged.judge.script(judge_text)
    result = await verify(judged)
    assert (result["reward"], result["judge_response"], result["invalid_judge_response"]) == (0.0, None, True)
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("bad_response", 1)
    assert problem in failure["message"]


async def test_a_failing_judge_is_a_judge_failure(judged):
    judged.judge.script({"status": 403, "body": {"error": {"message": "this model is not enabled"}}})
    result = await verify(judged)
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"], result["reward"]) == ("upstream_error", 1, 0.0)
    assert "not enabled" in failure["message"]


# ---- malformed rows -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [
        {"rubric_json": None, "rubric_pretty": None},
        {"rubric_json": "[]", "rubric_pretty": "  "},
        {"task_id": None},
    ],
    ids=["no_rubric", "empty_rubric", "no_task_id"],
)
async def test_a_malformed_row_is_a_422(judged, change):
    status, result = await post_json(judged.url + "/verify", {**ROW, **change, "response": response_with()})
    assert status == 422, result


# ---- metrics, recordings, config ------------------------------------------------------------------------


async def test_metrics_leave_failed_judgments_out_and_count_unread_deliverables(judged):
    def rollout(task: int, reward: float, **extra: Any) -> dict:
        return {
            **ROW,
            "response": response_with(),
            "reward": reward,
            "_ng_task_index": task,
            "_ng_rollout_index": 0,
            **extra,
        }

    failure = {"kind": "timeout", "message": "late", "attempts": 1}
    rollouts = [
        rollout(0, 1.0, deliverable_status="read"),
        rollout(1, 0.5, deliverable_status="read"),
        rollout(2, 0.0, deliverable_status="unreadable"),
        rollout(3, 0.0, deliverable_status="read", judge_failure=failure),
    ]
    status, result = await post_json(judged.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    metrics = result["agent_metrics"]
    assert metrics["pass@1[avg-of-1]/rubric_score"] == pytest.approx(100 * 1.5 / 3)
    assert metrics["judge_failure_rate"] == pytest.approx(0.25)
    assert metrics["deliverable_unread_rate"] == pytest.approx(0.25)
    assert result["key_metrics"]["pass@1[avg-of-1]/rubric_score"] == pytest.approx(50.0)


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["task_id"])
async def test_recorded_rollouts_reproduce_their_answer(judged, rollout):
    row = next(row for row in ROWS if row["task_id"] == rollout["task_id"])
    if rollout["judge_output"] is not None:
        judged.judge.script(rollout["judge_output"])
    status, result = await post_json(judged.url + "/verify", {**row, "response": rollout["response"]})
    assert status == 200, result
    assert (result["reward"], result["deliverable_status"]) == (
        rollout["reward"],
        rollout["deliverable_status"],
    )
    assert without_judge_responses(result) == without_judge_responses({key: rollout[key] for key in result})


def without_judge_responses(record: dict) -> dict:
    """The record with each judge evaluation reduced to its request (a response's ids are new per call)."""
    return {
        **record,
        "judge_evaluations": [e["responses_create_params"] for e in record["judge_evaluations"]],
    }


def test_config_declares_the_environment():
    _, resources, _ = check_environment_config(FOLDER, NAME, "other")
    assert resources.model_extra["judge_model_server"] == {
        "type": "responses_api_models",
        "name": "policy_model",
    }


@pytest.mark.parametrize(
    ("key", "value"), [("reward_mode", "comparison"), ("rubric_scoring_mode", "structured")]
)
def test_unported_modes_are_refused_naming_the_key(key, value):
    base = {"name": NAME, "host": "127.0.0.1", "port": 0, **SHIPPED}
    with pytest.raises(ValidationError, match=key):
        GDPValConfig.model_validate({**base, key: value})


def test_a_broken_prompt_file_is_a_config_error(tmp_path):
    (tmp_path / "judge.txt").write_text("Grade {work} please")
    with pytest.raises(ConfigError, match="judge_prompt_template_fpath.*work"):
        load_prompt(tmp_path, "judge.txt")


def test_reading_scores_and_rubrics():
    assert read_scores('{"criteria_scores": [1, 0], "overall_score": 0.5}') == (0.5, [1.0, 0.0])
    assert read_scores('noise {"criteria_scores": [{"score": 1}, {"score": 1}]} tail') == (1.0, [1.0, 1.0])
    assert rubric_text('[{"criterion": "A"}, {"criterion": "B"}]', None) == "1. A\n2. B"
    assert rubric_text("not json", "- fallback") == "- fallback"


def test_text_is_cut_to_the_character_budget(tmp_path):
    write_docx(tmp_path / "long.docx", "x" * 9000)
    found = read_deliverable(tmp_path, LIMITS)
    assert found.truncated and len(found.text) < 5100
