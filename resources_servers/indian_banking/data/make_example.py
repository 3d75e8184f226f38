"""Writes data/example.jsonl: five indian_banking tasks made for this project, with the agent's system
prompt and the 34 tool schemas of `bank.py` in each row (NeMo Gym's row layout).

Run from the repository root: `python resources_servers/indian_banking/data/make_example.py`.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from resources_servers.indian_banking.bank import tool_schemas

SYSTEM_PROMPT = """<instructions>
You are the virtual assistant of an Indian retail bank, talking with a customer who is already signed in.
Look up the customer's accounts, deposits, loans, cards and mandates with the tools; never guess an id,
a balance or a rate. In one turn either call tools or write to the customer, not both.
Before any change (booking, closing, cancelling, freezing, blocking, updating, requesting), say exactly
what you will do and wait for the customer's clear yes in their next message.
Talk in plain words: no tool names, field names or internal codes. Show amounts in rupees.
If a tool answers an error, tell the customer plainly; do not retry blindly.
Hand over to a human agent only when no tool can solve the request.
Today is 2026-07-16.
</instructions>
<policy>
- A lost or misplaced card is frozen (reversible); a card is blocked for good only if stolen or misused
  and the customer agrees to a permanent block.
- Quote a deposit's closure value before closing it.
- For rules and charges, search the knowledge base and answer from what it returns.
</policy>"""

AGENT_REF = {"type": "responses_api_agents", "name": "indian_banking_agent"}


def task(task_id, customer, persona, reason, known, unknown, steps, opening, actions, communicate=()):
    return {
        "responses_create_params": {
            "input": [{"role": "system", "content": SYSTEM_PROMPT}],
            "tools": tool_schemas(),
            "parallel_tool_calls": False,
        },
        "task_id": task_id,
        "customer": customer,
        "user_scenario": {
            "persona": persona,
            "instructions": {
                "domain": "banking",
                "reason_for_call": reason,
                "known_info": known,
                "unknown_info": unknown,
                "task_instructions": steps,
            },
        },
        "evaluation_criteria": {
            "actions": [
                {"action_id": f"{task_id}_{n}", "name": name, "arguments": arguments}
                for n, (name, arguments) in enumerate(actions)
            ],
            "communicate_info": list(communicate),
            "nl_assertions": [],
            "reward_basis": ["DB", "COMMUNICATE"] if communicate else ["DB"],
        },
        "initial_state": {"initialization_data": {"agent_data": {"active_customer": customer}}},
        "opening_message": opening,
        "agent_ref": AGENT_REF,
    }


TASKS = [
    task(
        "ib_card_fraud_block", "CUST_1001",
        "You are Meera Iyer, brief and a little anxious.",
        "Two purchases you never made appeared on your credit card ending 5002; you want it blocked for good.",
        "Your credit card ends in 5002. You have not lost it; someone misused it.",
        "The card's id in the bank's systems.",
        "Confirm the permanent block when asked. Once the assistant says it is blocked, thank it and end.",
        "Hi, there are two purchases on my credit card ending 5002 that I never made. Please block it.",
        [("get_card_details", {"card_ids": ["CARD5002"]}), ("block_card", {"card_id": "CARD5002", "reason": "fraud"})],
    ),
    task(
        "ib_cancel_streaming_mandate", "CUST_1001",
        "You are Meera Iyer, polite and to the point.",
        "You stopped using the Streamvora streaming service and want its monthly autopay stopped.",
        "The autopay is for Streamvora, ₹649 a month, from your savings account.",
        "The mandate id.",
        "Say yes when the assistant asks to confirm cancelling the Streamvora autopay. Then end.",
        "Hello, please stop the monthly Streamvora autopay on my account. I don't use it anymore.",
        [("show_mandates", {}), ("cancel_mandate", {"mandate_id": "MDT6001"})],
    ),
    task(
        "ib_book_one_year_fd", "CUST_1001",
        "You are Meera Iyer, careful with money.",
        "You want to put ₹50,000 from your savings account into a one-year fixed deposit.",
        "₹50,000, 12 months, from your savings account ACC2001, interest paid at maturity, no renewal.",
        "Today's one-year rate.",
        "Ask for the rate first. Agree to book it when asked to confirm. Then end.",
        "I'd like to open a fixed deposit of 50,000 rupees for one year from my savings account ACC2001. "
        "What rate would I get? Interest at maturity is fine, and don't renew it.",
        [
            ("get_deposit_loan_rates", {"product_type": "fd", "tenure_months": 12}),
            ("create_fd", {"principal_amount": 50000, "tenure_months": 12, "source_account": "ACC2001",
                           "payout_type": "cumulative", "maturity_instruction": "no_renewal"}),
        ],
    ),
    task(
        "ib_fd_closure_quote", "CUST_1001",
        "You are Meera Iyer, thinking about closing a deposit early but not deciding today.",
        "You want to know how much your fixed deposit FD3001 would pay if you closed it today.",
        "Your fixed deposit is FD3001.",
        "The amount you would get today.",
        "Only ask for the amount; do not ask to close it. When you hear the amount, thank the assistant and end.",
        "If I closed my fixed deposit FD3001 today, how much would I get?",
        [("get_deposit_closure_quote", {"deposit_ids": ["FD3001"]})],
        communicate=["106031.83"],
    ),
    task(
        "ib_misplaced_card_freeze", "CUST_1001",
        "You are Meera Iyer, sure the card is somewhere at home.",
        "You cannot find your debit card ending 5001 and want it locked for now, not cancelled.",
        "Your debit card ends in 5001. It is misplaced, not stolen; you expect to find it.",
        "The card's id.",
        "Agree to a temporary freeze when asked. Then end.",
        "I can't find my debit card ending 5001, probably somewhere at home. Can you lock it for now?",
        [("get_card_details", {"card_ids": ["CARD5001"]}), ("toggle_card_freeze", {"card_id": "CARD5001", "state": "freeze"})],
    ),
]  # fmt: skip


def main() -> None:
    path = Path(__file__).with_name("example.jsonl")
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in TASKS))
    print(f"wrote {len(TASKS)} tasks to {path}")


if __name__ == "__main__":
    main()
