"""agentif over HTTP: the server runs as a real process, judges through a real openai_model server in front
of the scripted upstream (the one test double) and runs the rows' code checkers in the real sandbox."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nemo_gym.testing import (
    JudgedServer,
    check_environment_config,
    post_json,
    read_jsonl,
    response_with,
    run_judged_server,
    shipped_settings,
    without_verify_flags,
)
from resources_servers.agentif.agentif_grading import fill_prompt, parse_yes_no
from tests.upstream_script import ScriptedUpstream, assistant_message, reasoning

FOLDER = Path(__file__).resolve().parents[1]
NAME = "agentif"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = shipped_settings(FOLDER)
NOTES = ROWS[3]  # release notes: a code check (three "- " bullets), then a judged past-tense check
GOOD_NOTES = "- Sped up the search index.\n- Added CSV export.\n- Fixed a crash on startup."
FOUR_NOTES = GOOD_NOTES + "\n- Updated the docs."


@pytest.fixture(scope="module")
def judged(
    scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[JudgedServer]:
    sandbox = {**SHIPPED["sandbox"], "wall_seconds": 3, "cpu_seconds": 2}
    settings = {**SHIPPED, "sandbox": sandbox}
    with run_judged_server(scripted_upstream, tmp_path_factory.mktemp(NAME), NAME, **settings) as started:
        yield started


async def verify(judged: JudgedServer, text: str | None, row: dict = NOTES, **meta: Any) -> dict:
    items = [] if text is None else [assistant_message(text)]
    body = {
        **row,
        "verifier_metadata": {**row["verifier_metadata"], **meta},
        "response": response_with(*items),
    }
    status, result = await post_json(judged.url + "/verify", body)
    assert status == 200, result
    return result


def code_constraint(source: str) -> dict:
    return {"desc": "a code check", "dimension": "unconditional", "type": ["formatting"],
            "evaluation": [{"type": "code", "exec": source}]}  # fmt: skip


def judged_constraint(*steps: tuple[str, str], dimension: str = "unconditional") -> dict:
    return {"desc": "a judged check", "dimension": dimension, "type": ["semantic"],
            "evaluation": [{"type": kind, "exec": prompt} for kind, prompt in steps]}  # fmt: skip


def verdicts(result: dict) -> list[bool | None]:
    return [constraint["verdict"] for constraint in result["constraint_results"]]


# ---- the judge's verdict ------------------------------------------------------------------------------------


async def test_every_constraint_passing_earns_1(judged):
    judged.judge.script("YES")
    result = await verify(judged, GOOD_NOTES)
    assert (result["reward"], verdicts(result), result["judge_failure"]) == (1.0, [True, True], None)
    assert (result["n_true"], result["n_false"], result["n_null"], result["isr_pass"]) == (2, 0, 0, 1)
    assert result["by_dimension"] == {"example_driven": {"n_true": 2, "n_false": 0}}
    assert (result["query_id"], result["turn_id"]) == (4, 0)
    (sent,) = judged.judge.requests()
    assert sent["input"][-1]["content"] == fill_prompt(
        NOTES["verifier_metadata"]["constraints"][1]["evaluation"][0]["exec"], GOOD_NOTES
    )
    assert len(result["judge_evaluations"]) == 1


@pytest.mark.parametrize("judge_text", ["NO", "The second bullet starts with an adjective.\n\nNO"])
async def test_the_judge_disagreeing_fails_its_constraint_and_the_row(judged, judge_text):
    judged.judge.script(judge_text)
    result = await verify(judged, GOOD_NOTES)
    assert (result["reward"], verdicts(result), result["judge_failure"]) == (0.0, [True, False], None)
    assert (result["n_true"], result["n_false"], result["isr_pass"], result["isr_counted"]) == (1, 1, 0, 1)


@pytest.mark.parametrize("judge_text", ["Looks fine to me.", "yes", ""])
async def test_a_verdict_without_yes_or_no_is_a_judge_failure(judged, judge_text):
    judged.judge.script(judge_text)
    result = await verify(judged, GOOD_NOTES)
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("bad_response", 1)
    assert "no YES or NO" in failure["message"]
    assert (result["reward"], result["constraint_results"], result["isr_counted"]) == (0.0, [], 0)


async def test_a_failing_judge_is_a_judge_failure(judged):
    judged.judge.script({"status": 403, "body": {"error": {"message": "this model is not enabled here"}}})
    result = await verify(judged, GOOD_NOTES)
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("upstream_error", 1)
    assert "not enabled here" in failure["message"]
    assert result["reward"] == 0.0


# ---- conditional checks and judge rewrites ------------------------------------------------------------------


async def test_a_condition_that_does_not_apply_leaves_the_constraint_unscored(judged):
    judged.judge.script("NO")
    constraint = judged_constraint(
        ("llm_conditional_check", "Is it about refunds? {response}"), ("llm", "Q2")
    )
    result = await verify(judged, "Booked.", constraints=[constraint, code_constraint(TRUE_CHECK)])
    assert (verdicts(result), result["reward"], result["n_null"]) == ([None, True], 1.0, 1)
    assert result["constraint_results"][0]["reason"] == "the condition does not apply"
    assert len(judged.judge.requests()) == 1


async def test_a_condition_that_applies_goes_on_to_the_judged_check(judged):
    judged.judge.script("YES", "NO")
    constraint = judged_constraint(("llm_conditional_check", "Refunds? {response}"), ("llm", "Escalated?"))
    result = await verify(judged, "Answered.", constraints=[constraint])
    assert (verdicts(result), result["reward"]) == ([False], 0.0)
    second = judged.judge.requests()[1]["input"][-1]["content"]
    assert second.startswith("Escalated?") and second.endswith("Answered.")


async def test_a_judge_rewrite_feeds_the_next_code_check(judged):
    judged.judge.script("the extracted part: YES")
    constraint = {
        **judged_constraint(("llm", "Extract the status line. {response}")),
        "evaluation": [
            {"type": "llm", "exec": "Extract the status line. {response}"},
            {"type": "code", "exec": "def check_following(response):\n    return 'extracted' in response\n"},
        ],
    }
    result = await verify(judged, "Anything.", constraints=[constraint])
    assert verdicts(result) == [True]


# ---- code checks ----------------------------------------------------------------------------------------------

TRUE_CHECK = "def check_following(response):\n    return True\n"


async def test_a_code_check_that_fails_fails_the_row_whatever_the_judge_says(judged):
    judged.judge.script("YES")
    result = await verify(judged, FOUR_NOTES)
    assert (result["reward"], verdicts(result)) == (0.0, [False, True])
    assert result["by_type"] == {
        "formatting": {"n_true": 0, "n_false": 1},
        "semantic": {"n_true": 1, "n_false": 0},
    }


@pytest.mark.parametrize(
    ("source", "text", "verdict"),
    [
        (
            "import json\ndef check_following(response):\n    return 'a' in json.loads(response)\n",
            '{"a": 1}',
            True,
        ),
        (
            "import json\ndef check_following(response):\n    return 'a' in json.loads(response)\n",
            '{"b": 1}',
            False,
        ),
        (
            "check_following(response):\n    return response.isupper()\n",
            "LOUD",
            True,
        ),  # no `def`, as in AgentIF
        ("def check_following(response):\n    return len(response) < 3\n", "long text", False),
    ],
)
async def test_code_checks_pass_and_fail(judged, source, text, verdict):
    judged.judge.script()
    result = await verify(judged, text, constraints=[code_constraint(source)])
    assert (verdicts(result), result["reward"]) == ([verdict], float(verdict))
    assert judged.judge.requests() == []


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("def check_following(response):\n    return 1 / 0\n", "ZeroDivisionError"),
        ("def check_following(response):\n    return 'yes'\n", "returned str, not a bool"),
        ("x = 1\n", "no check_following"),
        ("def check_following(response):\n    while True:\n        pass\n", "ran out of time"),
    ],
)
async def test_a_checker_that_cannot_say_leaves_its_constraint_unscored(judged, source, reason):
    result = await verify(judged, "text", constraints=[code_constraint(source), code_constraint(TRUE_CHECK)])
    assert (verdicts(result), result["reward"], result["n_null"]) == ([None, True], 1.0, 1)
    assert reason in result["constraint_results"][0]["reason"]


async def test_checker_code_runs_in_the_sandbox_not_in_the_server(judged):
    source = f"import os\ndef check_following(response):\n    return os.path.exists({str(FOLDER)!r})\n"
    result = await verify(judged, "text", constraints=[code_constraint(source)])
    assert verdicts(result) == [False], "the project checkout is invisible inside the sandbox"


# ---- answers and rows -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [None, "<think>- Fixed it.</think>"])
async def test_no_answer_fails_every_constraint_without_judge_or_checker(judged, text):
    judged.judge.script("YES")
    result = await verify(judged, text)
    assert (result["reward"], verdicts(result), result["empty_response"]) == (0.0, [False, False], True)
    assert judged.judge.requests() == []


async def test_the_judge_sees_the_last_message_without_reasoning(judged):
    judged.judge.script("YES")
    body = {**NOTES, "response": response_with(
        assistant_message("draft"), reasoning("thinking"), {**assistant_message("<think>x</think>" + GOOD_NOTES), "id": "m2"}
    )}  # fmt: skip
    status, result = await post_json(judged.url + "/verify", body)
    assert (status, result["reward"]) == (200, 1.0)
    prompt = judged.judge.requests()[0]["input"][-1]["content"]
    assert prompt.endswith(GOOD_NOTES + "\n\nAnswer YES if it does and NO if it does not.")
    assert "draft" not in prompt and "<think>" not in prompt


@pytest.mark.parametrize(
    ("meta", "loc"),
    [
        ({"constraints": []}, ["constraints"]),
        (
            {"constraints": [{"evaluation": [{"type": "python", "exec": "x"}]}]},
            ["constraints", 0, "evaluation"],
        ),
    ],
)
async def test_bad_metadata_is_a_422_naming_the_field(judged, meta, loc):
    body = {**NOTES, "verifier_metadata": {**NOTES["verifier_metadata"], **meta}, "response": response_with()}
    status, result = await post_json(judged.url + "/verify", body)
    assert status == 422
    assert any(
        error["loc"][: 2 + len(loc)] == ["body", "verifier_metadata", *loc] for error in result["detail"]
    )


# ---- metrics --------------------------------------------------------------------------------------------------


def graded(task: int, n_true: int, n_false: int, n_null: int = 0, failed: bool = False) -> dict:
    return {
        **NOTES,
        "response": response_with(),
        "reward": float(n_true + n_false > 0 and n_false == 0),
        "n_true": n_true,
        "n_false": n_false,
        "n_null": n_null,
        "isr_pass": int(n_true + n_false > 0 and n_false == 0),
        "isr_counted": int(n_true + n_false > 0),
        "by_dimension": {"conditional": {"n_true": n_true, "n_false": n_false}},
        "by_type": {"resource": {"n_true": n_true, "n_false": n_false}},
        "judge_failure": {"kind": "timeout", "message": "late", "attempts": 1} if failed else None,
        "_ng_task_index": task,
        "_ng_rollout_index": 0,
    }


async def test_metrics_report_isr_csr_breakdowns_and_judge_failures(judged):
    rollouts = [
        graded(0, 3, 0),
        graded(1, 1, 1),
        graded(2, 0, 0, 2),
        graded(3, 2, 0, 1),
        graded(4, 5, 5, failed=True),
    ]
    status, result = await post_json(judged.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    metrics, key = result["agent_metrics"], result["key_metrics"]
    assert metrics["isr"] == pytest.approx(2 / 3)
    assert metrics["csr"] == pytest.approx(6 / 7)
    assert metrics["by_dimension/condition/accuracy"] == pytest.approx(6 / 7)
    assert metrics["by_type/tool/accuracy"] == pytest.approx(6 / 7)
    assert (metrics["n_null_total"], metrics["count"]) == (3, 4)
    assert metrics["mean_reward"] == pytest.approx(2 / 4)
    assert metrics["judge_failure_rate"] == pytest.approx(1 / 5)
    assert set(key) == {"isr", "csr", "mean_reward", "judge_failure_rate"}


# ---- recorded data, config, helpers ---------------------------------------------------------------------------


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: str(rollout["query_id"]))
async def test_recorded_rollouts_reproduce_their_verdicts_and_reward(judged, rollout):
    row = next(row for row in ROWS if row["verifier_metadata"] == rollout["verifier_metadata"])
    judged.judge.script(*[last_text(evaluation["response"]) for evaluation in rollout["judge_evaluations"]])
    status, result = await post_json(judged.url + "/verify", {**row, "response": rollout["response"]})
    assert status == 200, result
    assert without_judge_ids(without_verify_flags(result)) == without_judge_ids(rollout)


def test_the_recordings_mix_rewards_code_and_judge_verdicts():
    assert {rollout["reward"] for rollout in ROLLOUTS} == {0.0, 1.0}
    assert any(rollout["n_null"] for rollout in ROLLOUTS)


def last_text(response: dict) -> str:
    return response["output"][-1]["content"][-1]["text"]


def without_judge_ids(record: dict) -> dict:
    evaluations = [
        (evaluation["responses_create_params"], last_text(evaluation["response"]))
        for evaluation in record["judge_evaluations"]
    ]
    return {**record, "judge_evaluations": evaluations}


def test_config_declares_the_environment():
    _, resources, _ = check_environment_config(FOLDER, NAME, "instruction_following")
    assert resources.model_extra["judge_model_server"] == {
        "type": "responses_api_models",
        "name": "policy_model",
    }
    assert resources.model_extra["sandbox"]["isolation"] == "auto"


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("YES", True),
        ("NO", False),
        ("Reasoning... NO. On reflection: YES", True),
        ("<think>YES</think>NO", False),
    ],
)
def test_parse_yes_no(text, verdict):
    assert parse_yes_no(text) is verdict


@pytest.mark.parametrize("text", ["", "yes", "NOTHING", "YESTERDAY"])
def test_parse_yes_no_unreadable(text):
    assert parse_yes_no(text) is None


def test_fill_prompt_keeps_literal_braces_and_adds_a_slot_when_missing():
    assert fill_prompt('Check {"a": 1} in {response}.', "R") == 'Check {"a": 1} in R.'
    assert fill_prompt("Check it.", "R").endswith("\nR") and fill_prompt("Check it.", "R").startswith(
        "Check it."
    )
