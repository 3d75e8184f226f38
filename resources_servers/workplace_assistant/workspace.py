"""The office the model works in: email, calendar, web analytics, project tasks, a CRM and a company directory.

Tables are lists of row dicts loaded once from `csv_data/processed/` (every cell a string, empty cells None)
and shared by every workspace: a tool never edits a row in place, it swaps in a new dict, so a fresh
workspace costs one list copy per table. Tool results (dicts, lists, or plain error sentences) are what the
model sees, so their wording is kept stable.

Also home of the module-level `replay_reward` that `/verify` runs in the CPU pool.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Callable, Collection, Iterable
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).resolve().parent / "csv_data" / "processed"
NOW = "2023-11-30 23:59:00"
"""The fixed "current time" of every task; sent emails carry it."""
DEFAULT_PAGE_SIZE = 5

Row = dict[str, Any]

EMAIL_COLUMNS = ("email_id", "inbox/outbox", "sender/recipient", "subject", "sent_datetime", "body")
EVENT_COLUMNS = ("event_id", "event_name", "participant_email", "event_start", "duration")
TASK_COLUMNS = ("task_id", "task_name", "assigned_to_email", "list_name", "due_date", "board")
CRM_COLUMNS = (
    "customer_id",
    "assigned_to_email",
    "customer_name",
    "customer_email",
    "customer_phone",
    "last_contact_date",
    "product_interest",
    "status",
    "follow_up_by",
    "notes",
)
PLOT_COLUMNS = ("file_path",)

LISTS = ("Backlog", "In Progress", "In Review", "Completed")
BOARDS = ("Back end", "Front end", "Design")
STATUSES = ("Qualified", "Won", "Lost", "Lead", "Proposal")
PRODUCTS = ("Software", "Hardware", "Services", "Consulting", "Training")
PLOT_VALUES = (
    "total_visits",
    "session_duration_seconds",
    "user_engaged",
    "visits_direct",
    "visits_referral",
    "visits_search_engine",
    "visits_social_media",
)
PLOT_TYPES = ("bar", "line", "scatter", "histogram")

COMPARED_TABLES = {
    "calendar_events": EVENT_COLUMNS,
    "emails": EMAIL_COLUMNS,
    "plots": PLOT_COLUMNS,
    "project_tasks": TASK_COLUMNS,
    "crm": CRM_COLUMNS,
}
"""The tables whose final contents decide the reward (analytics is read-only)."""
CASE_SENSITIVE_COLUMNS = frozenset({"status", "list_name", "board"})

LIST_ERROR = "List not valid. Please choose from: 'Backlog', 'In Progress', 'In Review', 'Completed'."
BOARD_ERROR = "Board not valid. Please choose from: 'Back end', 'Front end', 'Design'."
ASSIGNEE_ERROR = "Assignee email not valid. Please choose from the list of team members."
STATUS_ERROR = "Status not valid. Please choose from: 'Qualified', 'Won', 'Lost', 'Lead', 'Proposal'"
PRODUCT_ERROR = (
    "Product interest not valid. Please choose from: 'Software', 'Hardware', 'Services', "
    "'Consulting', 'Training'"
)
CRM_FIELD_ERROR = (
    "Field not valid. Please choose from: 'customer_name', 'assigned_to_email', 'customer_email', "
    "'customer_phone', 'last_contact_date', 'product_interest', 'status', 'notes', 'follow_up_by'"
)

ID_COLUMNS = {
    "emails": "email_id",
    "calendar_events": "event_id",
    "project_tasks": "task_id",
    "crm": "customer_id",
}
"""The id column of each table the tools address rows of by id."""


class UnknownToolError(LookupError):
    """The route names no tool of the workspace."""


def _read_csv(name: str) -> tuple[Row, ...]:
    with (DATA_DIR / name).open(newline="", encoding="utf-8") as handle:
        return tuple(
            {key: (value if value != "" else None) for key, value in row.items()}
            for row in csv.DictReader(handle)
        )


@cache
def base_tables() -> dict[str, tuple[Row, ...]]:
    """The shipped data, read once per process; rows are treated as immutable."""
    analytics = tuple(
        {**row, "user_engaged": row["user_engaged"] == "True"} for row in _read_csv("analytics_data.csv")
    )
    tables = {
        "emails": _read_csv("emails.csv"),
        "calendar_events": _read_csv("calendar_events.csv"),
        "analytics": analytics,
        "project_tasks": _read_csv("project_tasks.csv"),
        "crm": _read_csv("customer_relationship_manager_data.csv"),
        "plots": (),
    }
    return tables


@cache
def company_directory() -> tuple[str, ...]:
    """Every colleague's address: the company-domain addresses that appear anywhere in the data, sorted."""
    tables = base_tables()
    found = {row["sender/recipient"] for row in tables["emails"]}
    found |= {row["participant_email"] for row in tables["calendar_events"]}
    found |= {row["assigned_to_email"] for row in tables["project_tasks"]}
    found |= {row["assigned_to_email"] for row in tables["crm"]}
    return tuple(
        sorted(address.lower() for address in found if address and address.lower().endswith("@atlas.com"))
    )


def _contains(pattern: str, value: Any) -> bool:
    """Case-insensitive regular-expression search, false on empty cells (the upstream DataFrame semantics)."""
    return isinstance(value, str) and re.search(pattern, value, re.IGNORECASE) is not None


def _next_id(rows: list[Row], column: str, pad: bool = True) -> str:
    """One more than the largest id (ids compare as strings, like the upstream string columns)."""
    number = str(int(max(row[column] for row in rows)) + 1)
    return number.zfill(8) if pad else number


def _valid_address(address: str) -> bool:
    return "@" in address and "." in address


def _matching(rows: list[Row], filters: dict[str, str | None]) -> list[Row]:
    """The rows that `_contains` every given (truthy) filter in its column."""
    for column, wanted in filters.items():
        if wanted:
            rows = [row for row in rows if _contains(wanted, row[column])]
    return list(rows)


def _between(
    rows: list[Row],
    column: str,
    low: str | None,
    high: str | None,
    key: Callable[[Any], Any] = lambda value: value,
) -> list[Row]:
    """The rows whose `column`, read through `key`, lies within the given (truthy) bounds; empty cells fall out."""
    if low:
        lowest = key(low)
        rows = [row for row in rows if row[column] is not None and key(row[column]) >= lowest]
    if high:
        highest = key(high)
        rows = [row for row in rows if row[column] is not None and key(row[column]) <= highest]
    return rows


def _paginate(items: list[Row], noun: str, page: Any, page_size: Any) -> dict[str, Any] | str:
    """One page of `items` with its pagination block, or "No <noun> found." when there are none."""
    if not items:
        return f"No {noun} found."
    page = 1 if page is None else int(page)
    page_size = DEFAULT_PAGE_SIZE if page_size is None else int(page_size)
    if page < 1 or page_size < 1:
        return "Page and page size must be positive integers."
    start = (page - 1) * page_size
    return {
        noun: items[start : start + page_size],
        "pagination": {
            f"total_{noun}": len(items),
            "page": page,
            "page_size": page_size,
            "total_pages": math.ceil(len(items) / page_size),
        },
    }


class Workspace:
    """One rollout's office. Each public `<tool name>` method is a tool; keyword arguments only."""

    def __init__(self) -> None:
        tables = base_tables()
        self.emails: list[Row] = list(tables["emails"])
        self.calendar_events: list[Row] = list(tables["calendar_events"])
        self.analytics: list[Row] = list(tables["analytics"])
        self.project_tasks: list[Row] = list(tables["project_tasks"])
        self.crm: list[Row] = list(tables["crm"])
        self.plots: list[Row] = []

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        """Run tool `name`; None-valued arguments count as not given."""
        if name not in TOOL_NAMES:
            raise UnknownToolError(f"unknown tool {name!r}")
        given = {key: value for key, value in arguments.items() if value is not None}
        return getattr(self, name)(**given)

    def answer(self, name: str, arguments: dict[str, Any]) -> Any:
        """`call`, with a tool-level failure answered as text for the model instead of raised."""
        try:
            return self.call(name, arguments)
        except UnknownToolError:
            return f"Error executing tool '{name}': no such tool"
        except Exception as error:
            return f"Error executing tool '{name}': {error}"

    def comparable_state(self) -> dict[str, list[tuple[Any, ...]]]:
        """The compared tables as row tuples, strings lower-cased except in the case-sensitive columns."""
        state = {}
        for table, columns in COMPARED_TABLES.items():
            rows = getattr(self, table)
            extra = sorted({key for row in rows for key in row} - set(columns))
            state[table] = [
                tuple(_normalise(column, row.get(column)) for column in (*columns, *extra)) for row in rows
            ]
        return state

    # ----- shared by the tool groups -----

    def _find(self, table: str, row_id: str) -> Row | None:
        id_column = ID_COLUMNS[table]
        return next((row for row in getattr(self, table) if row[id_column] == row_id), None)

    def _get_field(self, table: str, noun: str, row_id: str | None, field: str | None) -> Any:
        """`{field: value}` of one row, or why not."""
        if not row_id:
            return f"{noun} ID not provided."
        if not field:
            return "Field not provided."
        row = self._find(table, row_id)
        if row is None:
            return f"{noun} not found."
        if field not in row:
            return "Field not found."
        return {field: row[field]}

    def _append(self, table: str, columns: tuple[str, ...], values: tuple[Any, ...]) -> None:
        getattr(self, table).append(dict(zip(columns, values, strict=True)))

    def _delete(self, table: str, noun: str, row_id: str | None) -> str:
        if not row_id:
            return f"{noun} ID not provided."
        if self._find(table, row_id) is None:
            return f"{noun} not found."
        id_column = ID_COLUMNS[table]
        setattr(self, table, [row for row in getattr(self, table) if row[id_column] != row_id])
        return f"{noun} deleted successfully."

    def _update(
        self,
        table: str,
        noun: str,
        row_id: str | None,
        field: str | None,
        new_value: str | None,
        *,
        lowered: tuple[str, ...] = (),
        choices: tuple[tuple[str, Collection[str], str], ...] = (),
        columns: tuple[str, ...] | None = None,
        field_error: str = "",
    ) -> str:
        """Set one field of one row. In order: arguments given, `lowered` fields lower-cased, each
        `(field, allowed values, error)` of `choices` checked, row found, field among `columns` (when given)."""
        if not row_id or not field or not new_value:
            return f"{noun} ID, field, or new value not provided."
        if any(field == name for name in lowered):
            new_value = new_value.lower()
        for name, allowed, error in choices:
            if field == name and new_value not in allowed:
                return error
        if self._find(table, row_id) is None:
            return f"{noun} not found."
        if columns is not None and field not in columns:
            return field_error
        setattr(self, table, _replace(getattr(self, table), ID_COLUMNS[table], row_id, field, new_value))
        return f"{noun} updated successfully."

    # ----- company directory -----

    def company_directory_find_email_address(self, name: str = "") -> Any:
        if name == "":
            return "Name not provided."
        return [address for address in company_directory() if re.search(name.lower(), address)]

    # ----- email -----

    def email_get_email_information_by_id(self, email_id: str | None = None, field: str | None = None) -> Any:
        return self._get_field("emails", "Email", email_id, field)

    def email_search_emails(
        self,
        query: str = "",
        date_min: str | None = None,
        date_max: str | None = None,
        page: int | None = None,
        page_size: int | None = None,
    ) -> Any:
        words = query.lower().split()

        def matches(row: Row) -> bool:
            text = f"{row['subject']} {row['body']} {row['sender/recipient']}".lower()
            return all(word in text for word in words)

        found = sorted(
            (row for row in self.emails if matches(row)), key=lambda row: row["sent_datetime"], reverse=True
        )
        found = _between(found, "sent_datetime", date_min, date_max, lambda text: _parse_time(text).date())
        return _paginate(found, "emails", page, page_size)

    def email_send_email(
        self, recipient: str | None = None, subject: str | None = None, body: str | None = None
    ) -> str:
        if not recipient or not subject or not body:
            return "Recipient, subject, or body not provided."
        if not _valid_address(recipient):
            return "Invalid recipient email address."
        email_id = _next_id(self.emails, "email_id", pad=False)
        self._append("emails", EMAIL_COLUMNS, (email_id, "outbox", recipient.lower(), subject, NOW, body))
        return "Email sent successfully."

    def email_delete_email(self, email_id: str | None = None) -> str:
        return self._delete("emails", "Email", email_id)

    def email_forward_email(self, email_id: str | None = None, recipient: str | None = None) -> str:
        if not email_id or not recipient:
            return "Email ID or recipient not provided."
        email = self._find("emails", email_id)
        if email is None:
            return "Email not found."
        if not _valid_address(recipient):
            return "Invalid recipient email address."
        result = self.email_send_email(
            recipient=recipient, subject=f"FW: {email['subject']}", body=email["body"]
        )
        return "Email forwarded successfully." if result == "Email sent successfully." else result

    def email_reply_email(self, email_id: str | None = None, body: str | None = None) -> str:
        if not email_id or not body:
            return "Email ID or body not provided."
        email = self._find("emails", email_id)
        if email is None:
            return "Email not found."
        result = self.email_send_email(
            recipient=email["sender/recipient"], subject=email["subject"], body=body
        )
        return "Email replied successfully." if result == "Email sent successfully." else result

    # ----- calendar -----

    def calendar_get_event_information_by_id(
        self, event_id: str | None = None, field: str | None = None
    ) -> Any:
        return self._get_field("calendar_events", "Event", event_id, field)

    def calendar_search_events(
        self,
        query: str = "",
        time_min: str | None = None,
        time_max: str | None = None,
        page: int | None = None,
        page_size: int | None = None,
    ) -> Any:
        found = [
            row
            for row in self.calendar_events
            if _contains(query, row["event_name"]) or _contains(query, row["participant_email"])
        ]
        found = _between(found, "event_start", time_min, time_max, _parse_time)
        return _paginate(found, "events", page, page_size)

    def calendar_create_event(
        self,
        event_name: str | None = None,
        participant_email: str | None = None,
        event_start: str | None = None,
        duration: str | None = None,
    ) -> str:
        if not event_name:
            return "Event name not provided."
        if not participant_email:
            return "Participant email not provided."
        if not event_start:
            return "Event start not provided."
        if not duration:
            return "Event duration not provided."
        event_id = _next_id(self.calendar_events, "event_id")
        values = (event_id, event_name, participant_email.lower(), event_start, duration)
        self._append("calendar_events", EVENT_COLUMNS, values)
        return event_id

    def calendar_delete_event(self, event_id: str | None = None) -> str:
        return self._delete("calendar_events", "Event", event_id)

    def calendar_update_event(
        self, event_id: str | None = None, field: str | None = None, new_value: str | None = None
    ) -> str:
        # No field check: an unknown field becomes a new column (the upstream behaviour).
        return self._update(
            "calendar_events", "Event", event_id, field, new_value, lowered=("participant_email",)
        )

    # ----- analytics -----

    def _visits(self, time_min: str | None, time_max: str | None) -> list[Row]:
        return [
            row
            for row in self.analytics
            if (not time_min or row["date_of_visit"] >= time_min)
            and (not time_max or row["date_of_visit"] <= time_max)
        ]

    def analytics_get_visitor_information_by_id(self, visitor_id: str | None = None) -> Any:
        if not visitor_id:
            return "Visitor ID not provided."
        found = [dict(row) for row in self.analytics if row["visitor_id"] == visitor_id]
        return found if found else "Visitor not found."

    def analytics_create_plot(
        self,
        time_min: str | None = None,
        time_max: str | None = None,
        value_to_plot: str | None = None,
        plot_type: str | None = None,
    ) -> str:
        if not time_min:
            return "Start date not provided."
        if not time_max:
            return "End date not provided."
        if value_to_plot not in PLOT_VALUES:
            return (
                "Value to plot must be one of 'total_visits', 'session_duration_seconds', 'user_engaged', "
                "'direct', 'referral', 'search engine', 'social media'"
            )
        if plot_type not in PLOT_TYPES:
            return "Plot type must be one of 'bar', 'line', 'scatter', or 'histogram'"
        file_path = f"plots/{time_min}_{time_max}_{value_to_plot}_{plot_type}.png"
        self.plots.append({"file_path": file_path})
        return file_path

    def analytics_total_visits_count(self, time_min: str | None = None, time_max: str | None = None) -> Any:
        return _per_day(self._visits(time_min, time_max), lambda rows: len(rows))

    def analytics_engaged_users_count(self, time_min: str | None = None, time_max: str | None = None) -> Any:
        return _per_day(
            self._visits(time_min, time_max), lambda rows: sum(bool(row["user_engaged"]) for row in rows)
        )

    def analytics_traffic_source_count(
        self, time_min: str | None = None, time_max: str | None = None, traffic_source: str | None = None
    ) -> Any:
        visits = self._visits(time_min, time_max)
        if not traffic_source:
            return _per_day(visits, lambda rows: len(rows))
        return _per_day(visits, lambda rows: sum(row["traffic_source"] == traffic_source for row in rows))

    def analytics_get_average_session_duration(
        self, time_min: str | None = None, time_max: str | None = None
    ) -> Any:
        def mean(rows: list[Row]) -> float:
            return sum(float(row["session_duration_seconds"]) for row in rows) / len(rows)

        return _per_day(self._visits(time_min, time_max), mean)

    # ----- project management -----

    def _team(self) -> set[str]:
        return {row["assigned_to_email"].lower() for row in self.project_tasks if row["assigned_to_email"]}

    def project_management_get_task_information_by_id(
        self, task_id: str | None = None, field: str | None = None
    ) -> Any:
        return self._get_field("project_tasks", "Task", task_id, field)

    def project_management_search_tasks(
        self,
        task_name: str | None = None,
        assigned_to_email: str | None = None,
        list_name: str | None = None,
        due_date: str | None = None,
        board: str | None = None,
    ) -> Any:
        filters = {
            "task_name": task_name,
            "assigned_to_email": assigned_to_email,
            "list_name": list_name,
            "due_date": due_date,
            "board": board,
        }
        if not any(filters.values()):
            return "No search parameters provided."
        return _matching(self.project_tasks, filters)

    def project_management_create_task(
        self,
        task_name: str | None = None,
        assigned_to_email: str | None = None,
        list_name: str | None = None,
        due_date: str | None = None,
        board: str | None = None,
    ) -> str:
        if not all([task_name, assigned_to_email, list_name, due_date, board]):
            return "Missing task details."
        assigned_to_email = assigned_to_email.lower()
        if assigned_to_email not in self._team():
            return ASSIGNEE_ERROR
        if list_name not in LISTS:
            return LIST_ERROR
        if board not in BOARDS:
            return BOARD_ERROR
        task_id = _next_id(self.project_tasks, "task_id")
        values = (task_id, task_name, assigned_to_email, list_name, due_date, board)
        self._append("project_tasks", TASK_COLUMNS, values)
        return task_id

    def project_management_delete_task(self, task_id: str | None = None) -> str:
        return self._delete("project_tasks", "Task", task_id)

    def project_management_update_task(
        self, task_id: str | None = None, field: str | None = None, new_value: str | None = None
    ) -> str:
        return self._update(
            "project_tasks",
            "Task",
            task_id,
            field,
            new_value,
            lowered=("assigned_to_email",),
            choices=(
                ("board", BOARDS, BOARD_ERROR),
                ("list_name", LISTS, LIST_ERROR),
                ("assigned_to_email", self._team(), ASSIGNEE_ERROR),
            ),
            columns=TASK_COLUMNS,
            field_error="Field not valid.",
        )

    # ----- customer relationship manager -----

    def customer_relationship_manager_search_customers(
        self,
        customer_name: str | None = None,
        customer_email: str | None = None,
        product_interest: str | None = None,
        status: str | None = None,
        assigned_to_email: str | None = None,
        last_contact_date_min: str | None = None,
        last_contact_date_max: str | None = None,
        follow_up_by_min: str | None = None,
        follow_up_by_max: str | None = None,
        page: int | None = None,
        page_size: int | None = None,
    ) -> Any:
        contains = {
            "customer_name": customer_name,
            "customer_email": customer_email,
            "product_interest": product_interest,
            "status": status,
            "assigned_to_email": assigned_to_email,
        }
        bounds = (
            ("last_contact_date", last_contact_date_min, last_contact_date_max),
            ("follow_up_by", follow_up_by_min, follow_up_by_max),
        )
        if not any(contains.values()) and not any(low or high for _, low, high in bounds):
            return "No search parameters provided. Please provide at least one parameter."
        found = _matching(self.crm, contains)
        for column, low, high in bounds:
            found = _between(found, column, low, high)
        return _paginate(found, "customers", page, page_size)

    def customer_relationship_manager_update_customer(
        self, customer_id: str | None = None, field: str | None = None, new_value: str | None = None
    ) -> str:
        return self._update(
            "crm",
            "Customer",
            customer_id,
            field,
            new_value,
            lowered=("customer_email", "assigned_to_email"),
            choices=(("status", STATUSES, STATUS_ERROR), ("product_interest", PRODUCTS, PRODUCT_ERROR)),
            columns=CRM_COLUMNS,
            field_error=CRM_FIELD_ERROR,
        )

    def customer_relationship_manager_add_customer(
        self,
        customer_name: str | None = None,
        assigned_to_email: str | None = None,
        status: str | None = None,
        customer_email: str | None = None,
        customer_phone: str | None = None,
        last_contact_date: str | None = None,
        product_interest: str | None = None,
        notes: str = "",
        follow_up_by: str | None = None,
    ) -> str:
        if not all([customer_name, assigned_to_email, status]):
            return "Please provide all required fields: customer_name, assigned_to_email, status."
        customer_id = _next_id(self.crm, "customer_id")
        self.crm.append(
            {
                "customer_id": customer_id,
                "assigned_to_email": assigned_to_email.lower(),
                "customer_name": customer_name,
                "customer_email": customer_email.lower() if customer_email else customer_email,
                "customer_phone": customer_phone,
                "last_contact_date": last_contact_date,
                "product_interest": product_interest,
                "status": status,
                "follow_up_by": follow_up_by,
                "notes": notes,
            }
        )
        return customer_id

    def customer_relationship_manager_delete_customer(self, customer_id: str | None = None) -> str:
        return self._delete("crm", "Customer", customer_id)


TOOL_NAMES = frozenset(
    name
    for name in vars(Workspace)
    if name.startswith(
        ("company_directory_", "email_", "calendar_", "analytics_", "project_management_", "customer_")
    )
)


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.strip())


def _replace(rows: list[Row], id_column: str, row_id: str, field: str, value: Any) -> list[Row]:
    """A new table in which the matching rows are new dicts with `field` set (shared rows stay untouched)."""
    return [{**row, field: value} if row[id_column] == row_id else row for row in rows]


def _per_day(rows: list[Row], measure: Callable[[list[Row]], Any]) -> dict[str, Any]:
    days: dict[str, list[Row]] = {}
    for row in rows:
        days.setdefault(row["date_of_visit"], []).append(row)
    return {day: measure(days[day]) for day in sorted(days)}


def _normalise(column: str, value: Any) -> Any:
    if isinstance(value, str) and column not in CASE_SENSITIVE_COLUMNS:
        return value.lower()
    return value


def parse_calls(calls: Iterable[tuple[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(name, arguments) with arguments a JSON object string or a dict; unparsable calls are dropped."""
    parsed = []
    for name, arguments in calls:
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError:
                continue
        if isinstance(arguments, dict):
            parsed.append((name, arguments))
    return parsed


def final_state(calls: Iterable[tuple[str, Any]]) -> dict[str, list[tuple[Any, ...]]]:
    """Replay `calls` on a fresh workspace; a call that fails (unknown tool, bad arguments) is skipped."""
    workspace = Workspace()
    for name, arguments in parse_calls(calls):
        try:
            workspace.call(name, arguments)
        except TimeoutError:
            raise  # the CPU pool's deadline, not a failing tool call
        except Exception:
            continue
    return workspace.comparable_state()


def replay_reward(predicted: list[tuple[str, Any]], expected: list[tuple[str, Any]]) -> float:
    """1.0 iff the predicted calls leave the office in the same state as the ground-truth calls."""
    return 1.0 if final_state(predicted) == final_state(expected) else 0.0
