"""indian_banking: the bank's tools in-process, the environment as one real server process driven through
/reset and /step, and the whole loop (environment, gymnasium agent in user-simulator mode, policy and
customer models on the scripted upstream) for the stop marker and the max-steps cut-off."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from nemo_gym.envkit.gymnasium_server import EnvSession, replay_episode
from nemo_gym.http.client import get_response_json, request
from nemo_gym.testing import function_call_item, message_item, read_jsonl, response_with, run_resources_server
from resources_servers.indian_banking.bank import TOOLS, base_database, call_tool, tool_schemas
from resources_servers.indian_banking.grading import EvaluationCriteria, gold_database, grade, normalised
from resources_servers.indian_banking.tests.dialogues import DIALOGUES
from tests.helpers import StartedServer, instance_config, run_instance
from tests.upstream_script import ScriptedUpstream, fresh_model

FOLDER = Path(__file__).resolve().parents[1]
ROWS = {row["task_id"]: row for row in read_jsonl(FOLDER / "data" / "example.jsonl")}
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
CONFIG = yaml.safe_load((FOLDER / "configs" / "indian_banking.yaml").read_text())
ME = "CUST_1001"

# One valid call of every tool, on the base database.
VALID_CALLS: dict[str, dict[str, Any]] = {
    "search_knowledge_base": {"query": "close fixed deposit early penalty"},
    "get_account_balance": {"account_ids": ["ACC2001"]},
    "get_account_details": {"account_ids": ["ACC2001", "ACC2002"]},
    "get_transaction_history": {"account_id": "ACC2001", "type": "debit", "from_date": "2026-07-01"},
    "get_fd_details": {"deposit_ids": ["FD3001"]},
    "get_rd_details": {"deposit_ids": ["RD3002"]},
    "get_deposit_loan_rates": {"product_type": "rd"},
    "calculate_fd_maturity": {"principal_amount": 100000, "rate": 7.1, "tenure_months": 24},
    "calculate_rd_maturity": {"monthly_installment": 5000, "rate": 6.8, "tenure_months": 12},
    "create_fd": {"principal_amount": 20000, "tenure_months": 6, "source_account": "ACC2002"},
    "create_rd": {"monthly_installment": 2000, "tenure_months": 24, "source_account": "ACC2001"},
    "get_deposit_closure_quote": {"deposit_ids": ["RD3002"]},
    "close_deposit": {"deposit_id": "RD3002"},
    "update_deposit_renewal": {"deposit_id": "FD3001", "instruction": "renew_principal"},
    "get_loan_details": {"loan_ids": ["LN4001"]},
    "get_loan_foreclosure_quote": {"loan_ids": ["LN4001"]},
    "calculate_emi": {"principal": 500000, "rate": 11.25, "tenure_months": 36},
    "get_gold_rate": {"purity_karat": 22},
    "calculate_gold_loan_ltv": {"gold_grams": 20, "purity_karat": 22, "gold_rate_per_gram": 6710},
    "get_card_details": {"card_ids": ["CARD5001"]},
    "toggle_card_freeze": {"card_id": "CARD5001", "state": "freeze"},
    "block_card": {"card_id": "CARD5002", "reason": "stolen"},
    "set_card_controls": {"card_id": "CARD5001", "online": {"international": {"enabled": True, "daily_limit": 10000}}},
    "show_mandates": {"status": "active"},
    "cancel_mandate": {"mandate_id": "MDT6002"},
    "stop_cheque_payment": {"account_id": "ACC2001", "cheque_numbers": ["000117"], "reason": "lost"},
    "request_cheque_book": {"account_id": "ACC2002", "leaves": 50},
    "request_duplicate_statement": {"account_id": "ACC2001", "from_date": "2026-01-01", "to_date": "2026-06-30"},
    "update_address": {"address_type": "communication", "line1": "9 Beach Road", "city": "Chennai",
                       "state": "Tamil Nadu", "pincode": "600041"},
    "raise_request": {"description": "ATM debited but no cash", "category": "failed_transaction",
                      "related_transaction_id": "TXN9004", "account_id": "ACC2001"},
    "get_request_status": {"request_id": "SR7001"},
    "get_insurance_details": {"policy_ids": ["POL8001"]},
    "get_products_and_offers": {"type": "loan"},
    "transfer_to_human_agents": {"summary": "Wants to discuss a home loan top-up."},
}  # fmt: skip


def test_there_are_34_tools_and_the_rows_offer_exactly_them():
    assert len(TOOLS) == 34 and set(VALID_CALLS) == set(TOOLS)
    for row in ROWS.values():
        assert row["responses_create_params"]["tools"] == tool_schemas()


@pytest.mark.parametrize("name", sorted(VALID_CALLS))
def test_every_tool_answers_a_valid_call_and_only_write_tools_change_the_bank(name):
    db = base_database()
    answer = call_tool(db, ME, name, VALID_CALLS[name])
    assert "error" not in answer, answer
    assert (db != base_database()) == TOOLS[name].writes, f"{name} writes={TOOLS[name].writes}"


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("no_such_tool", {}, "unknown tool"),
        ("block_card", {"card_id": "CARD5002"}, "missing required argument(s) reason"),
        ("block_card", {"card_id": "CARD5002", "reason": "bored"}, "must be one of"),
        ("get_card_details", {"card_ids": "CARD5001"}, "must be a list of strings"),
        ("get_card_details", {"card_ids": ["CARD5001"], "pin": "1234"}, "unknown argument(s) pin"),
        ("get_card_details", {"card_ids": ["CARD5101"]}, "no card 'CARD5101' is linked"),  # another customer's
        ("create_fd", {"principal_amount": 10**9, "tenure_months": 12, "source_account": "ACC2001"}, "insufficient"),
        ("block_card", ["CARD5002"], "must be a JSON object"),
    ],
)  # fmt: skip
def test_a_malformed_or_refused_call_is_a_clear_error_and_changes_nothing(name, arguments, message):
    db = base_database()
    answer = call_tool(db, ME, name, arguments)
    assert message in answer["error"] and db == base_database()


def test_a_write_needs_verified_kyc():
    db = base_database()
    answer = call_tool(
        db,
        "CUST_1002",
        "create_fd",
        {"principal_amount": 20000, "tenure_months": 12, "source_account": "ACC2101"},
    )
    assert "KYC is expired" in answer["error"] and db == base_database()


def test_the_grade_is_the_final_state_against_the_gold_state_free_text_aside():
    criteria = EvaluationCriteria.model_validate(
        {"actions": [{"name": "raise_request", "arguments": {"description": "gold words", "account_id": "ACC2001"}}],
         "communicate_info": ["₹1,06,031.83"]})  # fmt: skip
    gold = normalised(gold_database({}, ME, criteria))
    db = base_database()
    call_tool(db, ME, "raise_request", {"description": "the policy's own words", "account_id": "ACC2001"})
    assert grade(db, gold, criteria, "You would get Rs. 106031.83 today.")["reward"] == 1.0
    assert grade(db, gold, criteria, "You would get about a lakh.")["reward"] == 0.0  # not told
    assert grade(base_database(), gold, criteria, "₹1,06,031.83")["reward"] == 0.0  # the request never raised


# ---- the environment over HTTP -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server(
        "indian_banking", tmp_path_factory.mktemp("indian_banking"), domain="agent"
    ) as server:
        yield server


def reply(*items: dict) -> dict:
    return response_with(*items)


async def play(env: StartedServer, row: dict, *turns: list[dict]) -> tuple[EnvSession, list]:
    session = EnvSession(env.url)
    await session.reset(row)
    return session, [await session.step(row, reply(*items)) for items in turns]


def policy_turns(task_id: str) -> list[list[dict]]:
    return [turn["output"] for turn in DIALOGUES[task_id] if turn["who"] == "policy"]


async def test_reset_briefs_the_customer_and_not_the_policy(env):
    row = ROWS["ib_cancel_streaming_mandate"]
    reset = await EnvSession(env.url).reset(row)
    assert row["opening_message"] in reset.observation and "Streamvora" in reset.observation
    assert reset.info == {"task_id": "ib_cancel_streaming_mandate"}


@pytest.mark.parametrize(
    "task_id",
    ["ib_card_fraud_block", "ib_cancel_streaming_mandate", "ib_book_one_year_fd", "ib_fd_closure_quote"],
)
async def test_the_right_actions_earn_1(env, task_id):
    _, steps = await play(env, ROWS[task_id], *policy_turns(task_id))
    assert sum(step.reward for step in steps) == 1.0 and steps[-1].info["db_match"] is True
    assert not any(step.terminated or step.truncated for step in steps), "the customer ends it, not the bank"


async def test_a_wrong_write_earns_0(env):
    _, steps = await play(env, ROWS["ib_misplaced_card_freeze"], *policy_turns("ib_misplaced_card_freeze"))
    assert sum(step.reward for step in steps) == 0.0 and steps[-1].info["db_match"] is False


async def test_a_missing_write_earns_0_and_an_undone_mistake_is_taken_back(env):
    turns = policy_turns("ib_cancel_streaming_mandate")
    _, steps = await play(env, ROWS["ib_cancel_streaming_mandate"], turns[0], turns[1])  # asks, never cancels
    assert sum(step.reward for step in steps) == 0.0
    row = ROWS["ib_book_one_year_fd"]
    turns = policy_turns("ib_book_one_year_fd")
    extra = [function_call_item("cancel_mandate", {"mandate_id": "MDT6002"}, call_id="x1")]
    _, steps = await play(env, row, *turns, extra, [message_item("Also cancelled your insurance autopay.")])
    assert [step.reward for step in steps] == [
        0.0,
        0.0,
        1.0,
        0.0,
        -1.0,
        0.0,
    ]  # the grade of each state, as changes


async def test_a_fact_not_told_to_the_customer_earns_0(env):
    turns = policy_turns("ib_fd_closure_quote")
    _, steps = await play(
        env, ROWS["ib_fd_closure_quote"], turns[0], [message_item("You'd get roughly a lakh.")]
    )
    assert sum(step.reward for step in steps) == 0.0 and steps[-1].info["communicated"] == [False]


async def test_a_malformed_tool_call_gets_a_clear_tool_error(env):
    row = ROWS["ib_card_fraud_block"]
    bad = {
        "type": "function_call",
        "name": "block_card",
        "arguments": "{card_id: CARD5002",
        "call_id": "bad1",
    }
    _, steps = await play(env, row, [bad, function_call_item("freeze_everything", {}, call_id="bad2")])
    outputs = steps[0].info["tool_outputs"]
    assert [output["call_id"] for output in outputs] == ["bad1", "bad2"]
    assert "not valid JSON" in orjson.loads(outputs[0]["output"])["error"]
    assert "unknown tool 'freeze_everything'" in orjson.loads(outputs[1]["output"])["error"]
    assert (steps[0].reward, steps[0].terminated, steps[0].truncated) == (0.0, False, False)


async def test_a_handoff_or_an_empty_reply_ends_the_episode_graded(env):
    row = ROWS["ib_card_fraud_block"]
    handoff = [function_call_item("transfer_to_human_agents", {"summary": "fraud"}, call_id="h1")]
    _, steps = await play(env, row, handoff)
    assert (steps[-1].terminated, steps[-1].info["ended_by"], steps[-1].reward) == (True, "transfer", 0.0)
    _, steps = await play(env, row, *policy_turns("ib_card_fraud_block")[2:], [])
    assert steps[-1].terminated and steps[-1].info["ended_by"] == "empty_reply"
    assert sum(step.reward for step in steps) == 1.0


async def test_the_turn_caps_truncate_the_episode_graded(env):
    row = ROWS["ib_card_fraud_block"]
    block = [function_call_item("block_card", {"card_id": "CARD5002", "reason": "fraud"}, call_id="b1")]
    look = [function_call_item("get_card_details", {"card_ids": ["CARD5002"]}, call_id="l1")]
    _, steps = await play(env, row, block, *[look] * 12)  # 13 tool rounds in a row; the cap is 12
    assert [step.truncated for step in steps] == [False] * 12 + [True]
    assert steps[-1].info["ended_by"] == "max_tool_rounds" and sum(step.reward for step in steps) == 1.0
    _, steps = await play(
        env, row, *[[message_item("How can I help?")]] * 9
    )  # the customer answers 8 at most
    assert steps[-1].truncated and steps[-1].info["ended_by"] == "max_user_turns" and len(steps) == 9


async def test_episodes_do_not_share_a_bank(env):
    row = ROWS["ib_card_fraud_block"]
    first, _ = await play(env, row, policy_turns("ib_card_fraud_block")[2])  # blocks the card
    _, steps = await play(env, row, [function_call_item("get_card_details", {"card_ids": ["CARD5002"]})])
    (card,) = orjson.loads(steps[0].info["tool_outputs"][0]["output"])["cards"]
    assert card["status"] == "active"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"customer": "CUST_9999"}, "customer"),
        ({"evaluation_criteria": {"actions": [{"name": "block_card", "arguments": {"card_id": "CARD0000", "reason": "lost"}}]}},
         "actions[0]"),
        ({"evaluation_criteria": None}, "evaluation_criteria"),
    ],
)  # fmt: skip
async def test_a_bad_row_is_refused_at_reset_naming_the_field(env, change, field):
    status, answer = await EnvSession(env.url).post("/reset", {**ROWS["ib_card_fraud_block"], **change})
    assert status == 422 and field in answer["error"]["message"], answer


def task_of(rollout: dict) -> dict:
    """The row a rollout played (each was recorded in a run of its own): the one the customer opened with."""
    opening = rollout["responses_create_params"]["input"][-1][
        "content"
    ]  # the prompt ends with the customer's
    (row,) = [row for row in ROWS.values() if opening == row["opening_message"]]
    return row


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: task_of(rollout)["task_id"])
async def test_recorded_rollouts_replay_to_their_rewards(env, rollout):
    row = task_of(rollout)
    _, steps = await replay_episode(env.url, row, rollout["response"])
    assert sum(step.reward for step in steps) == rollout["reward"]
    customer = [item["content"] for item in rollout["response"]["output"] if item.get("role") == "user"]
    assert (
        customer[-1].endswith("###STOP###") and len(rollout["user_model_calls"]) == len(customer) + 1
    )  # + the opening


# ---- the whole loop: environment, agent in user-simulator mode, policy and customer models -------------


@dataclass
class Loop:
    agent_url: str
    short_agent_url: str
    policy: str
    user: str
    upstream: ScriptedUpstream
    seen: dict[str, int] = field(default_factory=dict)

    def script(self, dialogue: list[dict]) -> None:
        """Replace both models' scripts; `requests` then shows only the requests made after this call."""
        for model, who in ((self.policy, "policy"), (self.user, "user")):
            self.upstream.clear(model)
            self.seen[model] = len(self.upstream.requests(model))
            self.upstream.script(
                model, [{"output": turn["output"]} for turn in dialogue if turn["who"] == who]
            )

    def requests(self, model: str) -> list[dict]:
        return [entry["body"] for entry in self.upstream.requests(model)[self.seen.get(model, 0) :]]


def model_block(upstream: ScriptedUpstream, model: str) -> dict:
    return instance_config("responses_api_models", "openai_model", openai_base_url=upstream.base_url,
                           openai_api_key="sk-test", openai_model=model)  # fmt: skip


def shipped_agent(**changes: Any) -> dict:
    inner = copy.deepcopy(CONFIG["indian_banking_agent"]["responses_api_agents"]["gymnasium_agent"])
    del inner["datasets"]
    inner["user_model_server"]["name"] = "user_model"
    return instance_config(
        "responses_api_agents", "gymnasium_agent", **{**inner, "rollout_deadline_s": 60, **changes}
    )


def bound(block: dict, port: int) -> None:
    (inner,) = next(iter(block.values())).values()
    inner["port"] = port


@pytest.fixture(scope="module")
def loop(scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loop]:
    workdir = tmp_path_factory.mktemp("indian_banking_loop")
    policy, user = fresh_model("policy"), fresh_model("customer")
    environment = CONFIG["indian_banking"]["resources_servers"]["indian_banking"]
    config = {
        "indian_banking": instance_config("resources_servers", "indian_banking", domain="agent",
                                          max_user_turns=environment["max_user_turns"],
                                          max_tool_rounds=environment["max_tool_rounds"]),
        "policy_model": model_block(scripted_upstream, policy),
        "user_model": model_block(scripted_upstream, user),
    }  # fmt: skip
    with ExitStack() as servers:
        for name in ("indian_banking", "policy_model", "user_model"):
            bound(config[name], servers.enter_context(run_instance(config, name, workdir)).port)
        config["agent"] = shipped_agent()
        config["short_agent"] = shipped_agent(max_steps=3)
        agent = servers.enter_context(run_instance(config, "agent", workdir))
        short = servers.enter_context(run_instance(config, "short_agent", workdir))
        yield Loop(agent.url, short.url, policy, user, scripted_upstream)


async def run(url: str, row: dict) -> dict:
    answer = await request("POST", url + "/run", json=row)
    body = await get_response_json(answer)
    assert answer.status == 200, body
    return body


async def test_the_customers_stop_marker_ends_the_episode_and_it_is_graded(loop):
    loop.script(DIALOGUES["ib_cancel_streaming_mandate"])
    result = await run(loop.agent_url, ROWS["ib_cancel_streaming_mandate"])
    assert (result["reward"], result["terminated"], result["truncated"]) == (1.0, True, False)
    assert result["info"]["user_stopped"] is True and result["info"]["db_match"] is True
    assert len(loop.requests(loop.policy)) == 4 and len(loop.requests(loop.user)) == 3
    first_notes = loop.requests(loop.user)[0]["input"][0]["content"]
    assert ROWS["ib_cancel_streaming_mandate"]["opening_message"] in first_notes
    policy_sees = orjson.dumps(loop.requests(loop.policy)[-1]["input"]).decode()
    assert "Streamvora autopay of" in policy_sees and "How to play it" not in policy_sees


async def test_a_customer_who_stops_before_the_job_is_done_leaves_it_at_0(loop):
    dialogue = DIALOGUES["ib_cancel_streaming_mandate"][:3] + [
        {"who": "user", "output": [message_item("Actually, leave it. ###STOP###")]}
    ]
    loop.script(dialogue)
    result = await run(loop.agent_url, ROWS["ib_cancel_streaming_mandate"])
    assert (result["reward"], result["terminated"], result["info"]["user_stopped"]) == (0.0, True, True)
    assert len(loop.requests(loop.policy)) == 2, "the policy is not called after the stop"


async def test_a_policy_that_never_finishes_is_cut_off_at_max_steps_and_graded(loop):
    block = {
        "who": "policy",
        "output": [function_call_item("block_card", {"card_id": "CARD5002", "reason": "fraud"})],
    }
    look = {"who": "policy", "output": [function_call_item("get_card_details", {"card_ids": ["CARD5002"]})]}
    opening = {"who": "user", "output": [message_item(ROWS["ib_card_fraud_block"]["opening_message"])]}
    loop.script([opening, block, *[look] * 10])
    result = await run(loop.short_agent_url, ROWS["ib_card_fraud_block"])
    assert (result["terminated"], result["truncated"], result["reward"]) == (False, True, 1.0)
    assert len(loop.requests(loop.policy)) == 3 and result["info"]["db_match"] is True
