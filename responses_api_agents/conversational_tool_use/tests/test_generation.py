"""The three generation stages over HTTP, every server a real process: two openai_model servers in front of
the scripted upstream (the generator and the judge) and each stage's agent as its shipped config sets it
up, pointed at them (smaller counts where the shipped ones would need many scripted answers)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from nemo_gym.http.client import get_response_json, request
from nemo_gym.testing import instance_config, read_jsonl, run_instance
from resources_servers.conversational_tool_use_simulation.simulation import ConversationTask
from responses_api_agents.conversational_tool_use.policy_tool_generation import (
    PolicyToolGenerationAgentConfig,
)
from tests.helpers import RoleStack, run_role_models
from tests.upstream_script import ScriptedUpstream

FOLDER = Path(__file__).resolve().parents[1]
IMPLEMENTATION = "conversational_tool_use"
DEADLINE_S = 3.0
GOOD_TOOL = {"name": "lookup_member", "doc": "Find a member.", "params": {"type": "object", "properties": {"member_id": {"type": "string"}}}, "returns": {"type": "object"}}  # fmt: skip
BAD_TOOL = {"name": "extend", "doc": "Extend a rental.", "params": {"type": "objekt"}}


def shipped(stage: str, **changes: Any) -> dict:
    config = yaml.safe_load((FOLDER / "configs" / f"conversational_tool_use_{stage}.yaml").read_text())
    inner = copy.deepcopy(config[f"conversational_tool_use_{stage}"]["responses_api_agents"][IMPLEMENTATION])
    del inner["datasets"]
    return instance_config("responses_api_agents", IMPLEMENTATION, **{**inner, **changes})


def example(stage: str) -> dict:
    return read_jsonl(FOLDER / "data" / f"{stage}_example.jsonl")[0]


@pytest.fixture(scope="module")
def stack(
    scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RoleStack]:
    workdir = tmp_path_factory.mktemp("conversational_generation")
    generator = {"type": "responses_api_models", "name": "generator_model"}
    judge = {"type": "responses_api_models", "name": "judge_model"}
    with ExitStack() as servers:
        roles = ["generator", "judge"]
        config, models = run_role_models(
            servers, scripted_upstream, roles, workdir, max_retries=1, timeout_s=DEADLINE_S + 0.5
        )
        config["domains"] = shipped(
            "domain_generation", model_server=generator, rollout_deadline_s=DEADLINE_S
        )
        config["policies"] = shipped("policy_tool_generation", policy_model_server=generator, judge_model_server=judge,
                                     max_retries=1, cohesion_judge_count=2)  # fmt: skip
        config["scenarios"] = shipped("scenario_generation", model_server=generator, request_count=3, max_concurrency=2,
                                      scenarios_per_request=2, random_seed=7)  # fmt: skip
        urls = {name: servers.enter_context(run_instance(config, name, workdir)).url for name in ("domains", "policies", "scenarios")}  # fmt: skip
        yield RoleStack(scripted_upstream, models, urls=urls)


# ---- domain generation -------------------------------------------------------------------------------------


async def test_domains_then_a_followup_that_names_them_and_a_mended_answer(stack):
    stack.script("generator", '[{"name": "Bike rental", "applications": ["extend"]}, {"name": "Pharmacy"}]',
                 "```json\n[{'name': 'Dentist',}, {'name': 'bike rental'}]\n```")  # fmt: skip
    status, result = await stack.run("domains", example("domain_generation"))
    assert status == 200, result
    assert [c["name"] for c in result["result"]["candidates"]] == [
        "Bike rental",
        "Pharmacy",
        "Dentist",
        "bike rental",
    ]
    assert [row["domain"]["name"] for row in result["result"]["rows"]] == [
        "Bike rental",
        "Pharmacy",
        "Dentist",
    ]
    phases = result["generation_trace"]["phases"]
    assert [(p["phase"], p["repaired"], p["parse_error"]) for p in phases] == [
        ("initial", False, None),
        ("followup", True, None),
    ]
    followup_prompt = stack.requests("generator")[1]["input"][0]["content"]
    assert "['Bike rental', 'Pharmacy']" in followup_prompt, "the follow-up names the domains so far"
    assert (
        result["generation_trace"]["protocol_version"] == "domain-generation/v1" and result["reward"] == 1.0
    )
    assert result["response"]["output"][0]["content"][0]["text"].startswith("```json"), "the last answer"


async def test_an_answer_that_is_not_json_is_a_marked_failure_not_an_empty_success(stack):
    stack.script("generator", "Sorry, I would rather not.", "Here you go: none.")
    status, result = await stack.run("domains", example("domain_generation"))
    assert status == 200, result
    assert result["reward"] == 0.0 and "no phase answered a JSON array" in result["generation_failure"]
    assert all(phase["parse_error"] for phase in result["generation_trace"]["phases"])


async def test_a_hanging_generator_fails_the_rollout_at_its_deadline(stack):
    stack.script("generator", {"hang": True})
    status, result = await stack.run("domains", example("domain_generation"))
    assert status == 504 and result["error"]["type"] == "timeout", result


async def test_a_row_without_one_instruction_message_is_a_422(stack):
    row = {
        "responses_create_params": {
            "input": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
        }
    }
    status, result = await stack.run("domains", row)
    assert status == 422 and "exactly one user message" in result["error"]["message"], result


# ---- policy and tool generation ------------------------------------------------------------------------------


def tools_answer(*tools: dict) -> str:
    return "<tools>\n" + "\n".join(json.dumps(tool) for tool in tools) + "\n</tools>"


async def test_an_attempt_with_invalid_tools_is_retried_and_the_next_accepted(stack):
    policy = "<policy>\n# PedalGo\n- Verify the member first.\n</policy>"
    stack.script("generator", policy, tools_answer(GOOD_TOOL), policy, tools_answer(GOOD_TOOL, BAD_TOOL),
                 policy, tools_answer(GOOD_TOOL), policy, tools_answer(GOOD_TOOL))  # fmt: skip
    stack.script("judge", "Fits. <judgment>true</judgment>", "Gaps. <judgment>false</judgment>")
    status, result = await stack.run("policies", example("policy_tool_generation"))
    assert status == 200, result
    first, second = result["generation_trace"]["attempts"]
    assert (first["failure_stage"], first["tool_validation_passed"]) == ("tool_validation", False)
    assert "params is not a valid JSON Schema" in first["failure_detail"]
    assert [call["phase"] for call in first["calls"]] == [
        "policy_v1",
        "tools_v1",
        "policy_refine",
        "tools_refine",
    ]
    assert (second["accepted"], second["cohesion_failure_fraction"]) == (True, 0.5), (
        "0.5 is not above the cap"
    )
    accepted = result["result"]
    assert (accepted["attempt_count"], accepted["tools"], result["reward"]) == (2, [GOOD_TOOL], 1.0)
    assert accepted["policy_md"] == "# PedalGo\n- Verify the member first."
    assert accepted["tools_jsonl"] == json.dumps(GOOD_TOOL) + "\n"
    (row,) = accepted["rows"]
    assert row["domain_name"] == "City_bike_rental_members", "NeMo Gym's domain name rendering"
    assert "City bike rental (members)" in stack.requests("generator")[0]["input"][0]["content"]


async def test_no_accepted_attempt_is_a_marked_failure_naming_the_stage(stack):
    stack.script("generator", "I will not write a policy.", "Still no.")
    stack.script("judge")
    status, result = await stack.run("policies", example("policy_tool_generation"))
    assert status == 200, result
    assert result["reward"] == 0.0 and result["result"]["accepted"] is False
    assert (
        "no attempt of 2 was accepted" in result["generation_failure"]
        and "policy_v1" in result["generation_failure"]
    )
    assert stack.requests("judge") == []


def test_the_golden_references_are_refused_in_one_line():
    with pytest.raises(ValidationError, match="golden_reference_count: the golden policy/tool references"):
        PolicyToolGenerationAgentConfig(
            name="p", host="127.0.0.1", port=0, entrypoint="policy_tool_generation.py", golden_reference_count=2,
            policy_model_server={"type": "responses_api_models", "name": "m"},
        )  # fmt: skip


# ---- scenario generation -------------------------------------------------------------------------------------


def scenario(n: int, **changes: Any) -> dict:
    return {"customer_persona": f"Commuter {n}", "reason_for_contact": "extend a rental", "customer_details": "M-5521",
            "unknown_info": None, "task_instructions": "Give the ID when asked.", **changes}  # fmt: skip


async def test_scenarios_are_collected_deduplicated_and_made_into_environment_rows(stack):
    stack.script("generator", json.dumps({"scenarios": [scenario(1), scenario(2)]}), "No scenarios today, sorry.",
                 "```json\n" + json.dumps({"scenarios": [scenario(1, customer_persona="COMMUTER 1"), scenario(3),
                                                          {"customer_persona": "no unknown_info key"}]}) + "\n```")  # fmt: skip
    row = example("scenario_generation")
    status, result = await stack.run("scenarios", row)
    assert status == 200, result
    personas = sorted(item["customer_persona"].casefold() for item in result["result"]["scenarios"])
    assert personas == ["commuter 1", "commuter 2", "commuter 3"], "a case-only duplicate is dropped"
    trace = result["generation_trace"]
    assert (trace["successful_call_count"], trace["failed_call_count"]) == (2, 1)
    failed = next(call for call in trace["calls"] if call["status"] == "failed")
    assert "not a JSON object" in failed["error"], "prose is a marked failure of that call"
    assert sum(call["duplicate_scenario_count"] for call in trace["calls"]) == 1
    assert sum(call["dropped_scenario_count"] for call in trace["calls"]) == 1
    assert len(stack.requests("generator")) == 3 and result["reward"] == 1.0
    for generated in result["result"]["rows"]:
        task = ConversationTask.model_validate(generated)  # what the simulation environment reads
        assert task.policy == row["policy"] and [t.name for t in task.tools] == [
            t["name"] for t in row["tools"]
        ]
        assert generated["responses_create_params"]["input"][0]["role"] == "system"


async def test_the_seeded_outside_scope_schedule_repeats_for_the_same_row(stack):
    schedules = []
    for _ in range(2):
        stack.script("generator", *(json.dumps({"scenarios": [scenario(n)]}) for n in range(3)))
        status, result = await stack.run("scenarios", example("scenario_generation"))
        assert status == 200, result
        schedules.append(
            sorted(
                (c["request_index"], c["outside_policy_scope"]) for c in result["generation_trace"]["calls"]
            )
        )
    assert schedules[0] == schedules[1]


async def test_a_scenario_row_without_a_policy_is_a_422_naming_it(stack):
    row = {key: value for key, value in example("scenario_generation").items() if key != "policy"}
    status, result = await stack.run("scenarios", row)
    assert status == 422 and "policy" in result["error"]["message"], result


async def test_v1_responses_is_one_call_of_the_writer_passed_through(stack):
    stack.script("generator", "A policy draft.")
    answer = await request(
        "POST", stack.urls["policies"] + "/v1/responses", json={"input": "Draft a policy."}
    )
    body = await get_response_json(answer)
    assert answer.status == 200 and body["output"][0]["content"][0]["text"] == "A policy draft.", body
    assert stack.requests("generator")[0]["input"] == "Draft a policy.", "the caller's request as it was"


async def test_a_generator_call_that_fails_is_a_failed_call_and_the_others_go_on(stack):
    stack.script("generator", {"status": 400}, *(json.dumps({"scenarios": [scenario(n)]}) for n in (1, 2)))
    status, result = await stack.run("scenarios", example("scenario_generation"))
    assert status == 200, result
    trace = result["generation_trace"]
    assert (trace["successful_call_count"], trace["failed_call_count"]) == (2, 1)
    failed = next(call for call in trace["calls"] if call["status"] == "failed")
    assert "the generator call failed" in failed["error"] and "400" in failed["error"]
    assert len(result["result"]["scenarios"]) == 2 and result["reward"] == 1.0
