"""Nine small tool worlds (healthcare, HR, e-commerce, education, insurance, IT helpdesk, legal,
logistics, real estate) over a per-session environment: the row's `environment`, a dict of collections.

The worlds are data, not code: each tool is a row of `TOOLS` naming one of five generic behaviours
(read one record, search, list, create, update) and the collection it acts on. That keeps nine domains
small enough to read, and lets a dataset bring any records it likes: a tool only needs its collection.
The injection lives in some record's text; the tools return records as they are, so the model reads it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["get", "search", "list", "create", "update"]
MAX_SEARCH_HITS = 20


@dataclass(frozen=True)
class Tool:
    """One tool: its behaviour, its collection, and, by behaviour, the argument naming the record
    (`key`), the record field a list filters on (`key` too), or the fields an update sets (`sets`)."""

    domain: str
    kind: Kind
    collection: str
    key: str | None = None
    sets: dict[str, str] = field(default_factory=dict)
    fixed: dict[str, Any] = field(default_factory=dict)


def _tools() -> dict[str, Tool]:
    table: list[tuple[str, str, Kind, str, str | None, dict[str, str], dict[str, Any]]] = [
        # healthcare (NeMo Gym's tool names)
        ("healthcare", "search_patients", "search", "patients", None, {}, {}),
        ("healthcare", "get_patient_record", "get", "patients", "patient_id", {}, {}),
        ("healthcare", "update_patient_chart", "update", "patients", "patient_id", {"chart_notes": "notes"}, {}),
        ("healthcare", "get_schedule", "list", "appointments", "date", {}, {}),
        ("healthcare", "schedule_appointment", "create", "appointments", None, {}, {"status": "scheduled"}),
        ("healthcare", "cancel_appointment", "update", "appointments", "appointment_id", {}, {"status": "cancelled"}),
        ("healthcare", "send_referral", "create", "referrals", None, {}, {}),
        ("healthcare", "prescribe_medication", "create", "new_prescriptions", None, {}, {}),
        ("healthcare", "get_prescriptions", "get", "prescriptions", "patient_id", {}, {}),
        ("healthcare", "get_lab_results", "get", "lab_results", "patient_id", {}, {}),
        # shared messaging
        ("shared", "send_message", "create", "sent_messages", None, {}, {}),
        ("shared", "get_messages", "list", "messages", None, {}, {}),
        ("shared", "send_email", "create", "sent_emails", None, {}, {}),
        ("shared", "get_emails", "list", "emails", None, {}, {}),
        # hr
        ("hr", "search_candidates", "search", "candidates", None, {}, {}),
        ("hr", "get_candidate", "get", "candidates", "candidate_id", {}, {}),
        ("hr", "get_job_posting", "get", "job_postings", "job_id", {}, {}),
        ("hr", "send_offer", "create", "offers", None, {}, {}),
        ("hr", "update_candidate_status", "update", "candidates", "candidate_id", {"status": "status"}, {}),
        # ecommerce
        ("ecommerce", "search_products", "search", "products", None, {}, {}),
        ("ecommerce", "get_order", "get", "orders", "order_id", {}, {}),
        ("ecommerce", "get_product_reviews", "get", "reviews", "product_id", {}, {}),
        ("ecommerce", "issue_refund", "create", "refunds", None, {}, {}),
        ("ecommerce", "update_shipping_address", "update", "orders", "order_id", {"shipping_address": "address"}, {}),
        # education
        ("education", "get_student", "get", "students", "student_id", {}, {}),
        ("education", "get_submissions", "get", "submissions", "assignment_id", {}, {}),
        ("education", "update_grade", "create", "grade_changes", None, {}, {}),
        # insurance
        ("insurance", "get_policy", "get", "policies", "policy_id", {}, {}),
        ("insurance", "get_claim", "get", "claims", "claim_id", {}, {}),
        ("insurance", "approve_claim", "update", "claims", "claim_id", {"approved_amount": "amount"}, {"status": "approved"}),
        ("insurance", "update_beneficiary", "update", "policies", "policy_id", {"beneficiary": "beneficiary"}, {}),
        # it_helpdesk
        ("it_helpdesk", "search_tickets", "search", "tickets", None, {}, {}),
        ("it_helpdesk", "get_ticket", "get", "tickets", "ticket_id", {}, {}),
        ("it_helpdesk", "reset_password", "create", "password_resets", None, {}, {}),
        ("it_helpdesk", "grant_access", "create", "access_grants", None, {}, {}),
        # legal
        ("legal", "get_case", "get", "cases", "case_id", {}, {}),
        ("legal", "get_document", "get", "documents", "document_id", {}, {}),
        ("legal", "share_document", "create", "shared_documents", None, {}, {}),
        # logistics
        ("logistics", "get_shipment", "get", "shipments", "shipment_id", {}, {}),
        ("logistics", "search_shipments", "search", "shipments", None, {}, {}),
        ("logistics", "reroute_shipment", "update", "shipments", "shipment_id", {"destination": "new_address"}, {}),
        # real_estate
        ("real_estate", "search_listings", "search", "listings", None, {}, {}),
        ("real_estate", "get_listing", "get", "listings", "listing_id", {}, {}),
        ("real_estate", "schedule_viewing", "create", "viewings", None, {}, {"status": "scheduled"}),
        ("real_estate", "update_listing_price", "update", "listings", "listing_id", {"price": "price"}, {}),
    ]  # fmt: skip
    tools: dict[str, Tool] = {}
    for domain, name, kind, collection, key, sets, fixed in table:
        if name in tools:
            raise ValueError(f"tool {name!r} is declared twice")
        tools[name] = Tool(domain, kind, collection, key, sets, fixed)
    return tools


TOOLS = _tools()
DOMAINS = sorted({tool.domain for tool in TOOLS.values()} - {"shared"})


def _records(collection: Any) -> list[Any]:
    """A collection's records, whether it is a dict keyed by id or a list."""
    if isinstance(collection, dict):
        return list(collection.values())
    return list(collection) if isinstance(collection, list) else []


def _texts(value: Any) -> list[str]:
    """Every text of a record, however nested (walked with a stack: a dataset's record may nest deeply)."""
    texts, pending = [], [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, str):
            texts.append(item)
        elif item is not None:
            texts.append(str(item))
    return texts


def _error(message: str) -> dict[str, str]:
    return {"error": message}


def _find(env: dict[str, Any], tool: Tool, args: dict[str, Any]) -> tuple[Any, dict[str, str] | None]:
    """The record `args[tool.key]` names (a dict key of the collection, or a record's field), or an error."""
    wanted = args.get(tool.key or "")
    if not isinstance(wanted, str | int) or isinstance(wanted, bool):
        return None, _error(f"argument {tool.key!r} is required")
    collection = env.get(tool.collection)
    if isinstance(collection, dict) and str(wanted) in collection:
        return collection[str(wanted)], None
    for record in _records(collection):
        if isinstance(record, dict) and str(record.get(tool.key)) == str(wanted):
            return record, None
    return None, _error(f"no record with {tool.key} {wanted!r}")


def _get(env: dict[str, Any], tool: Tool, args: dict[str, Any]) -> Any:
    record, problem = _find(env, tool, args)
    return problem or record


def _search(env: dict[str, Any], tool: Tool, args: dict[str, Any]) -> Any:
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        return _error("argument 'query' is required")
    needle = query.strip().lower()
    hits = [r for r in _records(env.get(tool.collection)) if any(needle in t.lower() for t in _texts(r))]
    return {"results": hits[:MAX_SEARCH_HITS], "total": len(hits)}


def _list(env: dict[str, Any], tool: Tool, args: dict[str, Any]) -> Any:
    records = _records(env.get(tool.collection))
    if tool.key is not None and tool.key in args:
        records = [r for r in records if isinstance(r, dict) and str(r.get(tool.key)) == str(args[tool.key])]
    return {"results": records}


def _create(env: dict[str, Any], tool: Tool, args: dict[str, Any]) -> Any:
    """Records the action in its collection (the environment's log of what the agent did)."""
    collection = env.setdefault(tool.collection, [])
    record = {**args, **tool.fixed}
    if isinstance(collection, dict):
        record_id = f"{tool.collection[:3].upper()}-{len(collection) + 1:04d}"
        collection[record_id] = {"id": record_id, **record}
        return {"status": "created", "id": record_id}
    if not isinstance(collection, list):
        return _error(f"{tool.collection} cannot take new records")
    collection.append(record)
    return {"status": "done", "id": f"{tool.collection}-{len(collection)}"}


def _update(env: dict[str, Any], tool: Tool, args: dict[str, Any]) -> Any:
    record, problem = _find(env, tool, args)
    if problem is not None:
        return problem
    if not isinstance(record, dict):
        return _error(f"{tool.collection} record {args[tool.key]!r} cannot be updated")
    missing = [argument for argument in tool.sets.values() if argument not in args]
    if missing:
        return _error(f"arguments {missing} are required")
    record.update({name: args[argument] for name, argument in tool.sets.items()})
    record.update(tool.fixed)
    return {"status": "updated", tool.key: args[tool.key]}


BEHAVIOURS: dict[Kind, Callable[[dict[str, Any], Tool, dict[str, Any]], Any]] = {
    "get": _get,
    "search": _search,
    "list": _list,
    "create": _create,
    "update": _update,
}


def call_tool(env: dict[str, Any], name: str, args: dict[str, Any]) -> Any:
    """Run tool `name` on the session's environment (mutating it for writes) and answer what the model
    sees. Bad arguments are an `error` answer for the model, never an exception."""
    tool = TOOLS[name]
    return BEHAVIOURS[tool.kind](env, tool, {key: value for key, value in args.items() if value is not None})


def fresh_environment(environment: dict[str, Any]) -> dict[str, Any]:
    """A session's own copy: tools mutate it, and the row must stay as it was for the next rollout."""
    return copy.deepcopy(environment)
