"""Scripted dialogues of the five example tasks: the simulated customer's and the policy's turns, in the
order the gymnasium agent asks for them (customer opening, then policy replies; the customer answers each
policy message that calls no tool). Four play the task right; the misplaced-card one blocks the card
instead of freezing it, so it earns 0. Used to record data/example_rollouts.jsonl (record_examples.py)."""

from __future__ import annotations

from typing import Any

from nemo_gym.testing import function_call_item, message_item


def user(text: str) -> dict[str, Any]:
    return {"who": "user", "output": [message_item(text, id="msg_user")]}


def says(text: str) -> dict[str, Any]:
    return {"who": "policy", "output": [message_item(text, id="msg_policy")]}


def calls(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"who": "policy", "output": [function_call_item(name, arguments, call_id=call_id)]}


DIALOGUES: dict[str, list[dict[str, Any]]] = {
    "ib_card_fraud_block": [
        user("Hi, there are two purchases on my credit card ending 5002 that I never made. Please block it."),
        calls("get_card_details", {"card_ids": ["CARD5002"]}, "call_a1"),
        says("I'm sorry about this. Your credit card ending 5002 is active. I can block it permanently so no "
             "one can use it again; this cannot be undone. Shall I go ahead?"),
        user("Yes, block it permanently."),
        calls("block_card", {"card_id": "CARD5002", "reason": "fraud"}, "call_a2"),
        says("Done: your credit card ending 5002 is now permanently blocked. You can ask for a replacement "
             "card whenever you like."),
        user("Thank you. ###STOP###"),
    ],
    "ib_cancel_streaming_mandate": [
        user("Hello, please stop the monthly Streamvora autopay on my account. I don't use it anymore."),
        calls("show_mandates", {}, "call_b1"),
        says("I found the Streamvora autopay of ₹649 a month from your savings account. Shall I cancel it? "
             "No further debits would be made under it."),
        user("Yes, please cancel it."),
        calls("cancel_mandate", {"mandate_id": "MDT6001"}, "call_b2"),
        says("The Streamvora autopay is cancelled; no more monthly debits will be taken for it."),
        user("Great, thanks. ###STOP###"),
    ],
    "ib_book_one_year_fd": [
        user("I'd like to open a fixed deposit of 50,000 rupees for one year from my savings account ACC2001. "
             "What rate would I get? Interest at maturity is fine, and don't renew it."),
        calls("get_deposit_loan_rates", {"product_type": "fd", "tenure_months": 12}, "call_c1"),
        says("A one-year fixed deposit earns 6.9% a year today. Shall I book ₹50,000 for 12 months from your "
             "savings account, interest paid at maturity, with no renewal?"),
        user("Yes, go ahead."),
        calls("create_fd", {"principal_amount": 50000, "tenure_months": 12, "source_account": "ACC2001",
                            "payout_type": "cumulative", "maturity_instruction": "no_renewal"}, "call_c2"),
        says("Your fixed deposit of ₹50,000 at 6.9% is booked and matures on 2027-07-16."),
        user("Perfect, thank you. ###STOP###"),
    ],
    "ib_fd_closure_quote": [
        user("If I closed my fixed deposit FD3001 today, how much would I get?"),
        calls("get_deposit_closure_quote", {"deposit_ids": ["FD3001"]}, "call_d1"),
        says("If you closed it today you would receive ₹1,06,031.83: an early closure earns 5.9% for the year "
             "it has run, after the 1% penalty. Nothing has been changed."),
        user("Thanks, that's all I needed. ###STOP###"),
    ],
    "ib_misplaced_card_freeze": [
        user("I can't find my debit card ending 5001, probably somewhere at home. Can you lock it for now?"),
        calls("get_card_details", {"card_ids": ["CARD5001"]}, "call_e1"),
        says("Your debit card ending 5001 is active. Shall I block it so it cannot be used?"),
        user("Yes, lock it please."),
        calls("block_card", {"card_id": "CARD5001", "reason": "lost"}, "call_e2"),
        says("Your debit card ending 5001 is now blocked."),
        user("Okay, thanks. ###STOP###"),
    ],
}  # fmt: skip
