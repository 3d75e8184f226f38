"""Writes data/example.jsonl: the five example tasks, each with the folder's tool list (world.tool_schemas),
so the rows' tools never drift from what the server runs. Run from the repository root:

    PYTHONPATH=. python resources_servers/toolsandbox/data/make_example.py
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from resources_servers.toolsandbox.world import tool_schemas

AGENT_PROMPT = (
    "You are a phone assistant with tools for the user's contacts, text messages, reminders and device "
    "settings. Use the tools to do what the user asks. If a request is ambiguous or information is missing, "
    "ask the user instead of guessing. Reply to the user in plain text when you are done or need input."
)
NOON_JAN_1 = 1_767_268_800.0  # 2026-01-01 12:00 UTC
AGENT_REF = {"type": "responses_api_agents", "name": "toolsandbox_agent"}
CONTACTS = [
    {
        "person_id": "person_maya",
        "name": "Maya Chen",
        "phone_number": "+14155550142",
        "relationship": "friend",
    },
    {
        "person_id": "person_tom",
        "name": "Tom Reyes",
        "phone_number": "+14155550177",
        "relationship": "brother",
    },
    {
        "person_id": "person_priya",
        "name": "Priya Nair",
        "phone_number": "+12125550199",
        "relationship": "coworker",
    },
    {
        "person_id": "person_gus_h",
        "name": "Gus Hale",
        "phone_number": "+13105550110",
        "relationship": "plumber",
    },
    {
        "person_id": "person_gus_r",
        "name": "Gus Ramirez",
        "phone_number": "+13105550123",
        "relationship": "friend",
    },
]


def trace(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"kind": "tool_trace", "tool_name": tool, "arguments": arguments}


TASKS: list[dict[str, Any]] = [
    {
        "scenario": "send_message_by_name",
        "opening": "Text Maya that I'm running 10 minutes late.",
        "user_notes": "You are the phone's owner. You want Maya Chen to get a text saying you are running 10 "
        "minutes late. Once the assistant confirms it was sent, thank it and stop.",
        "milestones": [
            {
                "constraints": [
                    {
                        "kind": "addition",
                        "database": "messaging",
                        "rows": [
                            {
                                "recipient_phone_number": "+14155550142",
                                "content": "I'm running 10 minutes late",
                            }
                        ],
                        "columns": {"content": "rouge_l"},
                    }
                ]
            }
        ],
        "minefields": [
            {"constraints": [trace("send_message_with_phone_number", phone_number="+14155550177")]}
        ],
    },
    {
        "scenario": "message_needs_cellular",
        "opening": "Send my brother Tom a text: Happy birthday, have a great day!",
        "initial_state": {"setting": {"cellular": False}},
        "user_notes": "You are the phone's owner. You want your brother Tom Reyes to get the text 'Happy "
        "birthday, have a great day!'. If the assistant asks, you agree to turning cellular service on. "
        "Once it is sent, stop.",
        "milestones": [
            {"constraints": [{"kind": "state", "database": "setting", "rows": [{"cellular": True}]}]},
            {
                "constraints": [
                    {
                        "kind": "addition",
                        "database": "messaging",
                        "rows": [
                            {
                                "recipient_phone_number": "+14155550177",
                                "content": "Happy birthday, have a great day!",
                            }
                        ],
                        "columns": {"content": "rouge_l"},
                    }
                ]
            },
        ],
    },
    {
        "scenario": "reminder_tomorrow_morning",
        "opening": "Remind me to call the dentist tomorrow at 9am.",
        "user_notes": "You are the phone's owner, in the UTC time zone. You want a reminder to call the "
        "dentist tomorrow at 9:00 in the morning. Once it is set, stop.",
        "milestones": [
            {"constraints": [trace("get_current_timestamp")]},
            {
                "constraints": [
                    {
                        "kind": "addition",
                        "database": "reminder",
                        "rows": [
                            {"content": "Call the dentist", "reminder_timestamp": NOON_JAN_1 + 75_600.0}
                        ],
                        "columns": {"content": "rouge_l", "reminder_timestamp": "close"},
                        "atol": {"reminder_timestamp": 60.0},
                    }
                ]
            },
        ],
    },
    {
        "scenario": "look_up_phone_number",
        "opening": "What's Priya's phone number?",
        "user_notes": "You are the phone's owner. You only want to know Priya Nair's phone number; do not ask "
        "for anything else. Once you have it, stop.",
        "milestones": [
            {"constraints": [{"kind": "agent_reply", "text": "+12125550199", "measure": "contains"}]}
        ],
        "minefields": [
            {"constraints": [trace("send_message_with_phone_number", phone_number="+12125550199")]}
        ],
    },
    {
        "scenario": "remove_the_plumber",
        "opening": "Delete Gus the plumber from my contacts, I don't need him anymore.",
        "user_notes": "You are the phone's owner. You want the contact of Gus Hale, your old plumber, deleted; "
        "Gus Ramirez is a friend and must stay. Once it is done, stop.",
        "milestones": [
            {
                "constraints": [
                    {"kind": "removal", "database": "contact", "rows": [{"person_id": "person_gus_h"}]}
                ]
            }
        ],
        "minefields": [{"constraints": [trace("remove_contact", person_id="person_gus_r")]}],
    },
]


def rows() -> list[dict[str, Any]]:
    tools = tool_schemas()
    result = []
    for index, task in enumerate(TASKS):
        state = {"contact": CONTACTS, **task.get("initial_state", {})}
        result.append(
            {
                "responses_create_params": {
                    "input": [
                        {"role": "system", "content": AGENT_PROMPT},
                        {"role": "user", "content": task["opening"]},
                    ],
                    "tools": tools,
                },
                "task_idx": index,
                "scenario": task["scenario"],
                "user_notes": task["user_notes"],
                "initial_state": state,
                "current_time": NOON_JAN_1,
                "milestones": task["milestones"],
                "minefields": task.get("minefields", []),
                "max_messages": 30,
                "agent_ref": AGENT_REF,
            }
        )
    return result


if __name__ == "__main__":
    path = Path(__file__).with_name("example.jsonl")
    path.write_text("".join(json.dumps(row) + "\n" for row in rows()))
    print(f"wrote {path}")
