"""The simulated user of gymnasium_agent's user-simulator mode: what a second model sees when it plays the
user, and when it has ended the conversation.

The user model is shown, as one system message, the configured prompt followed by the environment's
observations ("notes": a persona, a goal, what to ask next; hidden from the policy), then the conversation
from the user's side: the policy's words as `user` messages and its own earlier words as `assistant`
messages. A reply containing the stop marker ends the episode.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DEFAULT_STOP_MARKER = "###STOP###"
DEFAULT_USER_SYSTEM_PROMPT = (
    "You are playing the user in a conversation with an AI assistant. Write only the user's next message, "
    "in plain text, as that user would write it. Private notes from the environment below tell you who you "
    "are, what you want or what to ask next: follow the latest one and never mention the notes. When your "
    "goal is reached, or you have nothing left to ask, end the conversation by writing {stop_marker}."
)
NOTES_HEADER = "Private notes from the environment (the assistant cannot see them), oldest first:"
OPENING_CUE = "(The conversation has not started yet. Write your first message to the assistant.)"
FLIPPED_ROLES = {"user": "assistant", "assistant": "user"}
TEXT_PART_TYPES = ("input_text", "output_text")


@dataclass
class SimulatedUser:
    system_prompt: str
    stop_marker: str
    notes: list[str] = field(default_factory=list)
    conversation: list[dict[str, str]] = field(default_factory=list)
    cookies: dict[str, str] = field(default_factory=dict)
    calls: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def joining(
        cls, prompt: list[dict[str, Any]], system_prompt: str, stop_marker: str, cookies: dict[str, str]
    ) -> SimulatedUser:
        """A user who takes over the conversation the task's prompt has begun (its user and assistant
        messages, seen from the other side; the policy's system messages are not the user's business)."""
        user = cls(system_prompt.replace("{stop_marker}", stop_marker), stop_marker, cookies=dict(cookies))
        for item in prompt:
            role, text = FLIPPED_ROLES.get(item.get("role", "")), message_text(item)
            if item.get("type", "message") == "message" and role and text is not None:
                user.conversation.append({"role": role, "content": text})
        return user

    def note(self, observation: str | None) -> None:
        if observation:
            self.notes.append(observation)

    def heard(self, text: str) -> None:
        self.conversation.append({"role": "user", "content": text})

    def said(self, text: str) -> None:
        self.conversation.append({"role": "assistant", "content": text})

    def called(self, params: dict[str, Any], response: dict[str, Any]) -> None:
        """Keep one user-model call, request and answer: the rollout carries them so a replay can play the
        user's side too."""
        self.calls.append({"responses_create_params": params, "response": response})

    def stops(self, text: str) -> bool:
        return self.stop_marker in text

    def model_input(self) -> list[dict[str, str]]:
        """The user model's input for its next message."""
        system = self.system_prompt
        if self.notes:
            system += (
                "\n\n" + NOTES_HEADER + "".join(f"\n{n}. {note}" for n, note in enumerate(self.notes, 1))
            )
        opening = [] if self.conversation else [{"role": "user", "content": OPENING_CUE}]
        return [{"role": "system", "content": system}, *self.conversation, *opening]


def assistant_text(output: list[dict[str, Any]]) -> str:
    """What a model reply said to the user: the text of its assistant messages, joined."""
    return "".join(
        message_text(item) or ""
        for item in output
        if item.get("type", "message") == "message" and item.get("role") == "assistant"
    )


def message_text(item: dict[str, Any]) -> str | None:
    """The text of a message item (string content, or its text parts joined); None when it has none."""
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            part["text"]
            for part in content
            if isinstance(part, dict)
            and part.get("type") in TEXT_PART_TYPES
            and isinstance(part.get("text"), str)
        ]
        return "".join(texts) if texts else None
    return None
