"""What every output parser returns, and the registry that names them as vLLM does.

vLLM's chat endpoint turns a generation into a message with two plug-ins chosen at launch:
a reasoning parser (`--reasoning-parser`) then a tool-call parser (`--tool-call-parser`) on what is left.
A token-in/token-out turn bypasses that endpoint, so this package parses the same text the same way:
the message a continued turn produces must equal the one vLLM would have produced.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

# Chat-format tool definitions: {"type": "function", "function": {"name", "parameters", ...}}.
Tools = Sequence[Mapping[str, Any]]


class UnknownParserError(ValueError):
    """A parser name vLLM would not accept either; the message lists the names known here."""


@dataclass(frozen=True)
class ParsedCall:
    """One tool call: the name and the arguments as the JSON text vLLM's parser writes."""

    name: str
    arguments: str
    call_id: str | None = None  # set only by formats whose text carries an id (kimi_k2)


@dataclass(frozen=True)
class ExtractedToolCalls:
    """What a tool-call parser leaves: the content (None when vLLM returns none) and the calls."""

    content: str | None
    calls: list[ParsedCall] = field(default_factory=list)


class ToolCallParser(Protocol):
    # vLLM keeps special tokens in the generated text for this parser when the request has tools,
    # because its markers are special tokens; a continued turn must ask `/v1/completions` for the same.
    keeps_special_tokens: bool

    def extract(self, text: str, tools: Tools | None) -> ExtractedToolCalls: ...


class ReasoningParser(Protocol):
    # vLLM keeps special tokens in every generation's text for this parser (its format is made of them).
    keeps_special_tokens: bool

    def for_request(self, template_kwargs: Mapping[str, Any]) -> ReasoningParser:
        """The parser as a request configures it (vLLM's read switches such as `enable_thinking`)."""
        ...

    def extract(self, text: str) -> tuple[str | None, str | None]:
        """(reasoning, content) as vLLM's parser returns them; None where it returns none."""
        ...


class ReasoningParserDefaults:
    """What most reasoning parsers are: no special tokens needed, and no request switch read (a parser
    that reads one overrides `for_request`)."""

    keeps_special_tokens = False

    def for_request(self, template_kwargs: Mapping[str, Any]) -> ReasoningParser:
        return self


def new_call_id() -> str:
    return f"chatcmpl-tool-{uuid.uuid4().hex}"


def lookup(kind: str, registry: Mapping[str, Callable[[], Any]], name: str) -> Any:
    try:
        factory = registry[name]
    except KeyError:
        known = ", ".join(sorted(registry))
        raise UnknownParserError(f"unknown {kind} {name!r}; known: {known}") from None
    return factory()
