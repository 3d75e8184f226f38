"""Tau-style grading of an indian_banking episode: the final database against the one the gold actions make.

`gold_database` replays the task's `evaluation_criteria.actions` on a fresh copy of the start state, with
the same tools the policy uses; `grade` compares the episode's database with it after dropping free text
(request descriptions, handoff summaries: any wording of them is fine), and checks that every
`communicate_info` string was said to the customer. Reward 1.0 when both hold, else 0.0.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from pydantic import BaseModel, Field

from resources_servers.indian_banking.bank import Db, base_database, call_tool

FREE_TEXT_KEYS = frozenset({"description", "summary"})


class GoldAction(BaseModel):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    action_id: str | None = None
    compare_args: list[str] | None = None
    expect_error: bool = False


class EvaluationCriteria(BaseModel):
    actions: list[GoldAction] = Field(default_factory=list)
    communicate_info: list[str] = Field(default_factory=list)
    nl_assertions: list[str] = Field(default_factory=list)
    reward_basis: list[str] = Field(default_factory=lambda: ["DB", "COMMUNICATE"])


class GoldActionError(ValueError):
    """A gold action that fails on replay (and is not marked `expect_error`): the task is broken."""


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def start_database(initial_state: dict[str, Any]) -> Db:
    """The episode's database: the base bank, with `initial_state["db_patch"]` merged in when given."""
    db = base_database()
    patch = initial_state.get("db_patch")
    if isinstance(patch, dict):
        _merge(db, patch)
    return db


def gold_database(initial_state: dict[str, Any], customer: str, criteria: EvaluationCriteria) -> Db:
    db = start_database(initial_state)
    for number, action in enumerate(criteria.actions):
        answer = call_tool(db, customer, action.name, action.arguments)
        if "error" in answer and not action.expect_error:
            raise GoldActionError(
                f"evaluation_criteria.actions[{number}] ({action.name}) fails: {answer['error']}"
            )
    return db


def normalised(db: Db) -> Any:
    """The database as compared: free-text fields dropped, everything else kept."""
    if isinstance(db, dict):
        return {key: normalised(value) for key, value in db.items() if key not in FREE_TEXT_KEYS}
    if isinstance(db, list):
        return [normalised(value) for value in db]
    return db


def _plain(text: str) -> str:
    """Text as compared for disclosures: lower case, no rupee sign or digit-grouping commas, single spaces."""
    text = text.lower().replace("₹", " ").replace("rs.", " ").replace("inr", " ")
    text = re.sub(r"(?<=\d),(?=\d)", "", text)
    return " ".join(text.split())


def communicated(info: list[str], said: str) -> list[bool]:
    plain_said = _plain(said)
    return [_plain(item) in plain_said for item in info]


def grade(final_db: Db, gold: Any, criteria: EvaluationCriteria, said: str) -> dict[str, Any]:
    """The grade of the episode so far: reward plus the checks it is made of."""
    db_match = normalised(final_db) == gold
    told = communicated(criteria.communicate_info, said)
    return {
        "reward": 1.0 if db_match and all(told) else 0.0,
        "db_match": db_match,
        "communicated": told,
    }
