"""terminus_judge over HTTP (a real server with the shipped config; two more judging through a real
openai_model server in front of the scripted upstream), plus the schema checks in-process."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

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
    run_resources_server,
    run_scripted_judge,
)
from resources_servers.terminus_judge.grading import HARNESSES, keystroke_similarity, schema_problem
from tests.upstream_script import ScriptedUpstream

NAME = "terminus_judge"
INSTANCE = "terminus_judge_resources_server"
FOLDER = Path(__file__).resolve().parents[1]
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = yaml.safe_load((FOLDER / "configs" / f"{NAME}.yaml").read_text())[INSTANCE]["resources_servers"][
    NAME
]
COUNT, DONE, UNTAR, QUIT_LESS, RESTART = ROWS  # terminus_2, terminus_2, terminus_1, terminus_1, terminus_2
T2 = json.loads(COUNT["expected_answer"])
T1 = json.loads(UNTAR["expected_answer"])


EQUAL, NOT_EQUAL = "[[A=B]]", "[[A!=B]]"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    inner = {key: value for key, value in SHIPPED.items() if key not in ("entrypoint", "judge_model_server")}
    with run_resources_server(
        INSTANCE, tmp_path_factory.mktemp(NAME), implementation=NAME, **inner
    ) as started:
        yield started


@dataclass
class Judged:
    server: StartedServer  # judge after similarity, both orders
    judge_only: StartedServer  # similarity off: every turn past the flag check goes to the judge
    judge: ScriptedJudge


@pytest.fixture(scope="module")
def judged(scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judged]:
    workdir = tmp_path_factory.mktemp("terminus_judged")
    with ExitStack() as servers:
        judge = servers.enter_context(run_scripted_judge(scripted_upstream, workdir))
        inner = {key: value for key, value in SHIPPED.items() if key != "entrypoint"}
        judging = {
            **inner,
            "judge_model_server": JUDGE_MODEL_REF,
            "enable_llm_judge": True,
            "check_twice_swap": True,
            "reward_if_swap_fails": 0.25,
            "judge_failure_reward": -1.0,
            "judge_max_attempts": 1,
        }
        judge_only = {**judging, "enable_string_similarity": False, "check_twice_swap": False}
        config = {
            **judge.config,
            "judged": instance_config("resources_servers", NAME, **judging),
            "judge_only": instance_config("resources_servers", NAME, **judge_only),
        }
        yield Judged(
            server=servers.enter_context(run_instance(config, "judged", workdir)),
            judge_only=servers.enter_context(run_instance(config, "judge_only", workdir)),
            judge=judge,
        )


async def verify(server: StartedServer, row: dict, text: str | None, **changes: Any) -> dict:
    items = [] if text is None else [message_item(text)]
    status, answer = await post_json(
        server.url + "/verify", {**row, **changes, "response": response_with(*items)}
    )
    assert status == 200, answer
    return answer


def turn(base: dict, **changes: Any) -> str:
    return json.dumps({**base, **changes})


async def test_the_demonstrated_turn_earns_1_for_each_harness(server):
    for row in (COUNT, UNTAR):
        answer = await verify(server, row, row["expected_answer"])
        assert (answer["reward"], answer["failure_reason"], answer["similarity_score"]) == (1.0, "none", 1.0)
        assert answer["schema_check_passed"] and answer["task_complete_check_passed"]
        assert answer["string_similarity_passed"] and not answer["judge_passed"]
        assert answer["parsed_output"] == json.loads(row["expected_answer"])
        assert answer["uuid"] == row["uuid"] and answer["metadata"] == row["metadata"]


async def test_reasoning_before_think_close_is_dropped(server):
    answer = await verify(server, COUNT, "<think>grep -c counts lines</think>\n" + COUNT["expected_answer"])
    assert answer["reward"] == 1.0 and answer["model_output"] == COUNT["expected_answer"]


@pytest.mark.parametrize(
    "text",
    ["", "not json", "[1, 2]", "```json\n{}\n```", '{"analysis": "cut off', None],
    ids=["empty", "prose", "list", "fenced", "truncated", "no-message"],
)
async def test_output_that_is_not_a_json_object_earns_0(server, text):
    answer = await verify(server, COUNT, text)
    assert (answer["reward"], answer["failure_reason"], answer["parsed_output"]) == (
        0.0,
        "json_parsing_failed",
        None,
    )
    assert answer["mask_sample"] is False


@pytest.mark.parametrize(
    ("row", "text", "problem"),
    [
        (COUNT, turn(T2, plan=None), "output.plan has the wrong type"),
        (COUNT, json.dumps({k: v for k, v in T2.items() if k != "analysis"}), "output lacks 'analysis'"),
        (COUNT, turn(T2, commands=[{"keystrokes": "ls\n", "is_blocking": True}]), "commands[0] has unknown keys"),
        (COUNT, turn(T2, commands=[{"keystrokes": "ls\n", "duration": "1"}]), "commands[0].duration has the wrong type"),
        (COUNT, turn(T2, is_task_complete=False), "output has unknown keys ['is_task_complete']"),
        (UNTAR, turn(T1, commands=[{"keystrokes": "ls\n", "duration": 1}]), "commands[0] lacks 'is_blocking'"),
        (UNTAR, T2 and json.dumps(T2), "output lacks 'state_analysis'"),
        (UNTAR, turn(T1, commands=[{"keystrokes": "ls\n", "is_blocking": 1, "timeout_sec": 1}]), "commands[0].is_blocking has the wrong type"),
    ],
    ids=["null-plan", "no-analysis", "t1-key-in-t2", "string-duration", "t1-flag-in-t2", "t2-command-in-t1", "t2-in-t1", "int-as-bool"],
)  # fmt: skip
async def test_output_outside_the_harness_schema_earns_0_with_the_reason(server, row, text, problem):
    answer = await verify(server, row, text)
    assert (answer["reward"], answer["failure_reason"]) == (0.0, "schema_check_failed")
    assert answer["schema_problem"].startswith(problem) and answer["parsed_output"] is not None


async def test_the_completion_flag_must_agree_and_missing_means_not_complete(server):
    claims_done = await verify(server, COUNT, turn(T2, task_complete=True))
    assert (claims_done["reward"], claims_done["failure_reason"]) == (0.0, "task_complete_check_failed")
    assert claims_done["similarity_score"] == -1.0
    no_flag = await verify(server, COUNT, json.dumps({k: v for k, v in T2.items() if k != "task_complete"}))
    assert no_flag["reward"] == 1.0
    not_done = await verify(server, DONE, turn(json.loads(DONE["expected_answer"]), task_complete=False))
    assert not_done["failure_reason"] == "task_complete_check_failed"


async def test_keystrokes_must_reach_the_threshold_and_a_row_threshold_overrides_the_config(server):
    other = [{"keystrokes": "wc -l /var/log/app/server.log\n", "duration": 0.1}]
    wrong = await verify(server, COUNT, turn(T2, commands=other))
    assert (wrong["reward"], wrong["failure_reason"]) == (0.0, "command_correctness_failed")
    assert 0.0 < wrong["similarity_score"] < 0.9
    lenient = await verify(server, COUNT, turn(T2, commands=other), threshold=wrong["similarity_score"])
    assert lenient["reward"] == 1.0 and lenient["threshold"] == wrong["similarity_score"]
    nothing = await verify(server, COUNT, turn(T2, commands=[]))
    assert (nothing["reward"], nothing["similarity_score"]) == (0.0, 0.0)


async def test_the_gold_turn_may_sit_in_metadata(server):
    row = {
        **COUNT,
        "expected_answer": None,
        "metadata": {**COUNT["metadata"], "expected_answer": COUNT["expected_answer"]},
    }
    answer = await verify(server, row, COUNT["expected_answer"])
    assert answer["reward"] == 1.0 and answer["expected_answer"] == COUNT["expected_answer"]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"expected_answer": None}, "expected_answer"),
        ({"expected_answer": "not json"}, "expected_answer"),
        ({"expected_answer": "[1]"}, "expected_answer"),
        ({"metadata": {"harness": "terminus_3"}}, "metadata.harness"),
        ({"metadata": None}, "metadata.harness"),
        ({"metadata": {"harness": ["terminus_2"]}}, "metadata.harness"),
        ({"threshold": 1.5}, "threshold"),
    ],
)
async def test_a_row_that_cannot_be_graded_is_a_422_naming_the_field(server, changes, field):
    body = {**COUNT, **changes, "response": response_with(message_item(COUNT["expected_answer"]))}
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 422 and field in json.dumps(answer)


async def test_row_fields_are_echoed_and_cannot_forge_results(server):
    answer = await verify(server, COUNT, "nope", trace="t-3", reward=1.0, schema_check_passed=True)
    assert (answer["trace"], answer["reward"], answer["schema_check_passed"]) == ("t-3", 0.0, False)


async def test_aggregate_metrics_report_pass_at_k_and_failure_shares(server):
    results = [await verify(server, COUNT, COUNT["expected_answer"]), await verify(server, COUNT, "x")]
    rollouts = [{**result, "_ng_task_index": 0, "_ng_rollout_index": i} for i, result in enumerate(results)]
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    assert body["key_metrics"]["pass@2/accuracy"] == 100.0
    assert body["agent_metrics"]["failure/json_parsing_failed"] == 0.5


@pytest.mark.parametrize("index", range(len(ROLLOUTS)))
async def test_recorded_rollouts_verify_to_their_recorded_result(server, index):
    rollout = ROLLOUTS[index]
    status, body = await post_json(server.url + "/verify", rollout)
    assert status == 200, body
    fields = (
        "reward",
        "failure_reason",
        "similarity_score",
        "parsed_output",
        "model_output",
        "schema_problem",
    )
    assert {key: body[key] for key in fields} == {key: rollout[key] for key in fields}


def test_recorded_rollouts_mix_passes_and_failed_checks():
    assert [(r["reward"], r["failure_reason"]) for r in ROLLOUTS] == [
        (1.0, "none"),
        (0.0, "task_complete_check_failed"),
        (1.0, "none"),
        (0.0, "json_parsing_failed"),
        (1.0, "none"),
    ]


def test_config_declares_the_environment():
    _, resources, _ = check_environment_config(
        FOLDER, INSTANCE, "agent", agent_instance="terminus_judge_simple_agent"
    )
    assert resources.model_extra["string_similarity_threshold"] == 0.9


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"enable_llm_judge": True}, "enable_llm_judge needs judge_model_server"),
        (
            {"enable_string_similarity": False},
            "enable_string_similarity: false leaves the commands unchecked",
        ),
    ],
)
def test_a_config_without_a_command_check_stops_the_server_at_startup(tmp_path, changes, message):
    # The server reports the config error and exits; on a loaded machine the exit may come after the
    # bind deadline, so either outcome carries the log with the message.
    with pytest.raises((RuntimeError, TimeoutError), match=message):
        with run_resources_server(INSTANCE, tmp_path, implementation=NAME, domain="agent", **changes):
            pass


def test_keystrokes_are_joined_in_order():
    one = {"commands": [{"keystrokes": "cd /a"}, {"keystrokes": "ls"}]}
    assert keystroke_similarity(one, {"commands": [{"keystrokes": "cd /a ls"}]}) == 1.0
    assert keystroke_similarity(one, {"commands": [{"keystrokes": "ls"}, {"keystrokes": "cd /a"}]}) < 1.0
    assert keystroke_similarity({"commands": []}, {"commands": []}) == 1.0


def test_both_schemas_accept_their_minimal_turn():
    assert (
        schema_problem(
            {"analysis": "", "plan": "", "commands": [{"keystrokes": ""}]}, HARNESSES["terminus_2"]
        )
        is None
    )
    minimal_1 = {"state_analysis": "", "explanation": "", "commands": [], "is_task_complete": True}
    assert schema_problem(minimal_1, HARNESSES["terminus_1"]) is None


# ---- the optional judge ---------------------------------------------------------------------------------

OTHER_COMMANDS = turn(
    T2, commands=[{"keystrokes": "grep ERROR /var/log/app/server.log | wc -l > /tmp/errors.txt\n"}]
)


async def test_the_judge_rescues_equivalent_keystrokes_in_both_orders(judged):
    judged.judge.script(f"Same count. {EQUAL}", f"Still the same. {EQUAL}")
    answer = await verify(judged.server, COUNT, OTHER_COMMANDS)
    assert (answer["reward"], answer["failure_reason"], answer["judge_passed"]) == (1.0, "none", True)
    assert answer["similarity_score"] < 0.9 and not answer["string_similarity_passed"]
    first, second = judged.judge.requests()
    assert COUNT["expected_answer"] in first["input"][-1]["content"].split("CANDIDATE TURN")[0]
    assert OTHER_COMMANDS in second["input"][-1]["content"].split("CANDIDATE TURN")[0], "swapped"
    assert [e["verdict_label"] for e in answer["judge_evaluations"]] == [EQUAL, EQUAL]


async def test_a_judge_saying_different_or_failing_the_swap(judged):
    judged.judge.script(f"{NOT_EQUAL} wc counts differently")
    rejected = await verify(judged.server, COUNT, OTHER_COMMANDS)
    assert (rejected["reward"], rejected["failure_reason"]) == (0.0, "judge_evaluation_failed")
    judged.judge.script(EQUAL, NOT_EQUAL)
    swapped = await verify(judged.server, COUNT, OTHER_COMMANDS)
    assert (swapped["reward"], swapped["failure_reason"], swapped["judge_passed"]) == (
        0.25,
        "judge_evaluation_failed",
        False,
    )


async def test_close_keystrokes_and_earlier_failures_never_reach_the_judge(judged):
    judged.judge.script(NOT_EQUAL)
    assert (await verify(judged.server, COUNT, COUNT["expected_answer"]))["reward"] == 1.0
    assert (await verify(judged.server, COUNT, turn(T2, task_complete=True)))["reward"] == 0.0
    assert judged.judge.requests() == []


async def test_with_similarity_off_the_judge_decides_every_turn(judged):
    judged.judge.script(NOT_EQUAL)
    answer = await verify(judged.judge_only, COUNT, COUNT["expected_answer"])
    assert (answer["reward"], answer["similarity_score"], answer["failure_reason"]) == (
        0.0,
        -1.0,
        "judge_evaluation_failed",
    )


async def test_a_failed_judgment_masks_the_sample(judged):
    judged.judge.script({"status": 400, "body": {"error": {"message": "context length exceeded"}}})
    answer = await verify(judged.server, COUNT, OTHER_COMMANDS)
    assert (answer["reward"], answer["mask_sample"], answer["failure_kind"]) == (-1.0, True, "judge_failed")
    assert answer["judge_failure"]["kind"] == "upstream_error"
    rollouts = [{**answer, "_ng_task_index": 0, "_ng_rollout_index": 0}]
    status, body = await post_json(judged.server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200 and "mean/reward" not in body["agent_metrics"], "a masked sample is not scored"
