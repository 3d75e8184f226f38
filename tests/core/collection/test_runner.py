"""RolloutRunner (nemo_gym.collection.runner) against a real deployment (example_single_tool_call +
simple_agent + openai_model → scripted upstream): every row yields a stamped result or a failure record,
never an exception."""

import pytest

from nemo_gym.collection.dispatch_budget import DispatchBudget
from nemo_gym.collection.runner import NOT_STARTED
from nemo_gym.config_types import BaseServerConfig, ConfigError
from nemo_gym.rollout_collection import RolloutRunner
from nemo_gym.server_utils import ServerClient
from tests.collection_deployment import ticket_rows
from tests.helpers import RunningDeployment

AGENT = "example_single_tool_call_simple_agent"


async def test_the_collectors_runner_yields_results_and_failure_records(deployment, scripted_upstream):
    running, model = deployment
    scripted_upstream.clear(model)
    scripted_upstream.script(model, [{"status": 400, "match": "T001"}])
    client = ServerClient.load_from_global_config(_head_config(running))
    helper = RolloutRunner(client, max_in_flight=2)
    rows = [
        {**row, "agent_ref": {"name": AGENT}, "_ng_task_index": index, "_ng_rollout_index": 0}
        for index, row in enumerate(ticket_rows(3))
    ]
    rows.append({**rows[0], "agent_ref": {"name": "no_such_agent"}, "_ng_task_index": 9})
    seen = {}
    async for row, result in helper.run_rows(iter(rows)):
        seen[row["_ng_task_index"]] = result
    assert seen[0]["reward"] == 1.0 and seen[0]["_ng_task_index"] == 0
    assert seen[1]["_ng_failure_class"] == "http_400" and seen[1]["_ng_failure_terminal"] is True
    assert "policy_model" in seen[1]["_ng_failure_message"]
    assert seen[9]["_ng_failure_class"] == "invalid_request"


def _head_config(running: RunningDeployment) -> BaseServerConfig:
    host, port = running.head_url.removeprefix("http://").rsplit(":", 1)
    return BaseServerConfig(host=host, port=int(port))


def runner_of(running: RunningDeployment) -> RolloutRunner:
    return RolloutRunner(ServerClient.load_from_global_config(_head_config(running)), max_in_flight=2)


async def test_a_result_keeps_the_rows_identity_and_a_failure_its_attempt_number(
    deployment, scripted_upstream
):
    running, model = deployment
    scripted_upstream.clear(model)
    scripted_upstream.script(model, [{"status": 400, "match": "T001"}])
    rows = [
        {**row, "agent_ref": {"name": AGENT}, "_ng_task_index": index, "_ng_rollout_index": 4,
         "_ng_attempt_index": 2, "_ng_rollout_id": f"episode-{index}"}
        for index, row in enumerate(ticket_rows(2))
    ]  # fmt: skip
    seen = {}
    async for row, result in runner_of(running).run_rows(iter(rows), attempt_of=lambda row: 3):
        seen[row["_ng_task_index"]] = result
    assert {key: seen[0][key] for key in ("_ng_rollout_index", "_ng_attempt_index", "_ng_rollout_id")} == {
        "_ng_rollout_index": 4, "_ng_attempt_index": 2, "_ng_rollout_id": "episode-0",
    }  # fmt: skip
    assert seen[0]["agent_ref"] == {"name": AGENT} and seen[0]["reward"] == 1.0
    assert (seen[1]["_ng_failure_class"], seen[1]["_ng_failure_attempt"]) == ("http_400", 3)


async def test_a_spent_dispatch_budget_starts_no_rollout(deployment, scripted_upstream):
    running, model = deployment
    scripted_upstream.clear(model)
    asked_before = len(scripted_upstream.requests(model))
    rows = [{**row, "agent_ref": {"name": AGENT}, "_ng_task_index": 0} for row in ticket_rows(3)]
    budget = DispatchBudget(budget_s=0, drain_margin_s=60)
    results = [result async for _, result in runner_of(running).run_rows(iter(rows), budget=budget)]
    assert results == [NOT_STARTED] * 3
    assert len(scripted_upstream.requests(model)) == asked_before


async def test_a_malformed_rollout_id_fails_the_row_without_a_call(deployment, scripted_upstream):
    running, model = deployment
    scripted_upstream.clear(model)
    asked_before = len(scripted_upstream.requests(model))
    row = {**ticket_rows(1)[0], "agent_ref": {"name": AGENT}, "_ng_rollout_id": "../escape"}
    result = await runner_of(running).run_one(row, attempt=2)
    assert result["_ng_failure_class"] == "invalid_request" and result["_ng_failure_attempt"] == 2
    assert "_ng_rollout_id '../escape' must match" in result["_ng_failure_message"]
    assert len(scripted_upstream.requests(model)) == asked_before


def test_check_agent_refuses_an_agent_the_deployment_does_not_run(deployment):
    running, _ = deployment
    runner = runner_of(running)
    runner.check_agent(AGENT)
    with pytest.raises(
        ConfigError, match="agent_ref 'no_such_agent': agent_ref 'no_such_agent' names no agent"
    ):
        runner.check_agent("no_such_agent")
