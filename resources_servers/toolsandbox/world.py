"""The sandbox world of one episode: four small tables (contact, messaging, reminder, setting) and the tools
that read and change them.

Every tool is a plain function of the world and its keyword arguments; a call the world refuses (unknown
person, cellular service off, wrong argument type) raises `ToolError`, whose text becomes the tool output, so
the model can recover instead of the server crashing. The clock is fixed per task (`current_time`), which
keeps timestamps, and with them the grading, reproducible.
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

TABLES = ("contact", "messaging", "reminder", "setting")
SETTING_FIELDS = ("cellular", "wifi", "location_service", "low_battery_mode")


class ToolError(Exception):
    """A tool call the world refuses; its message is what the model reads."""


@dataclass
class World:
    tables: dict[str, list[dict[str, Any]]]
    now: float
    next_id: int = 1

    @classmethod
    def from_row(cls, initial_state: dict[str, Any], now: float) -> World:
        tables: dict[str, list[dict[str, Any]]] = {name: [] for name in TABLES}
        for name in ("contact", "messaging", "reminder"):
            tables[name] = [dict(row) for row in initial_state.get(name, [])]
        settings = {"cellular": True, "wifi": True, "location_service": True, "low_battery_mode": False}
        settings.update(initial_state.get("setting", {}))
        tables["setting"] = [settings]
        return cls(tables=tables, now=now)

    def snapshot(self) -> dict[str, list[dict[str, Any]]]:
        return copy.deepcopy(self.tables)

    def fresh_id(self, prefix: str) -> str:
        self.next_id += 1
        return f"{prefix}_{self.next_id:04d}"

    @property
    def settings(self) -> dict[str, Any]:
        return self.tables["setting"][0]


# ---- tools ------------------------------------------------------------------------------------------------


def _matches(row: dict[str, Any], **wanted: Any) -> bool:
    return all(
        value is None or str(value).lower() in str(row.get(key, "")).lower() for key, value in wanted.items()
    )


def search_contacts(
    world: World, name: str | None = None, phone_number: str | None = None, relationship: str | None = None
) -> list[dict[str, Any]]:
    """Find contacts whose name, phone number or relationship contains the given text (any left out matches)."""
    return [
        row
        for row in world.tables["contact"]
        if _matches(row, name=name, phone_number=phone_number, relationship=relationship)
    ]


def add_contact(world: World, name: str, phone_number: str, relationship: str | None = None) -> str:
    """Add a person to the contacts; answers the new person_id."""
    person_id = world.fresh_id("person")
    world.tables["contact"].append(
        {"person_id": person_id, "name": name, "phone_number": phone_number, "relationship": relationship}
    )
    return person_id


def modify_contact(
    world: World,
    person_id: str,
    name: str | None = None,
    phone_number: str | None = None,
    relationship: str | None = None,
) -> str:
    """Change a contact's name, phone number or relationship (only the fields given)."""
    row = _row_by(world, "contact", "person_id", person_id)
    for key, value in (("name", name), ("phone_number", phone_number), ("relationship", relationship)):
        if value is not None:
            row[key] = value
    return "ok"


def remove_contact(world: World, person_id: str) -> str:
    """Delete a contact by person_id."""
    world.tables["contact"].remove(_row_by(world, "contact", "person_id", person_id))
    return "ok"


def send_message_with_phone_number(world: World, phone_number: str, content: str) -> str:
    """Send a text message to a phone number; needs cellular service on. Answers the message_id."""
    if not world.settings["cellular"]:
        raise ToolError("cannot send: cellular service is turned off")
    message_id = world.fresh_id("message")
    world.tables["messaging"].append(
        {
            "message_id": message_id,
            "sender_phone_number": "self",
            "recipient_phone_number": phone_number,
            "content": content,
            "creation_timestamp": world.now,
        }
    )
    return message_id


def search_messages(
    world: World, phone_number: str | None = None, content: str | None = None
) -> list[dict[str, Any]]:
    """Find messages sent to or from a phone number and/or containing some text."""
    return [
        row
        for row in world.tables["messaging"]
        if _matches(row, content=content)
        and (
            phone_number is None
            or phone_number in (row["sender_phone_number"], row["recipient_phone_number"])
        )
    ]


def add_reminder(world: World, content: str, reminder_timestamp: float) -> str:
    """Create a reminder that fires at `reminder_timestamp` (POSIX seconds). Answers the reminder_id."""
    reminder_id = world.fresh_id("reminder")
    world.tables["reminder"].append(
        {
            "reminder_id": reminder_id,
            "content": content,
            "creation_timestamp": world.now,
            "reminder_timestamp": float(reminder_timestamp),
        }
    )
    return reminder_id


def search_reminder(world: World, content: str | None = None) -> list[dict[str, Any]]:
    """Find reminders whose text contains `content` (all of them when left out)."""
    return [row for row in world.tables["reminder"] if _matches(row, content=content)]


def remove_reminder(world: World, reminder_id: str) -> str:
    """Delete a reminder by reminder_id."""
    world.tables["reminder"].remove(_row_by(world, "reminder", "reminder_id", reminder_id))
    return "ok"


def get_current_timestamp(world: World) -> float:
    """The current time as POSIX seconds."""
    return world.now


def get_device_settings(world: World) -> dict[str, Any]:
    """Whether cellular, wifi, location service and low battery mode are on."""
    return dict(world.settings)


def set_device_setting(world: World, setting: str, on: bool) -> str:
    """Turn one of cellular, wifi, location_service, low_battery_mode on or off. While low battery mode is on,
    wifi and cellular cannot be turned on."""
    if setting not in SETTING_FIELDS:
        raise ToolError(f"unknown setting {setting!r}; one of {', '.join(SETTING_FIELDS)}")
    if on and setting in ("wifi", "cellular") and world.settings["low_battery_mode"]:
        raise ToolError(f"cannot turn {setting} on while low battery mode is on")
    world.settings[setting] = on
    return "ok"


def _row_by(world: World, table: str, key: str, value: str) -> dict[str, Any]:
    for row in world.tables[table]:
        if row.get(key) == value:
            return row
    raise ToolError(f"no {table} entry with {key} {value!r}")


TOOLS: dict[str, Callable[..., Any]] = {
    tool.__name__: tool
    for tool in (
        search_contacts,
        add_contact,
        modify_contact,
        remove_contact,
        send_message_with_phone_number,
        search_messages,
        add_reminder,
        search_reminder,
        remove_reminder,
        get_current_timestamp,
        get_device_settings,
        set_device_setting,
    )
}
JSON_TYPES = {str: "string", float: "number", bool: "boolean"}


def _parameter_type(annotation: str) -> tuple[type, bool]:
    """(python type, required) of an annotation written as a string (`from __future__ import annotations`)."""
    optional = "None" in annotation
    base = annotation.split("|")[0].strip()
    return {"str": str, "float": float, "bool": bool}[base], not optional


def tool_schemas() -> list[dict[str, Any]]:
    """The tools as Responses-API function tools (what a task row lists in `responses_create_params.tools`)."""
    schemas = []
    for name, tool in TOOLS.items():
        properties, required = {}, []
        for parameter in list(inspect.signature(tool).parameters.values())[1:]:
            kind, needed = _parameter_type(parameter.annotation)
            properties[parameter.name] = {"type": JSON_TYPES[kind]}
            if needed:
                required.append(parameter.name)
        schemas.append(
            {
                "type": "function",
                "name": name,
                "description": " ".join((tool.__doc__ or "").split()),
                "parameters": {"type": "object", "properties": properties, "required": required},
                "strict": False,
            }
        )
    return schemas


@dataclass
class CallResult:
    output: str
    trace: dict[str, Any] | None = None  # {"tool_name", "arguments"} of a call that ran
    error: bool = False
    changed: bool = field(default=False)


def call_tool(world: World, name: str, raw_arguments: str) -> CallResult:
    """Run one model tool call. Unknown tools, arguments that are not a JSON object, missing or mistyped
    arguments and refusals all answer an error text; the world is left as it was when a call fails."""
    tool = TOOLS.get(name)
    if tool is None:
        return CallResult(f"Error: unknown tool {name!r}; available: {', '.join(TOOLS)}", error=True)
    try:
        arguments = json.loads(raw_arguments or "{}")
    except json.JSONDecodeError as error:
        return CallResult(f"Error: the arguments of {name} are not valid JSON ({error.msg})", error=True)
    if not isinstance(arguments, dict):
        return CallResult(f"Error: the arguments of {name} must be a JSON object", error=True)
    try:
        checked = _checked_arguments(tool, arguments)
        before = world.snapshot()
        result = tool(world, **checked)
    except ToolError as error:
        return CallResult(f"Error: {error}", error=True)
    changed = world.tables != before
    return CallResult(
        json.dumps(result, sort_keys=True), trace={"tool_name": name, "arguments": checked}, changed=changed
    )


def _checked_arguments(tool: Callable[..., Any], arguments: dict[str, Any]) -> dict[str, Any]:
    parameters = {p.name: p for p in list(inspect.signature(tool).parameters.values())[1:]}
    unknown = sorted(set(arguments) - set(parameters))
    if unknown:
        raise ToolError(f"unexpected argument(s) {', '.join(unknown)}; accepted: {', '.join(parameters)}")
    checked: dict[str, Any] = {}
    for parameter in parameters.values():
        kind, needed = _parameter_type(parameter.annotation)
        value = arguments.get(parameter.name)
        if value is None:
            if needed:
                raise ToolError(f"missing required argument {parameter.name!r}")
            continue
        if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            raise ToolError(f"argument {parameter.name!r} must be a {JSON_TYPES[kind]}, got {value!r}")
        checked[parameter.name] = value
    return checked
