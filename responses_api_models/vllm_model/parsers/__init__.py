"""vLLM's reasoning and tool-call parsers, by the names vLLM gives them (see base.py for why)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from responses_api_models.vllm_model.parsers import (
    json_formats,
    reasoning,
    special_token_formats,
    xml_formats,
)
from responses_api_models.vllm_model.parsers.base import (
    ExtractedToolCalls,
    ParsedCall,
    ReasoningParser,
    ToolCallParser,
    Tools,
    UnknownParserError,
    lookup,
    new_call_id,
)

TOOL_CALL_PARSERS = {**json_formats.PARSERS, **xml_formats.PARSERS, **special_token_formats.PARSERS}
REASONING_PARSERS = {**reasoning.PARSERS, **special_token_formats.REASONING_PARSERS}


def tool_call_parser(name: str) -> ToolCallParser:
    return lookup("tool_call_parser", TOOL_CALL_PARSERS, name)


def reasoning_parser(name: str) -> ReasoningParser:
    return lookup("reasoning_parser", REASONING_PARSERS, name)


@dataclass(frozen=True)
class OutputParsers:
    """The parsers a vLLM server runs on each generation: reasoning first (when it has one), then tool
    calls on the content left, only when the request offers tools and lets the model choose."""

    tool_calls: ToolCallParser
    reasoning: ReasoningParser | None = None

    @classmethod
    def named(cls, tool_call_parser_name: str, reasoning_parser_name: str | None) -> OutputParsers:
        """The parsers vLLM's `--tool-call-parser` / `--reasoning-parser` name (UnknownParserError)."""
        reasoning_parser_used = reasoning_parser(reasoning_parser_name) if reasoning_parser_name else None
        return cls(tool_call_parser(tool_call_parser_name), reasoning_parser_used)

    def keeps_special_tokens(self, tools: Tools | None, tool_choice: Any = None) -> bool:
        """Whether vLLM would keep special tokens in the text of this request's generation: for a tool
        parser that reads them, and always for a reasoning format made of them (gpt-oss harmony)."""
        if self.reasoning is not None and self.reasoning.keeps_special_tokens:
            return True
        return bool(tools) and _lets_model_choose(tool_choice) and self.tool_calls.keeps_special_tokens

    def message(
        self,
        text: str,
        tools: Tools | None,
        tool_choice: Any = None,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The assistant message vLLM's chat endpoint makes of a generated text. Some reasoning parsers
        read the request's `chat_template_kwargs` (qwen3's `enable_thinking`), as vLLM's do."""
        reasoning, content = (
            self.reasoning.for_request(template_kwargs or {}).extract(text)
            if self.reasoning
            else (None, text)
        )
        calls: list[ParsedCall] = []
        forced = forced_calls(content, tools, tool_choice)
        if forced is not None:
            content, calls = "", forced
        elif tools and _lets_model_choose(tool_choice):
            extracted = self.tool_calls.extract(content or "", tools)
            calls = extracted.calls
            # With calls, vLLM takes the parser's content as is; without, only when it is not empty.
            if calls or extracted.content:
                content = extracted.content
        return {
            "role": "assistant",
            "content": content,
            "reasoning_content": reasoning,
            "tool_calls": [
                {
                    "id": call.call_id or new_call_id(),
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in calls
            ],
        }


def forced_calls(content: str | None, tools: Tools | None, tool_choice: Any) -> list[ParsedCall] | None:
    """The calls of a generation decoded under a required or named tool choice (JSON, constrained by
    `structured.tool_choice_schema`), or None when the choice forces nothing. Named: the whole text is
    the arguments. Required: a JSON list of {name, parameters}; one vLLM cannot validate gives no calls."""
    if not tools:
        return None
    if isinstance(tool_choice, Mapping):
        return [ParsedCall(str(tool_choice.get("function", {}).get("name")), content or "")]
    if tool_choice != "required":
        return None
    try:
        listed = orjson.loads(content or "")
    except orjson.JSONDecodeError:
        return []
    if not isinstance(listed, list) or not all(
        isinstance(call, dict)
        and isinstance(call.get("name"), str)
        and isinstance(call.get("parameters"), dict)
        for call in listed
    ):
        return []
    return [ParsedCall(call["name"], json.dumps(call["parameters"], ensure_ascii=False)) for call in listed]


def _lets_model_choose(tool_choice: Any) -> bool:
    """vLLM runs the tool-call parser for `auto` (the default); `none` means plain text, and a required
    or named choice is decoded as JSON instead."""
    if isinstance(tool_choice, Mapping):
        return False
    return tool_choice in (None, "auto")


__all__ = [
    "REASONING_PARSERS",
    "TOOL_CALL_PARSERS",
    "ExtractedToolCalls",
    "OutputParsers",
    "ParsedCall",
    "ReasoningParser",
    "ToolCallParser",
    "Tools",
    "UnknownParserError",
    "reasoning_parser",
    "tool_call_parser",
]
