"""The synthetic bank's starting data: two customers (one with KYC expired) with their accounts, deposits,
loans, cards, mandates, cheques, service requests and policies, plus the rate cards, gold prices, product
list and knowledge-base articles every episode shares. All names and numbers are made up here."""

from __future__ import annotations

import copy
from datetime import date
from typing import Any

TODAY = date(2026, 7, 16)
Db = dict[str, Any]

# ---- base data -----------------------------------------------------------------------------------------


def _controls(atm: int, online: int, pos: int, international: bool = False) -> dict[str, Any]:
    def channel(limit: int) -> dict[str, Any]:
        return {
            "domestic": {"enabled": True, "daily_limit": limit},
            "international": {"enabled": international, "daily_limit": limit if international else 0},
        }

    return {"atm": channel(atm), "online": channel(online), "pos": channel(pos)}


def base_database() -> Db:
    """A fresh copy of the bank: two customers (one with KYC expired) and their products."""
    return copy.deepcopy(_BASE)


_BASE: Db = {
    "customers": {
        "CUST_1001": {
            "name": "Meera Iyer",
            "kyc_status": "verified",
            "mobile": "XXXXXX4821",
            "email": "me***@mail.example",
            "addresses": {
                "communication": {"line1": "12 Lake View Road", "city": "Chennai", "state": "Tamil Nadu", "pincode": "600028"},
                "permanent": {"line1": "12 Lake View Road", "city": "Chennai", "state": "Tamil Nadu", "pincode": "600028"},
            },
        },
        "CUST_1002": {
            "name": "Arjun Nair",
            "kyc_status": "expired",
            "mobile": "XXXXXX1190",
            "email": "ar***@mail.example",
            "addresses": {
                "communication": {"line1": "4 MG Road", "city": "Kochi", "state": "Kerala", "pincode": "682016"},
                "permanent": {"line1": "4 MG Road", "city": "Kochi", "state": "Kerala", "pincode": "682016"},
            },
        },
    },
    "accounts": {
        "ACC2001": {
            "customer": "CUST_1001", "type": "savings", "status": "active", "branch": "Adyar, Chennai",
            "ifsc": "SYNB0000412", "holders": ["Meera Iyer"], "nominee": "Ravi Iyer", "opened": "2019-03-11",
            "balance": 245000.0, "hold": 5000.0,
            "transactions": [
                {"id": "TXN9001", "date": "2026-07-14", "type": "debit", "channel": "upi", "amount": 649.0, "narration": "Streamvora monthly"},
                {"id": "TXN9002", "date": "2026-07-10", "type": "credit", "channel": "neft", "amount": 98000.0, "narration": "Salary July"},
                {"id": "TXN9003", "date": "2026-07-03", "type": "debit", "channel": "pos", "amount": 2310.0, "narration": "Grocery mart"},
                {"id": "TXN9004", "date": "2026-06-28", "type": "debit", "channel": "atm", "amount": 5000.0, "narration": "ATM withdrawal"},
            ],
        },
        "ACC2002": {
            "customer": "CUST_1001", "type": "current", "status": "active", "branch": "Adyar, Chennai",
            "ifsc": "SYNB0000412", "holders": ["Meera Iyer"], "nominee": None, "opened": "2021-08-02",
            "balance": 61500.0, "hold": 0.0, "transactions": [],
        },
        "ACC2101": {
            "customer": "CUST_1002", "type": "savings", "status": "active", "branch": "Edappally, Kochi",
            "ifsc": "SYNB0000733", "holders": ["Arjun Nair"], "nominee": None, "opened": "2017-01-20",
            "balance": 38200.0, "hold": 0.0,
            "transactions": [
                {"id": "TXN9101", "date": "2026-07-12", "type": "debit", "channel": "imps", "amount": 12000.0, "narration": "Rent July"},
            ],
        },
    },
    "deposits": {
        "FD3001": {
            "customer": "CUST_1001", "kind": "fd", "principal": 100000.0, "rate": 7.1, "tenure_months": 24,
            "start": "2025-07-16", "status": "active", "payout_type": "cumulative",
            "maturity_instruction": "no_renewal", "source_account": "ACC2001",
        },
        "RD3002": {
            "customer": "CUST_1001", "kind": "rd", "installment": 5000.0, "rate": 6.8, "tenure_months": 12,
            "start": "2026-01-16", "status": "active", "installments_paid": 6,
            "maturity_instruction": "no_renewal", "source_account": "ACC2001",
        },
    },
    "loans": {
        "LN4001": {
            "customer": "CUST_1001", "type": "home_loan", "principal": 3500000.0, "outstanding": 2890000.0,
            "rate": 8.5, "emi": 30374.0, "remaining_months": 168, "next_due": "2026-08-05",
        },
    },
    "cards": {
        "CARD5001": {
            "customer": "CUST_1001", "kind": "debit", "network": "RuPay", "last4": "5001", "status": "active",
            "linked_account": "ACC2001", "limit": None, "available": None, "controls": _controls(40000, 50000, 100000),
        },
        "CARD5002": {
            "customer": "CUST_1001", "kind": "credit", "network": "Visa", "last4": "5002", "status": "active",
            "linked_account": None, "limit": 200000.0, "available": 176500.0,
            "controls": _controls(20000, 100000, 100000, international=True),
        },
        "CARD5101": {
            "customer": "CUST_1002", "kind": "debit", "network": "RuPay", "last4": "5101", "status": "active",
            "linked_account": "ACC2101", "limit": None, "available": None, "controls": _controls(25000, 25000, 50000),
        },
    },
    "mandates": {
        "MDT6001": {"customer": "CUST_1001", "account": "ACC2001", "payee": "Streamvora", "type": "upi_autopay",
                    "amount": 649.0, "frequency": "monthly", "status": "active"},
        "MDT6002": {"customer": "CUST_1001", "account": "ACC2001", "payee": "Suraksha Life Insurance", "type": "e_nach",
                    "amount": 2400.0, "frequency": "monthly", "status": "active"},
    },
    "cheques": {
        "ACC2001/000117": {"account": "ACC2001", "number": "000117", "amount": 15000.0, "status": "issued"},
        "ACC2001/000116": {"account": "ACC2001", "number": "000116", "amount": 4200.0, "status": "cleared"},
    },
    "requests": {
        "SR7001": {"customer": "CUST_1001", "category": "charges_dispute", "status": "in_progress",
                   "description": "SMS charges debited twice", "opened": "2026-07-01", "account_id": "ACC2001"},
    },
    "insurance": {
        "POL8001": {"customer": "CUST_1001", "type": "term_life", "insurer": "Suraksha Life Insurance",
                    "sum_assured": 5000000.0, "premium": 2400.0, "frequency": "monthly", "status": "in_force",
                    "next_due": "2026-08-01"},
    },
    "offers": {
        "CUST_1001": [{"offer_id": "OFR01", "type": "loan", "title": "Pre-approved personal loan up to ₹5,00,000 (indicative)"}],
        "CUST_1002": [],
    },
    "service_log": [],
    "transferred_to_human": False,
    "counters": {"deposit": 3100, "request": 7100, "order": 100},
}  # fmt: skip

RATE_CARDS: dict[str, list[tuple[int, float]]] = {  # (longest tenure in months of the slab, % p.a.)
    "fd": [(6, 5.5), (12, 6.9), (24, 7.1), (60, 6.75), (120, 6.5)],
    "rd": [(12, 6.8), (24, 7.0), (60, 6.75), (120, 6.5)],
    "home_loan": [(360, 8.5)],
    "personal_loan": [(60, 11.25)],
    "gold_loan": [(36, 9.25)],
}
GOLD_RATE_PER_GRAM = {24: 7320.0, 22: 6710.0, 18: 5490.0}
GOLD_LTV = 0.75
PREMATURE_PENALTY = 1.0  # percentage points off the rate of the tenure actually run
PRODUCTS = [
    {"product_id": "PRD-FD", "type": "deposit", "name": "Fixed Deposit", "minimum": 10000},
    {"product_id": "PRD-RD", "type": "deposit", "name": "Recurring Deposit", "minimum": 500},
    {"product_id": "PRD-HL", "type": "loan", "name": "Home Loan"},
    {"product_id": "PRD-GL", "type": "loan", "name": "Gold Loan"},
    {"product_id": "PRD-CC", "type": "card", "name": "Platinum Credit Card"},
    {"product_id": "PRD-TL", "type": "insurance", "name": "Term Life Cover"},
]
KNOWLEDGE_BASE = [
    {"id": "KB01", "category": "Deposits", "title": "Premature closure of fixed deposits",
     "text": "A fixed deposit can be closed before maturity. Interest is paid at the rate for the period actually run, less a 1 percent penalty. Proceeds go to the linked savings account."},
    {"id": "KB02", "category": "Deposits", "title": "Senior citizen deposit rates",
     "text": "Customers aged 60 or more earn an extra 0.5 percent on fixed and recurring deposits of any tenure."},
    {"id": "KB03", "category": "Cards", "title": "Freezing versus blocking a card",
     "text": "Freezing a card is temporary and can be undone in the app. Blocking is permanent; a replacement card must be requested."},
    {"id": "KB04", "category": "Payments", "title": "Cancelling UPI AutoPay and e-NACH mandates",
     "text": "A mandate can be cancelled at any time; debits already processed are not reversed. Cancellation takes effect from the next cycle."},
    {"id": "KB05", "category": "Accounts", "title": "Minimum balance for savings accounts",
     "text": "Savings accounts in metro branches need an average monthly balance of 10000 rupees; a shortfall charge applies otherwise."},
    {"id": "KB06", "category": "Grievance", "title": "Complaint escalation and the banking ombudsman",
     "text": "Complaints are answered within 30 days. If unresolved, the customer may approach the RBI integrated ombudsman."},
    {"id": "KB07", "category": "Loans", "title": "Home loan prepayment and foreclosure",
     "text": "Floating-rate home loans for individuals carry no prepayment or foreclosure charges."},
    {"id": "KB08", "category": "Accounts", "title": "KYC renewal",
     "text": "When KYC has expired, changes to the profile and new bookings are paused until KYC is renewed at a branch or by video KYC."},
]  # fmt: skip
