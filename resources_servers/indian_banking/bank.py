"""The synthetic bank of indian_banking: a small base database and the 34 tools that read and write a copy.

Every episode works on its own deep copy of `bank_data.base_database()` (plus the row's `initial_state` patch), so
rollouts never see each other. Tools are plain functions `(db, customer, **arguments) -> dict`; they touch
only the logged-in customer's records and answer an `{"error": ...}` dict instead of raising, so a bad call
is something the model reads and can fix. Ids of new records come from counters kept in the database, so
the same writes in the same order give the same ids (the grader relies on it). Amounts are INR; "today" is
fixed (`TODAY`) so quotes and maturities are reproducible.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any

from resources_servers.indian_banking.bank_data import (
    GOLD_LTV,
    GOLD_RATE_PER_GRAM,
    KNOWLEDGE_BASE,
    PREMATURE_PENALTY,
    PRODUCTS,
    RATE_CARDS,
    TODAY,
    Db,
    base_database,
)

__all__ = ["TOOLS", "Db", "Tool", "base_database", "call_tool", "tool_schemas"]


# ---- helpers -------------------------------------------------------------------------------------------


class ToolError(Exception):
    """A refused call; its message is what the model reads."""


def _parse_date(text: str, field: str) -> date:
    try:
        return date.fromisoformat(text)
    except (TypeError, ValueError):
        raise ToolError(f"{field} must be a date as YYYY-MM-DD, got {text!r}") from None


def _add_months(start: date, months: int) -> date:
    year, month = divmod(start.month - 1 + months, 12)
    day = min(start.day, 28)
    return date(start.year + year, month + 1, day)


def _months_between(start: date, end: date) -> int:
    return max(0, (end.year - start.year) * 12 + end.month - start.month - (1 if end.day < start.day else 0))


def _owned(db: Db, table: str, record_id: str, customer: str, label: str) -> dict[str, Any]:
    record = db[table].get(record_id)
    if record is None or _owner(db, table, record) != customer:
        raise ToolError(f"no {label} {record_id!r} is linked to this customer")
    return record


def _owner(db: Db, table: str, record: dict[str, Any]) -> str | None:
    if table == "cheques":
        return db["accounts"].get(record["account"], {}).get("customer")
    return record.get("customer")


def _public(record: dict[str, Any], record_id: str, id_field: str) -> dict[str, Any]:
    return {id_field: record_id, **{key: value for key, value in record.items() if key != "customer"}}


def _kyc_ok(db: Db, customer: str) -> None:
    status = db["customers"][customer]["kyc_status"]
    if status != "verified":
        raise ToolError(
            f"KYC is {status} for this customer: this change is paused until KYC is renewed at a branch or by video KYC"
        )


def _next_id(db: Db, counter: str, prefix: str) -> str:
    db["counters"][counter] += 1
    return f"{prefix}{db['counters'][counter]}"


def _rate(product: str, tenure_months: int) -> float:
    for longest, rate in RATE_CARDS[product]:
        if tenure_months <= longest:
            return rate
    raise ToolError(f"no {product} rate for a tenure of {tenure_months} months")


def _fd_value(principal: float, rate: float, months: int) -> float:
    return round(principal * (1 + rate / 400) ** (months / 3), 2)


def _rd_value(installment: float, rate: float, months: int) -> float:
    return round(sum(installment * (1 + rate / 400) ** ((months - paid) / 3) for paid in range(months)), 2)


def _deposit_value_today(deposit: dict[str, Any]) -> dict[str, Any]:
    start = date.fromisoformat(deposit["start"])
    maturity = _add_months(start, deposit["tenure_months"])
    run = min(_months_between(start, TODAY), deposit["tenure_months"])
    premature = TODAY < maturity
    rate = max(0.0, _rate(deposit["kind"], max(run, 1)) - PREMATURE_PENALTY) if premature else deposit["rate"]
    if deposit["kind"] == "fd":
        payout = _fd_value(deposit["principal"], rate, run)
        paid_in = deposit["principal"]
    else:
        paid = deposit["installments_paid"]
        payout = _rd_value(deposit["installment"], rate, paid) if paid else 0.0
        paid_in = deposit["installment"] * paid
    return {"premature": premature, "applied_rate": rate, "months_run": run, "paid_in": paid_in,
            "payout_amount": payout, "maturity_date": maturity.isoformat()}  # fmt: skip


# ---- tools ---------------------------------------------------------------------------------------------


def search_knowledge_base(db: Db, customer: str, query: str, bank_id: str | None = None,
                          category: str | None = None, top_k: int = 3) -> dict[str, Any]:  # fmt: skip
    words = set(re.findall(r"[a-z0-9]+", query.lower()))
    if not words:
        raise ToolError("query has no words to search for")
    hits = []
    for article in KNOWLEDGE_BASE:
        if category and article["category"].lower() != category.lower():
            continue
        text_words = set(re.findall(r"[a-z0-9]+", (article["title"] + " " + article["text"]).lower()))
        score = round(len(words & text_words) / len(words), 3)
        if score > 0:
            hits.append({**article, "score": score, "source_url": f"kb://{article['id']}"})
    hits.sort(key=lambda hit: (-hit["score"], hit["id"]))
    return {"results": hits[: max(1, min(top_k, 10))]}


def get_account_balance(db: Db, customer: str, account_ids: list[str]) -> dict[str, Any]:
    accounts = [(i, _owned(db, "accounts", i, customer, "account")) for i in account_ids]
    return {"accounts": [{"account_id": i, "available_balance": a["balance"] - a["hold"], "hold_amount": a["hold"]}
                         for i, a in accounts]}  # fmt: skip


def get_account_details(db: Db, customer: str, account_ids: list[str]) -> dict[str, Any]:
    details = []
    for account_id in account_ids:
        account = _owned(db, "accounts", account_id, customer, "account")
        hidden = ("balance", "hold", "transactions", "customer")
        details.append({"account_id": account_id, "bank": "Synthetic National Bank",
                        **{key: value for key, value in account.items() if key not in hidden}})  # fmt: skip
    return {"accounts": details}


def get_transaction_history(db: Db, customer: str, account_id: str, from_date: str | None = None,
                            to_date: str | None = None, type: str = "all", channel: str = "all",
                            limit: int = 20, offset: int = 0) -> dict[str, Any]:  # fmt: skip
    account = _owned(db, "accounts", account_id, customer, "account")
    start = _parse_date(from_date, "from_date") if from_date else date.min
    end = _parse_date(to_date, "to_date") if to_date else date.max
    rows = [row for row in account["transactions"] if start <= date.fromisoformat(row["date"]) <= end
            and type in ("all", row["type"]) and channel in ("all", row["channel"])]  # fmt: skip
    rows.sort(key=lambda row: row["date"], reverse=True)
    return {
        "account_id": account_id,
        "total": len(rows),
        "transactions": rows[offset : offset + max(limit, 0)],
    }


def _deposit_details(db: Db, customer: str, deposit_ids: list[str], kind: str) -> dict[str, Any]:
    label = "fixed deposit" if kind == "fd" else "recurring deposit"
    found = []
    for deposit_id in deposit_ids:
        deposit = _owned(db, "deposits", deposit_id, customer, label)
        if deposit["kind"] != kind:
            raise ToolError(f"{deposit_id} is not a {label}")
        maturity = _add_months(date.fromisoformat(deposit["start"]), deposit["tenure_months"])
        extra = {"maturity_date": maturity.isoformat()}
        if kind == "rd":
            extra["accumulated"] = deposit["installment"] * deposit["installments_paid"]
        found.append({**_public(deposit, deposit_id, "deposit_id"), **extra})
    return {"deposits": found}


def get_fd_details(db: Db, customer: str, deposit_ids: list[str]) -> dict[str, Any]:
    return _deposit_details(db, customer, deposit_ids, "fd")


def get_rd_details(db: Db, customer: str, deposit_ids: list[str]) -> dict[str, Any]:
    return _deposit_details(db, customer, deposit_ids, "rd")


def get_deposit_loan_rates(db: Db, customer: str, product_type: str, tenure_months: int | None = None,
                           amount: float | None = None) -> dict[str, Any]:  # fmt: skip
    if tenure_months is not None:
        return {
            "product_type": product_type,
            "tenure_months": tenure_months,
            "rate": _rate(product_type, tenure_months),
        }
    return {"product_type": product_type,
            "slabs": [{"up_to_months": longest, "rate": rate} for longest, rate in RATE_CARDS[product_type]]}  # fmt: skip


def _positive(value: float, field: str) -> None:
    if value <= 0:
        raise ToolError(f"{field} must be positive, got {value}")


def calculate_fd_maturity(db: Db, customer: str, principal_amount: float, rate: float, tenure_months: int,
                          payout_type: str = "cumulative") -> dict[str, Any]:  # fmt: skip
    _positive(principal_amount, "principal_amount")
    _positive(tenure_months, "tenure_months")
    if payout_type == "cumulative":
        maturity = _fd_value(principal_amount, rate, tenure_months)
        return {"maturity_value": maturity, "interest_earned": round(maturity - principal_amount, 2)}
    periods = 12 if payout_type == "monthly" else 4
    payout = round(principal_amount * rate / 100 / periods, 2)
    count = tenure_months if payout_type == "monthly" else tenure_months // 3
    return {"periodic_payout": payout, "payouts": count, "interest_earned": round(payout * count, 2),
            "maturity_value": principal_amount}  # fmt: skip


def calculate_rd_maturity(db: Db, customer: str, monthly_installment: float, rate: float,
                          tenure_months: int) -> dict[str, Any]:  # fmt: skip
    _positive(monthly_installment, "monthly_installment")
    _positive(tenure_months, "tenure_months")
    maturity = _rd_value(monthly_installment, rate, tenure_months)
    return {
        "maturity_value": maturity,
        "interest_earned": round(maturity - monthly_installment * tenure_months, 2),
    }


def _debit(db: Db, customer: str, account_id: str, amount: float, narration: str) -> None:
    account = _owned(db, "accounts", account_id, customer, "account")
    if account["balance"] - account["hold"] < amount:
        raise ToolError(f"insufficient available balance in {account_id} for ₹{amount:,.2f}")
    account["balance"] = round(account["balance"] - amount, 2)
    db["counters"]["order"] += 1
    account["transactions"].append({"id": f"TXN{db['counters']['order']}", "date": TODAY.isoformat(),
                                    "type": "debit", "channel": "internal", "amount": amount, "narration": narration})  # fmt: skip


def _credit(db: Db, account_id: str, amount: float, narration: str) -> None:
    account = db["accounts"][account_id]
    account["balance"] = round(account["balance"] + amount, 2)
    db["counters"]["order"] += 1
    account["transactions"].append({"id": f"TXN{db['counters']['order']}", "date": TODAY.isoformat(),
                                    "type": "credit", "channel": "internal", "amount": amount, "narration": narration})  # fmt: skip


def create_fd(db: Db, customer: str, principal_amount: float, tenure_months: int, source_account: str,
              payout_type: str = "cumulative", maturity_instruction: str = "no_renewal",
              nominee: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    _kyc_ok(db, customer)
    if principal_amount < 10000:
        raise ToolError("the minimum fixed deposit is ₹10,000")
    rate = _rate("fd", tenure_months)
    _debit(db, customer, source_account, principal_amount, "Fixed deposit booking")
    deposit_id = _next_id(db, "deposit", "FD")
    db["deposits"][deposit_id] = {"customer": customer, "kind": "fd", "principal": principal_amount, "rate": rate,
                                  "tenure_months": tenure_months, "start": TODAY.isoformat(), "status": "active",
                                  "payout_type": payout_type, "maturity_instruction": maturity_instruction,
                                  "source_account": source_account, "nominee": nominee}  # fmt: skip
    return {"status": "booked", "deposit_id": deposit_id, "rate": rate,
            "maturity_date": _add_months(TODAY, tenure_months).isoformat()}  # fmt: skip


def create_rd(db: Db, customer: str, monthly_installment: float, tenure_months: int, source_account: str,
              maturity_instruction: str = "no_renewal", nominee: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    _kyc_ok(db, customer)
    if monthly_installment < 500:
        raise ToolError("the minimum recurring deposit installment is ₹500")
    rate = _rate("rd", tenure_months)
    _debit(db, customer, source_account, monthly_installment, "Recurring deposit installment 1")
    deposit_id = _next_id(db, "deposit", "RD")
    db["deposits"][deposit_id] = {"customer": customer, "kind": "rd", "installment": monthly_installment,
                                  "rate": rate, "tenure_months": tenure_months, "start": TODAY.isoformat(),
                                  "status": "active", "installments_paid": 1,
                                  "maturity_instruction": maturity_instruction, "source_account": source_account,
                                  "nominee": nominee}  # fmt: skip
    return {
        "status": "booked",
        "deposit_id": deposit_id,
        "rate": rate,
        "first_installment_debited": monthly_installment,
    }


def get_deposit_closure_quote(db: Db, customer: str, deposit_ids: list[str]) -> dict[str, Any]:
    quotes = []
    for deposit_id in deposit_ids:
        deposit = _owned(db, "deposits", deposit_id, customer, "deposit")
        if deposit["status"] != "active":
            raise ToolError(f"deposit {deposit_id} is {deposit['status']}")
        quotes.append({"deposit_id": deposit_id, **_deposit_value_today(deposit)})
    return {"as_of": TODAY.isoformat(), "quotes": quotes}


def close_deposit(
    db: Db, customer: str, deposit_id: str, payout_account: str | None = None
) -> dict[str, Any]:
    deposit = _owned(db, "deposits", deposit_id, customer, "deposit")
    if deposit["status"] != "active":
        raise ToolError(f"deposit {deposit_id} is already {deposit['status']}")
    target = payout_account or deposit["source_account"]
    _owned(db, "accounts", target, customer, "account")
    quote = _deposit_value_today(deposit)
    deposit["status"] = "closed"
    _credit(db, target, quote["payout_amount"], f"Closure of {deposit_id}")
    return {"status": "closed", "deposit_id": deposit_id, "credited_to": target, **quote}


def update_deposit_renewal(db: Db, customer: str, deposit_id: str, instruction: str) -> dict[str, Any]:
    deposit = _owned(db, "deposits", deposit_id, customer, "deposit")
    if deposit["status"] != "active":
        raise ToolError(f"deposit {deposit_id} is {deposit['status']}")
    deposit["maturity_instruction"] = instruction
    return {"status": "updated", "deposit_id": deposit_id, "maturity_instruction": instruction,
            "effective_on": _add_months(date.fromisoformat(deposit["start"]), deposit["tenure_months"]).isoformat()}  # fmt: skip


def get_loan_details(db: Db, customer: str, loan_ids: list[str]) -> dict[str, Any]:
    return {"loans": [_public(_owned(db, "loans", i, customer, "loan"), i, "loan_id") for i in loan_ids]}


def get_loan_foreclosure_quote(db: Db, customer: str, loan_ids: list[str], as_of_date: str | None = None) -> dict[str, Any]:  # fmt: skip
    when = _parse_date(as_of_date, "as_of_date") if as_of_date else TODAY
    quotes = []
    for loan_id in loan_ids:
        loan = _owned(db, "loans", loan_id, customer, "loan")
        days = max(0, (when - TODAY).days) + 11  # interest accrued since the last EMI on 2026-07-05
        interest = round(loan["outstanding"] * loan["rate"] / 100 * days / 365, 2)
        quotes.append({"loan_id": loan_id, "as_of": when.isoformat(), "principal_outstanding": loan["outstanding"],
                       "accrued_interest": interest, "foreclosure_charge": 0.0,
                       "total_payoff": round(loan["outstanding"] + interest, 2)})  # fmt: skip
    return {"quotes": quotes, "note": "informational only; EMIs cannot be paused or reduced here"}


def calculate_emi(db: Db, customer: str, principal: float, rate: float, tenure_months: int) -> dict[str, Any]:
    _positive(principal, "principal")
    _positive(tenure_months, "tenure_months")
    monthly = rate / 1200
    emi = (
        principal / tenure_months
        if monthly == 0
        else principal * monthly / (1 - (1 + monthly) ** -tenure_months)
    )
    emi = round(emi, 2)
    schedule, balance = [], principal
    for month in range(1, tenure_months + 1):
        interest = round(balance * monthly, 2)
        balance = max(0.0, round(balance - (emi - interest), 2))
        if month <= 12:
            schedule.append(
                {
                    "month": month,
                    "interest": interest,
                    "principal": round(emi - interest, 2),
                    "balance": balance,
                }
            )
    total = round(emi * tenure_months, 2)
    return {"emi": emi, "total_interest": round(total - principal, 2), "total_repayment": total,
            "schedule_first_12_months": schedule}  # fmt: skip


def get_gold_rate(db: Db, customer: str, purity_karat: int) -> dict[str, Any]:
    return {
        "purity_karat": purity_karat,
        "rate_per_gram": GOLD_RATE_PER_GRAM[purity_karat],
        "as_of": TODAY.isoformat(),
    }


def calculate_gold_loan_ltv(db: Db, customer: str, gold_grams: float, purity_karat: int,
                            gold_rate_per_gram: float) -> dict[str, Any]:  # fmt: skip
    _positive(gold_grams, "gold_grams")
    value = round(gold_grams * gold_rate_per_gram, 2)
    return {"collateral_value": value, "ltv_cap": GOLD_LTV, "max_eligible_loan": math.floor(value * GOLD_LTV)}


def get_card_details(db: Db, customer: str, card_ids: list[str]) -> dict[str, Any]:
    return {"cards": [_public(_owned(db, "cards", i, customer, "card"), i, "card_id") for i in card_ids]}


def toggle_card_freeze(db: Db, customer: str, card_id: str, state: str) -> dict[str, Any]:
    card = _owned(db, "cards", card_id, customer, "card")
    if card["status"] in ("blocked", "expired"):
        raise ToolError(f"card {card_id} is {card['status']} and cannot be frozen or unfrozen")
    card["status"] = "frozen" if state == "freeze" else "active"
    return {"card_id": card_id, "status": card["status"]}


def block_card(db: Db, customer: str, card_id: str, reason: str) -> dict[str, Any]:
    card = _owned(db, "cards", card_id, customer, "card")
    if card["status"] == "blocked":
        raise ToolError(f"card {card_id} is already permanently blocked")
    card["status"] = "blocked"
    card["block_reason"] = reason
    return {
        "card_id": card_id,
        "status": "blocked",
        "reason": reason,
        "next_step": "a replacement can be requested",
    }


def set_card_controls(db: Db, customer: str, card_id: str, atm: dict | None = None, online: dict | None = None,
                      pos: dict | None = None) -> dict[str, Any]:  # fmt: skip
    card = _owned(db, "cards", card_id, customer, "card")
    if card["status"] != "active":
        raise ToolError(f"card {card_id} is {card['status']}; controls can be changed on an active card only")
    changes = {"atm": atm, "online": online, "pos": pos}
    if all(value is None for value in changes.values()):
        raise ToolError("give at least one of atm, online, pos")
    for channel, change in changes.items():
        for scope, setting in (change or {}).items():
            if scope not in ("domestic", "international") or not isinstance(setting, dict):
                raise ToolError(
                    f"{channel}.{scope}: use {{'domestic'|'international': {{'enabled', 'daily_limit'}}}}"
                )
            current = card["controls"][channel][scope]
            if "enabled" in setting:
                current["enabled"] = bool(setting["enabled"])
            if "daily_limit" in setting and current["enabled"]:
                limit = setting["daily_limit"]
                if not isinstance(limit, int | float) or limit < 0:
                    raise ToolError(f"{channel}.{scope}.daily_limit must be a non-negative number")
                current["daily_limit"] = limit
    return {"card_id": card_id, "controls": card["controls"]}


def show_mandates(
    db: Db, customer: str, account_id: str | None = None, status: str = "all"
) -> dict[str, Any]:
    if account_id is not None:
        _owned(db, "accounts", account_id, customer, "account")
    found = [_public(m, i, "mandate_id") for i, m in db["mandates"].items() if m["customer"] == customer
             and account_id in (None, m["account"]) and status in ("all", m["status"])]  # fmt: skip
    return {"mandates": found}


def cancel_mandate(db: Db, customer: str, mandate_id: str) -> dict[str, Any]:
    mandate = _owned(db, "mandates", mandate_id, customer, "mandate")
    if mandate["status"] == "cancelled":
        raise ToolError(f"mandate {mandate_id} is already cancelled")
    mandate["status"] = "cancelled"
    return {"mandate_id": mandate_id, "status": "cancelled", "payee": mandate["payee"]}


def stop_cheque_payment(db: Db, customer: str, account_id: str, cheque_numbers: list[str],
                        reason: str = "other") -> dict[str, Any]:  # fmt: skip
    _owned(db, "accounts", account_id, customer, "account")
    results = []
    for number in cheque_numbers:
        cheque = db["cheques"].get(f"{account_id}/{number}")
        if cheque is None:
            results.append({"cheque_number": number, "result": "not found for this account"})
        elif cheque["status"] != "issued":
            results.append({"cheque_number": number, "result": f"not stopped: already {cheque['status']}"})
        else:
            cheque["status"], cheque["stop_reason"] = "stopped", reason
            results.append({"cheque_number": number, "result": "stopped"})
    return {"account_id": account_id, "results": results}


def _log_service(db: Db, kind: str, customer: str, details: dict[str, Any]) -> str:
    reference = _next_id(db, "request", "SR")
    db["requests"][reference] = {"customer": customer, "category": kind, "status": "registered",
                                 "opened": TODAY.isoformat(), **details}  # fmt: skip
    return reference


def request_cheque_book(db: Db, customer: str, account_id: str, leaves: int = 25,
                        delivery_address: str | None = None) -> dict[str, Any]:  # fmt: skip
    account = _owned(db, "accounts", account_id, customer, "account")
    if leaves not in (25, 50, 100):
        raise ToolError("leaves must be 25, 50 or 100")
    if account["type"] not in ("savings", "current"):
        raise ToolError("cheque books are issued for savings and current accounts only")
    reference = _log_service(db, "cheque_book", customer, {"account_id": account_id, "leaves": leaves})
    return {"request_id": reference, "status": "registered", "delivery": "5-7 working days"}


def request_duplicate_statement(db: Db, customer: str, account_id: str, from_date: str, to_date: str,
                                delivery_mode: str = "email") -> dict[str, Any]:  # fmt: skip
    _owned(db, "accounts", account_id, customer, "account")
    if _parse_date(from_date, "from_date") > _parse_date(to_date, "to_date"):
        raise ToolError("from_date is after to_date")
    reference = _log_service(db, "duplicate_statement", customer,
                             {"account_id": account_id, "from_date": from_date, "to_date": to_date,
                              "delivery_mode": delivery_mode})  # fmt: skip
    return {"request_id": reference, "status": "registered", "delivery_mode": delivery_mode}


def update_address(db: Db, customer: str, address_type: str, line1: str, city: str, state: str, pincode: str,
                   line2: str | None = None) -> dict[str, Any]:  # fmt: skip
    _kyc_ok(db, customer)
    if not re.fullmatch(r"[1-9][0-9]{5}", pincode):
        raise ToolError(f"pincode must be 6 digits, got {pincode!r}")
    address = {"line1": line1, "line2": line2, "city": city, "state": state, "pincode": pincode}
    reference = _log_service(
        db, "address_update", customer, {"address_type": address_type, "new_address": address}
    )
    return {"request_id": reference, "status": "pending_verification",
            "note": "the address changes only after the bank verifies it"}  # fmt: skip


def raise_request(db: Db, customer: str, description: str, category: str = "general_query",
                  related_transaction_id: str | None = None, account_id: str | None = None) -> dict[str, Any]:  # fmt: skip
    if not description.strip():
        raise ToolError("description is empty")
    if account_id is not None:
        _owned(db, "accounts", account_id, customer, "account")
    reference = _log_service(db, category, customer, {"description": description, "account_id": account_id,
                                                      "related_transaction_id": related_transaction_id})  # fmt: skip
    return {"request_id": reference, "status": "registered", "resolution_within_days": 30}


def get_request_status(db: Db, customer: str, request_id: str) -> dict[str, Any]:
    request = _owned(db, "requests", request_id, customer, "service request")
    return {"request_id": request_id, "category": request["category"], "status": request["status"],
            "opened": request["opened"]}  # fmt: skip


def get_insurance_details(db: Db, customer: str, policy_ids: list[str]) -> dict[str, Any]:
    return {
        "policies": [
            _public(_owned(db, "insurance", i, customer, "policy"), i, "policy_id") for i in policy_ids
        ]
    }


def get_products_and_offers(db: Db, customer: str, type: str = "all") -> dict[str, Any]:
    products = [p for p in PRODUCTS if type in ("all", p["type"])]
    offers = [o for o in db["offers"].get(customer, []) if type in ("all", "offer", o["type"])]
    return {"products": products if type != "offer" else [], "offers": offers,
            "note": "offers are indicative, not guaranteed"}  # fmt: skip


def transfer_to_human_agents(db: Db, customer: str, summary: str) -> dict[str, Any]:
    if db["transferred_to_human"]:
        raise ToolError("this conversation has already been transferred")
    db["transferred_to_human"] = True
    db["service_log"].append({"event": "transfer", "summary": summary})
    return {"status": "transferred", "message": "A human agent will take over this conversation."}


# ---- the tool table ------------------------------------------------------------------------------------

STR, INT, NUM, OBJ = {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "object"}
IDS = {"type": "array", "items": {"type": "string"}}
RENEWAL = {"type": "string", "enum": ["no_renewal", "renew_principal", "renew_principal_interest"]}
PAYOUT = {"type": "string", "enum": ["cumulative", "monthly", "quarterly"]}
KARAT = {"type": "integer", "enum": [18, 22, 24]}


def _enum(*values: str) -> dict[str, Any]:
    return {"type": "string", "enum": list(values)}


@dataclass(frozen=True)
class Tool:
    function: Callable[..., dict[str, Any]]
    description: str
    properties: dict[str, Any]
    required: tuple[str, ...]
    writes: bool = False

    def schema(self) -> dict[str, Any]:
        """The tool as a Responses API function tool."""
        return {"type": "function", "name": self.function.__name__, "description": self.description,
                "parameters": {"type": "object", "properties": self.properties, "required": list(self.required)},
                "strict": False}  # fmt: skip


_TOOLS = [
    Tool(search_knowledge_base, "Keyword search over the bank's policy articles; each hit has a relevance score.",
         {"query": STR, "bank_id": STR, "category": STR, "top_k": INT}, ("query",)),
    Tool(get_account_balance, "Available balance and amount on hold of the given accounts.", {"account_ids": IDS}, ("account_ids",)),
    Tool(get_account_details, "Type, status, branch, IFSC, holders, nominee and open date of the given accounts.",
         {"account_ids": IDS}, ("account_ids",)),
    Tool(get_transaction_history, "Transactions of one account, newest first, filtered by dates, direction and channel.",
         {"account_id": STR, "from_date": STR, "to_date": STR, "type": _enum("debit", "credit", "all"),
          "channel": _enum("upi", "neft", "imps", "rtgs", "atm", "pos", "cheque", "all"), "limit": INT, "offset": INT},
         ("account_id",)),
    Tool(get_fd_details, "Details of fixed deposits, maturity date included.", {"deposit_ids": IDS}, ("deposit_ids",)),
    Tool(get_rd_details, "Details of recurring deposits: installment, installments paid, amount accumulated.",
         {"deposit_ids": IDS}, ("deposit_ids",)),
    Tool(get_deposit_loan_rates, "Today's rate card (% p.a.) of a deposit or loan product, or the rate for one tenure.",
         {"product_type": _enum("fd", "rd", "home_loan", "personal_loan", "gold_loan"), "tenure_months": INT, "amount": NUM},
         ("product_type",)),
    Tool(calculate_fd_maturity, "Maturity value of a fixed deposit (quarterly compounding) or its periodic payouts.",
         {"principal_amount": NUM, "rate": NUM, "tenure_months": INT, "payout_type": PAYOUT},
         ("principal_amount", "rate", "tenure_months")),
    Tool(calculate_rd_maturity, "Maturity value of a recurring deposit (quarterly compounding).",
         {"monthly_installment": NUM, "rate": NUM, "tenure_months": INT}, ("monthly_installment", "rate", "tenure_months")),
    Tool(create_fd, "Open a fixed deposit at today's rate, debiting the principal from the source account.",
         {"principal_amount": NUM, "tenure_months": INT, "source_account": STR, "payout_type": PAYOUT,
          "maturity_instruction": RENEWAL, "nominee": OBJ}, ("principal_amount", "tenure_months", "source_account"), True),
    Tool(create_rd, "Open a recurring deposit at today's rate; the first installment is debited now.",
         {"monthly_installment": NUM, "tenure_months": INT, "source_account": STR, "maturity_instruction": RENEWAL,
          "nominee": OBJ}, ("monthly_installment", "tenure_months", "source_account"), True),
    Tool(get_deposit_closure_quote, "What closing a deposit today would pay (a penalty applies before maturity). Changes nothing.",
         {"deposit_ids": IDS}, ("deposit_ids",)),
    Tool(close_deposit, "Close a deposit and credit the proceeds to the payout account (default: its source account).",
         {"deposit_id": STR, "payout_account": STR}, ("deposit_id",), True),
    Tool(update_deposit_renewal, "Change what happens to a deposit at maturity.",
         {"deposit_id": STR, "instruction": RENEWAL}, ("deposit_id", "instruction"), True),
    Tool(get_loan_details, "Outstanding amount, EMI, rate, remaining tenure and next due date of loans.", {"loan_ids": IDS}, ("loan_ids",)),
    Tool(get_loan_foreclosure_quote, "Amount needed to close loans early on a date (informational).",
         {"loan_ids": IDS, "as_of_date": STR}, ("loan_ids",)),
    Tool(calculate_emi, "Monthly EMI, total interest and the first year of the schedule of a loan.",
         {"principal": NUM, "rate": NUM, "tenure_months": INT}, ("principal", "rate", "tenure_months")),
    Tool(get_gold_rate, "Today's gold price per gram for a purity.", {"purity_karat": KARAT}, ("purity_karat",)),
    Tool(calculate_gold_loan_ltv, "Value of gold collateral and the largest loan the bank's LTV cap allows.",
         {"gold_grams": NUM, "purity_karat": KARAT, "gold_rate_per_gram": NUM}, ("gold_grams", "purity_karat", "gold_rate_per_gram")),
    Tool(get_card_details, "Status, limits and channel controls of cards.", {"card_ids": IDS}, ("card_ids",)),
    Tool(toggle_card_freeze, "Freeze a card for a while, or unfreeze it (not for blocked or expired cards).",
         {"card_id": STR, "state": _enum("freeze", "unfreeze")}, ("card_id", "state"), True),
    Tool(block_card, "Block a card for good; it cannot be undone.",
         {"card_id": STR, "reason": _enum("lost", "stolen", "fraud", "damaged")}, ("card_id", "reason"), True),
    Tool(set_card_controls, "Turn channels (atm, online, pos) on or off and set daily limits, per domestic/international.",
         {"card_id": STR, "atm": OBJ, "online": OBJ, "pos": OBJ}, ("card_id",), True),
    Tool(show_mandates, "The customer's mandates (UPI AutoPay, e-NACH), optionally for one account or status.",
         {"account_id": STR, "status": _enum("active", "paused", "cancelled", "all")}, ()),
    Tool(cancel_mandate, "Cancel a mandate: no further debits under it.", {"mandate_id": STR}, ("mandate_id",), True),
    Tool(stop_cheque_payment, "Stop payment of cheques of an account that have not cleared.",
         {"account_id": STR, "cheque_numbers": IDS, "reason": _enum("lost", "dispute", "other")},
         ("account_id", "cheque_numbers"), True),
    Tool(request_cheque_book, "Order a cheque book for a savings or current account.",
         {"account_id": STR, "leaves": INT, "delivery_address": STR}, ("account_id",), True),
    Tool(request_duplicate_statement, "Order a statement of an account for a date range.",
         {"account_id": STR, "from_date": STR, "to_date": STR, "delivery_mode": _enum("email", "download")},
         ("account_id", "from_date", "to_date"), True),
    Tool(update_address, "Register a change of address; it applies after the bank verifies it.",
         {"address_type": _enum("communication", "permanent"), "line1": STR, "city": STR, "state": STR, "pincode": STR,
          "line2": STR}, ("address_type", "line1", "city", "state", "pincode"), True),
    Tool(raise_request, "Register a complaint or service request (disputes, failed transactions, anything no tool does).",
         {"description": STR, "category": _enum("failed_transaction", "unauthorized_debit", "service_quality", "app_issue",
                                                "charges_dispute", "general_query", "other"),
          "related_transaction_id": STR, "account_id": STR}, ("description",), True),
    Tool(get_request_status, "Status of a service request.", {"request_id": STR}, ("request_id",)),
    Tool(get_insurance_details, "Details of the customer's insurance policies.", {"policy_ids": IDS}, ("policy_ids",)),
    Tool(get_products_and_offers, "The bank's products and the customer's indicative offers.",
         {"type": _enum("deposit", "loan", "card", "insurance", "offer", "all")}, ()),
    Tool(transfer_to_human_agents, "Hand the conversation to a human agent with a summary; ends the conversation.",
         {"summary": STR}, ("summary",), True),
]  # fmt: skip
TOOLS: dict[str, Tool] = {tool.function.__name__: tool for tool in _TOOLS}


def tool_schemas() -> list[dict[str, Any]]:
    return [tool.schema() for tool in _TOOLS]


def _type_problem(value: Any, spec: dict[str, Any], field: str) -> str | None:
    kind = spec.get("type")
    ok = {
        "string": isinstance(value, str),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "object": isinstance(value, dict),
        "array": isinstance(value, list) and all(isinstance(item, str) for item in value),
    }.get(kind, True)
    if not ok:
        return f"{field} must be {'a list of strings' if kind == 'array' else 'a ' + kind}, got {value!r}"
    if "enum" in spec and value not in spec["enum"]:
        return f"{field} must be one of {spec['enum']}, got {value!r}"
    return None


def call_tool(db: Db, customer: str, name: str, arguments: Any) -> dict[str, Any]:
    """Run one tool call on `db`; anything wrong with the call comes back as `{"error": ...}`, the database
    untouched (writes check everything before changing anything)."""
    tool = TOOLS.get(name)
    if tool is None:
        return {"error": f"unknown tool {name!r}"}
    if not isinstance(arguments, dict):
        return {"error": f"the arguments of {name} must be a JSON object"}
    unknown = sorted(set(arguments) - set(tool.properties))
    missing = [field for field in tool.required if field not in arguments]
    if unknown or missing:
        return {"error": f"{name}: " + "; ".join(
            ([f"missing required argument(s) {', '.join(missing)}"] if missing else [])
            + ([f"unknown argument(s) {', '.join(unknown)}"] if unknown else []))}  # fmt: skip
    for field, value in arguments.items():
        if value is not None and (problem := _type_problem(value, tool.properties[field], field)):
            return {"error": f"{name}: {problem}"}
    snapshot = copy.deepcopy(db) if tool.writes else None
    try:
        return tool.function(db, customer, **{k: v for k, v in arguments.items() if v is not None})
    except ToolError as error:
        if snapshot is not None:
            db.clear()
            db.update(snapshot)
        return {"error": str(error)}
