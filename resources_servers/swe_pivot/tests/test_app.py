"""swe_pivot over HTTP (a real server with the shipped binary config, one in continuous mode), plus the
grading layers in-process."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from nemo_gym.testing import (
    StartedServer,
    check_environment_config,
    function_call_item,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_resources_server,
)
from resources_servers.swe_pivot.grading import (
    Call,
    GradingSettings,
    command_paths,
    grade_step,
    names_match,
    target_matches,
)

NAME = "swe_pivot"
FOLDER = Path(__file__).resolve().parents[1]
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = yaml.safe_load((FOLDER / "configs" / f"{NAME}.yaml").read_text())[NAME]["resources_servers"][NAME]
VIEW, EDIT, PYTEST, GREP, FINISH = ROWS  # the five steps, in file order
EDIT_ARGS = json.loads(EDIT["expected_action"]["arguments"])
PYTEST_COMMAND = json.loads(PYTEST["expected_action"]["arguments"])["command"]


def start(tmp_path_factory: pytest.TempPathFactory, name: str, **changes: Any) -> Iterator[StartedServer]:
    inner = {key: value for key, value in SHIPPED.items() if key != "entrypoint"} | changes
    with run_resources_server(name, tmp_path_factory.mktemp(name), implementation=NAME, **inner) as started:
        yield started


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    yield from start(tmp_path_factory, NAME)


@pytest.fixture(scope="module")
def continuous(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    yield from start(tmp_path_factory, "swe_pivot_continuous", reward_mode="continuous")


async def verify(server: StartedServer, row: dict, *items: dict, **changes: Any) -> dict:
    status, answer = await post_json(
        server.url + "/verify", {**row, **changes, "response": response_with(*items)}
    )
    assert status == 200, answer
    return answer


def edit_call(**changes: Any) -> dict:
    return function_call_item("str_replace_editor", {**EDIT_ARGS, **changes})


async def test_the_demonstrated_edit_earns_1_with_every_layer_reported(server):
    answer = await verify(server, EDIT, edit_call())
    assert (answer["reward"], answer["tool_name_match"], answer["target_match"]) == (1.0, True, True)
    assert answer["similarity_score"] == 1.0 and answer["failure_reason"] == "none"
    assert answer["diff_size_penalty"] is None, "no shaping in binary mode"
    assert answer["model_output"].startswith('str_replace_editor({"command": "str_replace"')
    assert (answer["uuid"], answer["metadata"]) == (EDIT["uuid"], EDIT["metadata"])
    assert answer["mask_sample"] is False


async def test_a_tool_of_the_same_family_matches_and_a_foreign_one_does_not(server):
    other_editor = await verify(server, EDIT, function_call_item("EditFile", EDIT_ARGS))
    assert (other_editor["reward"], other_editor["tool_name_match"]) == (1.0, True)
    shell = await verify(
        server, GREP, function_call_item("execute_bash", {"command": "grep -rn use_color ."})
    )
    assert (shell["reward"], shell["tool_name_match"], shell["failure_reason"]) == (
        0.0,
        False,
        "tool_name_mismatch",
    )


@pytest.mark.parametrize(
    ("row", "item"),
    [
        (EDIT, edit_call(path="/testbed/src/tallyho/means.py")),
        (EDIT, edit_call(command="insert")),
        (VIEW, function_call_item("str_replace_editor", {"command": "view", "path": "/testbed/src/tallyho/stats.py", "view_range": [1, 40]})),
        (PYTEST, function_call_item("execute_bash", {"command": "pytest tests/test_parse.py -q"})),
        (PYTEST, function_call_item("execute_bash", {"command": "cd /repo && python -m pytest tests/test_other.py -q"})),
        (GREP, function_call_item("grep", {"pattern": "use_color", "path": "/testbed/docs"})),
    ],
    ids=["other-file", "other-subcommand", "view-range-misses", "other-verb", "other-path", "search-elsewhere"],
)  # fmt: skip
async def test_the_right_tool_on_the_wrong_target_earns_0(server, row, item):
    answer = await verify(server, row, item)
    assert (answer["reward"], answer["target_match"], answer["failure_reason"]) == (
        0.0,
        False,
        "target_mismatch",
    )
    assert answer["similarity_score"] is None, "later layers are not reached"


async def test_a_view_without_range_and_a_different_repo_root_still_hit_the_target(server):
    call = function_call_item(
        "str_replace_editor", {"command": "view", "path": "/workspace/tallyho/stats.py"}
    )
    assert (await verify(server, VIEW, call))["reward"] == 1.0


async def test_binary_mode_needs_the_full_credit_similarity(server):
    close = await verify(
        server, PYTEST, function_call_item("execute_bash", {"command": PYTEST_COMMAND + " -x"})
    )
    assert close["reward"] == 1.0 and close["similarity_score"] >= 0.8
    far = await verify(server, EDIT, edit_call(new_str="    ordered = sorted(values or [0])"))
    assert (far["reward"], far["failure_reason"]) == (0.0, "similarity_below_threshold")
    assert far["similarity_score"] < 0.8


async def test_continuous_mode_gives_partial_credit_less_the_diff_size_cost(continuous):
    new_str = "    if len(values) == 0:\n        return None\n    ordered = sorted(values)\n    middle = len(ordered) // 2"
    answer = await verify(continuous, EDIT, edit_call(new_str=new_str))
    score, penalty = answer["similarity_score"], answer["diff_size_penalty"]
    assert 0.4 <= score < 0.8
    edit_length = len(EDIT_ARGS["old_str"]) + 1 + len(new_str)
    assert penalty == pytest.approx(0.1 * edit_length / 500)
    assert answer["reward"] == pytest.approx((0.5 + 0.5 * (score - 0.4) / 0.4) * (1 - penalty))
    exact = await verify(continuous, EDIT, edit_call())
    assert exact["reward"] == pytest.approx(1 - exact["diff_size_penalty"]) and exact["reward"] < 1.0


@pytest.mark.parametrize(
    "items",
    [[], [message_item("I'll now finish.")], [{"type": "reasoning", "id": "r", "summary": []}]],
    ids=["nothing", "message", "reasoning-only"],
)
async def test_no_tool_call_earns_0_as_invalid_output(server, items):
    answer = await verify(server, FINISH, *items)
    assert (answer["reward"], answer["tool_name_match"], answer["failure_reason"]) == (
        0.0,
        False,
        "model_output_invalid",
    )
    assert answer["model_output"] == "(no function_call in response)" and answer["mask_sample"] is False


async def test_the_first_call_is_graded_and_bad_argument_json_is_an_empty_object(server):
    first_wrong = await verify(
        server,
        PYTEST,
        function_call_item("finish", {}),
        function_call_item("execute_bash", {"command": PYTEST_COMMAND}),
    )
    assert first_wrong["tool_name_match"] is False
    broken = await verify(server, EDIT, function_call_item("str_replace_editor", "{not json"))
    assert (broken["reward"], broken["failure_reason"]) == (0.0, "similarity_below_threshold")


async def test_the_gold_step_is_read_from_each_of_nemo_gyms_three_places(server):
    gold = FINISH["expected_answer"]
    from_answer = await verify(server, FINISH, function_call_item("submit", {}))
    in_metadata = {key: value for key, value in FINISH.items() if key != "expected_answer"}
    in_metadata["metadata"] = {"expected_action": json.loads(gold)}
    from_metadata = await verify(server, in_metadata, function_call_item("finish", {}))
    as_field = {**in_metadata, "metadata": None, "expected_action": json.loads(gold)}
    from_field = await verify(server, as_field, function_call_item("execute_bash", {"command": "ls"}))
    assert (from_answer["reward"], from_metadata["reward"], from_field["reward"]) == (1.0, 1.0, 0.0)
    assert from_answer["expected_answer"] == gold and from_metadata["expected_answer"] == ""


@pytest.mark.parametrize(
    "changes",
    [
        {"expected_action": None, "expected_answer": None},
        {"expected_action": {"type": "message", "content": "hi"}, "expected_answer": None},
        {"expected_action": {"type": "function_call", "name": ""}, "expected_answer": None},
        {"expected_action": None, "expected_answer": "not json"},
        {"expected_action": "str_replace_editor"},
    ],
)
async def test_a_row_without_a_gold_call_is_a_422_naming_it(server, changes):
    body = {**FINISH, "expected_answer": None, **changes, "response": response_with(message_item("x"))}
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 422 and "expected_action" in json.dumps(answer)


async def test_row_fields_are_echoed_and_cannot_forge_results(server):
    answer = await verify(server, EDIT, message_item("no"), trace="t-7", reward=1.0, tool_name_match=True)
    assert (answer["trace"], answer["reward"], answer["tool_name_match"]) == ("t-7", 0.0, False)
    assert answer["expected_action"] == EDIT["expected_action"]


async def test_aggregate_metrics_report_pass_at_k_and_failure_shares(server):
    results = [await verify(server, EDIT, edit_call()), await verify(server, EDIT, message_item("done"))]
    rollouts = [{**result, "_ng_task_index": 0, "_ng_rollout_index": i} for i, result in enumerate(results)]
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    assert body["key_metrics"]["pass@2/accuracy"] == 100.0
    assert body["agent_metrics"]["failure/none"] == 0.5
    assert body["agent_metrics"]["failure/model_output_invalid"] == 0.5


@pytest.mark.parametrize("index", range(len(ROLLOUTS)))
async def test_recorded_rollouts_verify_to_their_recorded_result(server, index):
    rollout = ROLLOUTS[index]
    status, body = await post_json(server.url + "/verify", rollout)
    assert status == 200, body
    fields = (
        "reward",
        "failure_reason",
        "tool_name_match",
        "target_match",
        "similarity_score",
        "model_output",
    )
    assert {key: body[key] for key in fields} == {key: rollout[key] for key in fields}


def test_recorded_rollouts_mix_passes_and_each_kind_of_miss():
    assert [(r["reward"], r["failure_reason"]) for r in ROLLOUTS] == [
        (1.0, "none"),
        (0.0, "target_mismatch"),
        (1.0, "none"),
        (0.0, "tool_name_mismatch"),
        (1.0, "none"),
    ]


def test_config_declares_the_environment_and_a_one_step_agent():
    _, resources, agent = check_environment_config(FOLDER, NAME, "agent")
    assert resources.model_extra["reward_mode"] == "binary" and agent["max_steps"] == 1


def test_thresholds_out_of_order_stop_the_server_at_startup(tmp_path):
    with pytest.raises(RuntimeError, match="similarity_threshold"):
        with run_resources_server(NAME, tmp_path, domain="agent", similarity_threshold=0.9):
            pass


# ---- the layers in-process ------------------------------------------------------------------------------


def test_names_compare_across_spellings_and_unknown_tools_only_by_name():
    assert names_match(Call("StrReplaceEditor", {}), Call("apply_patch", {}))
    assert names_match(Call("my_tool", {}), Call("MY_TOOL", {}))
    assert not names_match(Call("my_tool", {}), Call("other_tool", {}))


def test_paths_are_found_in_shell_commands():
    assert command_paths("cd /testbed && cat ./a/b.py src/x.py --flag=1") == [
        "/testbed",
        "./a/b.py",
        "src/x.py",
    ]


def test_search_and_read_compare_the_last_three_path_parts():
    expected = Call("read_file", {"path": "/repo/pkg/sub/mod.py"})
    assert target_matches(Call("grep", {"path": "/elsewhere/pkg/sub/mod.py"}), expected)
    assert not target_matches(Call("grep", {"path": "/repo/other/sub/mod.py"}), expected)


def test_disabled_layers_are_skipped():
    settings = GradingSettings(enable_target_match=False, enable_argument_similarity=False)
    grade = grade_step(
        Call("edit_file", {"path": "elsewhere.py"}), Call("str_replace_editor", {"path": "x.py"}), settings
    )
    assert (grade.reward, grade.target_match, grade.similarity_score) == (1.0, None, None)
