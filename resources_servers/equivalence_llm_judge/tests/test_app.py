"""equivalence_llm_judge over HTTP: two real servers (the shipped settings, and every option switched on)
judging through a real openai_model server in front of the scripted upstream (the one test double)."""

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
)
from resources_servers.equivalence_llm_judge.app import EquivalenceLLMJudgeConfig
from resources_servers.equivalence_llm_judge.equivalence_judging import load_template, regex_extract
from tests.upstream_script import ScriptedUpstream, assistant_message, reasoning

FOLDER = Path(__file__).resolve().parents[1]
NAME = "equivalence_llm_judge"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = yaml.safe_load((FOLDER / "configs" / f"{NAME}.yaml").read_text())[NAME]["resources_servers"][NAME]
EQUAL, NOT_EQUAL = "[[A=B]]", "[[A!=B]]"
LENGTH_THRESHOLD = 20
FEATURED = {
    "judge_system_message": "You grade short answers.",
    "question_extract_regex": r"Question: (.*)",
    "check_twice_swap": True,
    "reward_if_swap_fails": -1.0,
    "extraction_length_threshold": LENGTH_THRESHOLD,
    "check_full_generation_on_fail": True,
    "reward_if_full_generation_succeeds": 0.5,
    "grading_timeout_s": 0.5,
    "judge_failure_reward": -0.25,
    "judge_backoff_base_s": 0.05,
    "judge_backoff_max_s": 0.1,
    "judge_responses_create_params": {"input": [], "temperature": 0.0, "max_output_tokens": 64},
}


@dataclass
class Judged:
    shipped: StartedServer
    featured: StartedServer
    judge: ScriptedJudge


@pytest.fixture(scope="module")
def judged(scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judged]:
    workdir = tmp_path_factory.mktemp(NAME)
    with ExitStack() as servers:
        judge = servers.enter_context(run_scripted_judge(scripted_upstream, workdir))
        shipped = {**SHIPPED, "judge_model_server": JUDGE_MODEL_REF}
        config = {
            **judge.config,
            "shipped": instance_config("resources_servers", NAME, **shipped),
            "featured": instance_config("resources_servers", NAME, **{**shipped, **FEATURED}),
        }
        yield Judged(
            shipped=servers.enter_context(run_instance(config, "shipped", workdir)),
            featured=servers.enter_context(run_instance(config, "featured", workdir)),
            judge=judge,
        )


def body(
    expected: str | None, *items: dict, question: str = "Question: Who wrote Hamlet?", **row: Any
) -> dict:
    content = {"responses_create_params": {"input": [{"role": "user", "content": question}]}}
    answer = {} if expected is None else {"expected_answer": expected}
    return {**content, **answer, **row, "response": response_with(*items)}


async def verify(server: StartedServer, request: dict) -> dict:
    status, result = await post_json(server.url + "/verify", request)
    assert status == 200, result
    return result


def prompt_of(judge_request: dict) -> str:
    return judge_request["input"][-1]["content"]


def judged_pair(judge_request: dict) -> tuple[str, str]:
    """(reference, student answer) as the shipped template lays them out."""
    text = prompt_of(judge_request)
    reference = text.split("REFERENCE ANSWER:\n", 1)[1].split("\n\nSTUDENT ANSWER:\n", 1)
    return reference[0], reference[1]


# ---- the shipped settings -------------------------------------------------------------------------------


async def test_an_equal_verdict_earns_1_with_the_declared_fields(judged):
    judged.judge.script(f"Both name Shakespeare. {EQUAL} they are equivalent")
    result = await verify(judged.shipped, body("Shakespeare", assistant_message("William Shakespeare")))
    assert set(result) == {
        *VERIFY_FLAGS,
        "responses_create_params",
        "response",
        "reward",
        "expected_answer",
        "judge_evaluations",
        "judge_failure",
    }
    assert (result["reward"], result["expected_answer"], result["judge_failure"]) == (
        1.0,
        "Shakespeare",
        None,
    )
    (evaluation,) = result["judge_evaluations"]
    assert evaluation["verdict_label"] == EQUAL
    (sent,) = judged.judge.requests()
    assert [item["role"] for item in sent["input"]] == ["user"], "no system message unless configured"
    assert judged_pair(sent) == ("Shakespeare", "William Shakespeare")
    assert "QUESTION:\nQuestion: Who wrote Hamlet?\n" in prompt_of(sent)
    assert evaluation["responses_create_params"]["input"][0]["content"] == prompt_of(sent)


@pytest.mark.parametrize(
    ("verdict", "reward", "label"),
    [
        (f"{NOT_EQUAL} they differ", 0.0, NOT_EQUAL),
        (f"{EQUAL} though one might say {NOT_EQUAL}", 1.0, EQUAL),
        (f"not {NOT_EQUAL}? no: {EQUAL}", 0.0, NOT_EQUAL),
        ("I cannot tell.", 0.0, None),
        ({"output": [assistant_message(EQUAL), reasoning("done")]}, 0.0, None),
    ],
    ids=["not_equal", "equal_first", "not_equal_first", "no_label", "last_item_not_a_message"],
)
async def test_the_verdict_is_the_first_label_of_the_last_output_item(judged, verdict, reward, label):
    judged.judge.script(verdict)
    result = await verify(judged.shipped, body("Shakespeare", assistant_message("Marlowe")))
    assert result["reward"] == reward and result["judge_failure"] is None
    assert [evaluation["verdict_label"] for evaluation in result["judge_evaluations"]] == [label]


async def test_the_last_assistant_message_is_judged_with_its_parts_joined_by_newlines(judged):
    judged.judge.script(EQUAL)
    second = {**assistant_message("Part one."), "id": "msg_2"}
    second["content"].append({"type": "output_text", "text": "Part two.", "annotations": []})
    request = body("x", assistant_message("an earlier message"), reasoning("thinking"), second)
    await verify(judged.shipped, request)
    assert judged_pair(judged.judge.requests()[0])[1] == "Part one.\nPart two."


async def test_a_question_with_an_image_is_shown_to_the_judge_as_its_text_parts(judged):
    judged.judge.script(EQUAL)
    question = [
        {"type": "input_text", "text": "Which bird is shown?"},
        {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=", "detail": "high"},
        {"type": "input_text", "text": "Name it in two words."},
    ]
    result = await verify(judged.shipped, body("A puffin", assistant_message("A puffin"), question=question))
    assert result["reward"] == 1.0
    assert "Which bird is shown?\nName it in two words." in prompt_of(judged.judge.requests()[0])


@pytest.mark.parametrize("items", [(), (reasoning("only thinking"),)], ids=["empty_output", "no_message"])
async def test_no_answer_is_judged_as_the_extraction_failure_message(judged, items):
    judged.judge.script(NOT_EQUAL)
    result = await verify(judged.shipped, body("Shakespeare", *items))
    assert result["reward"] == 0.0
    assert judged_pair(judged.judge.requests()[0])[1] == "[NO VALID ANSWER EXTRACTED]"


async def test_the_expected_answer_may_come_from_the_metadata(judged):
    judged.judge.script(EQUAL)
    result = await verify(judged.shipped, body(None, assistant_message("7"), metadata={"expected_answer": 7}))
    assert result["expected_answer"] == "7"
    assert judged_pair(judged.judge.requests()[0])[0] == "7"


async def test_a_failed_judgment_is_reported_not_scored_and_counted_in_the_metrics(judged):
    judged.judge.script({"status": 400, "body": {"error": {"message": "context length exceeded"}}})
    failed = await verify(judged.shipped, body("Shakespeare", assistant_message("Shakespeare")))
    assert failed["reward"] == 0.0 and failed["judge_evaluations"] == []
    assert failed["judge_failure"]["kind"] == "upstream_error"
    assert "context length exceeded" in failed["judge_failure"]["message"]
    judged.judge.script(EQUAL)
    passed = await verify(judged.shipped, body("Shakespeare", assistant_message("Shakespeare")))
    rollouts = [
        {**rollout, "_ng_task_index": 0, "_ng_rollout_index": index}
        for index, rollout in enumerate([failed, passed])
    ]
    status, metrics = await post_json(
        judged.shipped.url + "/aggregate_metrics", {"verify_responses": rollouts}
    )
    assert status == 200, metrics
    assert metrics["agent_metrics"]["judge_failure_rate"] == 0.5
    assert metrics["agent_metrics"]["judge_failures/upstream_error"] == 1
    assert metrics["key_metrics"]["judge_failure_rate"] == 0.5
    assert metrics["agent_metrics"]["pass@2/accuracy"] == 100.0


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"expected_answer": ["Shakespeare"]}, "expected_answer"),
        ({"template_metadata": "Answer: (.*)"}, "template_metadata"),
        ({"metadata": [1]}, "metadata"),
    ],
)
async def test_a_mistyped_row_field_is_a_422_naming_it(judged, change, field):
    status, result = await post_json(judged.shipped.url + "/verify", {**body("x"), **change})
    assert status == 422
    assert ["body", field] in [error["loc"] for error in result["detail"]]


# ---- every option switched on ---------------------------------------------------------------------------


async def test_the_swap_check_asks_again_with_the_answers_swapped(judged):
    judged.judge.script(EQUAL, f"on reflection {NOT_EQUAL}")
    result = await verify(judged.featured, body("Shakespeare", assistant_message("Will Shakespeare")))
    assert result["reward"] == -1.0, "reward_if_swap_fails"
    first, second = judged.judge.requests()
    assert judged_pair(first) == ("Shakespeare", "Will Shakespeare")
    assert judged_pair(second) == ("Will Shakespeare", "Shakespeare")
    assert first["input"][0] == {"role": "system", "content": "You grade short answers."}
    assert first["temperature"] == 0.0 and first["max_output_tokens"] == 64
    assert "QUESTION:\nWho wrote Hamlet?\n" in prompt_of(first), "question_extract_regex took the group"


async def test_the_row_regex_extracts_and_the_whole_generation_rescues_a_not_equal(judged):
    judged.judge.script(NOT_EQUAL, EQUAL)
    text = "Let me think. Answer: Marlowe\nActually, it was Shakespeare."
    row = {"template_metadata": {"output_regex": r"Answer: (\w+)"}}
    result = await verify(judged.featured, body("Shakespeare", assistant_message(text), **row))
    assert result["reward"] == 0.5, "reward_if_full_generation_succeeds"
    first, second = judged.judge.requests()
    assert judged_pair(first)[1] == "Marlowe"
    assert judged_pair(second)[1] == text
    assert [evaluation["verdict_label"] for evaluation in result["judge_evaluations"]] == [NOT_EQUAL, EQUAL]


async def test_a_long_expected_answer_skips_the_row_regex_the_rescue_and_the_swap(judged):
    expected = "x" * (LENGTH_THRESHOLD + 1)
    text = "Answer: y and more"
    row = {"template_metadata": {"output_regex": r"Answer: (\w+)"}}
    for verdict, reward in ((NOT_EQUAL, 0.0), (EQUAL, 1.0)):
        judged.judge.script(verdict, EQUAL)
        result = await verify(judged.featured, body(expected, assistant_message(text), **row))
        assert result["reward"] == reward and len(result["judge_evaluations"]) == 1
        assert judged_pair(judged.judge.requests()[0])[1] == text


async def test_a_regex_past_its_deadline_scores_0_without_asking_the_judge(judged):
    judged.judge.script(EQUAL)
    row = {"template_metadata": {"output_regex": r"(a+)+$"}}
    result = await verify(judged.featured, body("a", assistant_message("a" * 64 + "b"), **row))
    assert (result["reward"], result["judge_evaluations"], result["judge_failure"]) == (0.0, [], None)
    assert judged.judge.requests() == []
    assert "extract_with_regexes exceeded its 0.5 s deadline" in judged.featured.log()


async def test_a_failed_judgment_earns_the_configured_reward(judged):
    judged.judge.script(EQUAL, {"status": 500, "repeat": 3})
    result = await verify(judged.featured, body("Shakespeare", assistant_message("Shakespeare")))
    assert result["reward"] == -0.25
    assert result["judge_failure"]["kind"] == "upstream_error"
    assert len(result["judge_evaluations"]) == 1, "the swap call failed; the first evaluation is kept"


# ---- recorded data --------------------------------------------------------------------------------------


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["expected_answer"])
async def test_recorded_rollouts_reproduce_their_reward_with_the_recorded_verdicts(judged, rollout):
    row = next(row for row in ROWS if row["expected_answer"] == rollout["expected_answer"])
    judged.judge.script(
        *({"output": evaluation["response"]["output"]} for evaluation in rollout["judge_evaluations"])
    )
    result = await verify(judged.shipped, {**row, "response": rollout["response"]})
    assert result["reward"] == rollout["reward"]
    assert [e["verdict_label"] for e in result["judge_evaluations"]] == [
        e["verdict_label"] for e in rollout["judge_evaluations"]
    ]
    # The recorded judge requests are exactly what verify asks now: a replay plays the judge's turns.
    assert [e["responses_create_params"] for e in result["judge_evaluations"]] == [
        e["responses_create_params"] for e in rollout["judge_evaluations"]
    ]


def test_config_declares_the_environment_with_the_reference_settings():
    _, resources, _ = check_environment_config(FOLDER, NAME, "knowledge")
    settings = resources.model_extra
    assert settings["judge_model_server"] == {"type": "responses_api_models", "name": "policy_model"}
    assert (
        settings["check_full_generation_on_fail"] is False and settings["extraction_length_threshold"] is None
    )
    assert settings["judge_endpoint_max_concurrency"] == 64


@pytest.mark.parametrize(
    ("setting", "value"),
    [("response_extract_regex", "(unclosed"), ("question_extract_regex", "*"), ("grading_timeout_s", 0)],
)
def test_a_bad_setting_is_refused_naming_its_key(setting, value):
    with pytest.raises(ValidationError, match=setting):
        EquivalenceLLMJudgeConfig.model_validate(
            {"name": "x", "host": "127.0.0.1", "port": 0, "entrypoint": "app.py", **SHIPPED, setting: value}
        )


# ---- pure functions -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "pattern", "expected"),
    [
        ("Answer: A ... Answer: B", r"Answer: (\w)", "B"),
        ("x=1", r"(y)?x=(\d)", "1"),
        ("  the whole  ", r"whole", "whole"),
        ("no match here", r"Answer: (\w)", "no match here"),
        ("text", r"(unclosed", "text"),
        ("text", None, "text"),
    ],
    ids=["last_match", "first_non_empty_group", "whole_match", "no_match", "invalid", "no_pattern"],
)
def test_regex_extract(text, pattern, expected):
    assert regex_extract(text, pattern) == expected


@pytest.mark.parametrize(
    ("content", "problem"),
    [("Q: {question} {unknown}", "unknown"), ("Q: {question} {", "Single"), ("Q: {0}", "IndexError")],
)
def test_a_template_with_other_placeholders_is_a_config_error(tmp_path, content, problem):
    (tmp_path / "t.txt").write_text(content)
    with pytest.raises(ConfigError, match=f"judge_prompt_template_fpath.*{problem}"):
        load_template(tmp_path, "t.txt")


def test_the_shipped_template_fills_in_the_three_fields():
    filled = load_template(FOLDER, SHIPPED["judge_prompt_template_fpath"]).format(
        question="Q?", expected_answer="E", generated_answer="G"
    )
    assert "QUESTION:\nQ?\n\nREFERENCE ANSWER:\nE\n\nSTUDENT ANSWER:\nG" in filled
    assert EQUAL in filled and NOT_EQUAL in filled and "\\boxed{...}" in filled
