"""Tool-call formats framed by dedicated marker tokens: DeepSeek V3 / V3.1, Kimi K2, GLM-4.5, Granite 3
and gpt-oss (harmony channels), parsed as vLLM 0.23.0's chat endpoint parses them (non-streaming).

Each parser reproduces what the chat endpoint returns for the same text, so a turn continued through
`/v1/completions` reads back into the same message. Where vLLM's endpoint post-processes its parser's
result the same way for every request (content that is only whitespace becomes None once the parser
reports calls), that step is folded in here, because it decides the message the caller sees.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from responses_api_models.vllm_model.parsers.base import (
    ExtractedToolCalls,
    ParsedCall,
    ReasoningParser,
    ReasoningParserDefaults,
    ToolCallParser,
    Tools,
)


def _text_before(text: str, marker: str) -> str | None:
    """The text ahead of the first `marker`; vLLM reports an empty one as no content."""
    return text[: text.find(marker)] or None


def _called(content: str | None, calls: list[ParsedCall]) -> ExtractedToolCalls:
    """The endpoint's result once a parser says it found calls: whitespace alone is no content."""
    if content is not None and not content.strip():
        content = None
    return ExtractedToolCalls(content, calls)


def _not_called(text: str) -> ExtractedToolCalls:
    return ExtractedToolCalls(text, [])


# --------------------------------------------------------------------------------------- DeepSeek

_DS_CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
_DS_CALL_BEGIN = "<｜tool▁call▁begin｜>"
_DS_CALL_END = "<｜tool▁call▁end｜>"
_DS_SEP = "<｜tool▁sep｜>"

# V3: `<call begin>{type}<sep>{name}\n```json\n{args}\n```<call end>`, every field on one line.
_DS_V3_CALL = re.compile(
    re.escape(_DS_CALL_BEGIN)
    + r"(?P<kind>[^\n]*)"
    + re.escape(_DS_SEP)
    + r"(?P<name>[^\n]*)\n```json\n(?P<args>[^\n]*)\n```"
    + re.escape(_DS_CALL_END)
)
# V3.1: `<call begin>{name}<sep>{args}<call end>`, shortest fields, none crossing a line break.
_DS_V31_CALL = re.compile(
    re.escape(_DS_CALL_BEGIN)
    + r"(?P<name>[^\n]*?)"
    + re.escape(_DS_SEP)
    + r"(?P<args>[^\n]*?)"
    + re.escape(_DS_CALL_END)
)


class DeepSeekV3Parser:
    """`deepseek_v3`: its markers are plain added tokens, so vLLM decodes them with the default
    skip_special_tokens and never asks to keep special tokens."""

    keeps_special_tokens = False

    def extract(self, text: str, tools: Tools | None) -> ExtractedToolCalls:
        if _DS_CALLS_BEGIN not in text:
            return _not_called(text)
        calls = []
        for match in _DS_V3_CALL.finditer(text):
            if match["kind"] != "function":
                return _not_called(text)  # vLLM's ToolCall only admits type "function"
            calls.append(ParsedCall(match["name"], match["args"]))
        # The section marker alone counts as calling tools, even when no call is well formed.
        return _called(_text_before(text, _DS_CALLS_BEGIN), calls)


class DeepSeekV31Parser:
    """`deepseek_v31`: same markers as V3, without the call type and the JSON fence."""

    keeps_special_tokens = False

    def extract(self, text: str, tools: Tools | None) -> ExtractedToolCalls:
        if _DS_CALLS_BEGIN not in text:
            return _not_called(text)
        calls = [ParsedCall(m["name"], m["args"]) for m in _DS_V31_CALL.finditer(text)]
        return _called(_text_before(text, _DS_CALLS_BEGIN), calls)


# ----------------------------------------------------------------------------------------- Kimi K2

_KIMI_SECTION_BEGIN = "<|tool_calls_section_begin|>"
_KIMI_CALL_BEGIN = re.escape("<|tool_call_begin|>")
# `<call begin>{id}<argument begin>{args}<call end>`, whitespace around each field ignored; the id ends
# in `:N`, and the arguments are the shortest text that does not run into another call.
_KIMI_CALL = re.compile(
    _KIMI_CALL_BEGIN
    + r"\s*(?P<call_id>[^<]+:\d+)\s*"
    + re.escape("<|tool_call_argument_begin|>")
    + rf"\s*(?P<args>(?:(?!{_KIMI_CALL_BEGIN}).)*?)\s*"
    + re.escape("<|tool_call_end|>"),
    re.DOTALL,
)


class KimiK2Parser:
    """`kimi_k2`: the call id (`functions.get_weather:0`) is written by the model and kept as the id."""

    keeps_special_tokens = True

    def extract(self, text: str, tools: Tools | None) -> ExtractedToolCalls:
        if _KIMI_SECTION_BEGIN not in text:
            return _not_called(text)
        calls = [
            ParsedCall(_kimi_function_name(m["call_id"]), m["args"], m["call_id"])
            for m in _KIMI_CALL.finditer(text)
        ]
        return _called(_text_before(text, _KIMI_SECTION_BEGIN), calls)


def _kimi_function_name(call_id: str) -> str:
    """`functions.get_weather:0` names `get_weather`: before the first colon, after the last dot."""
    return call_id.split(":")[0].split(".")[-1]


# ----------------------------------------------------------------------------------------- GLM-4.5

_GLM_OPEN, _GLM_CLOSE = "<tool_call>", "</tool_call>"
_GLM_BLOCK = re.compile(r"<tool_call>.*?</tool_call>", re.DOTALL)
_GLM_PAIR = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.DOTALL)


class Glm45Parser:
    """`glm45`: one `<tool_call>` block per call, the name on its first line and then key/value pairs.
    Values of string parameters are kept verbatim; others are read as JSON, then as a Python literal."""

    keeps_special_tokens = True

    def extract(self, text: str, tools: Tools | None) -> ExtractedToolCalls:
        calls = []
        try:
            for block in _GLM_BLOCK.findall(text):
                call = _glm_call(block[len(_GLM_OPEN) : -len(_GLM_CLOSE)], tools)
                if call is not None:
                    calls.append(call)
        except Exception:  # vLLM gives up on the whole text when any value cannot be serialised
            return _not_called(text)
        if not calls:
            return _not_called(text)
        return _called(_text_before(text, _GLM_OPEN), calls)


def _glm_call(inside: str, tools: Tools | None) -> ParsedCall | None:
    """One block's call; None when the name is not followed by a line break (vLLM skips it)."""
    name_line, newline, body = inside.partition("\n")
    if not newline:
        return None
    name = name_line.strip()
    arguments: dict[str, Any] = {}
    for raw_key, raw_value in _GLM_PAIR.findall(body):
        key = raw_key.strip()
        verbatim = _is_string_parameter(_parameters_of(tools, name).get(key))
        arguments[key] = raw_value if verbatim else _glm_value(raw_value.strip())
    return ParsedCall(name, json.dumps(arguments, ensure_ascii=False))


def _glm_value(text: str) -> Any:
    """JSON first, then a Python literal (`True`, `'x'`, `(1, 2)`), else the text itself."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _parameters_of(tools: Tools | None, name: str) -> Mapping[str, Any]:
    """The `properties` of the first offered tool called `name` ({} when none is)."""
    for tool in tools or ():
        function = tool.get("function", tool)
        if function.get("name") == name:
            return (function.get("parameters") or {}).get("properties", {})
    return {}


def _is_string_parameter(schema: Any) -> bool:
    """A declared parameter whose only possible type, null aside, is string."""
    return schema is not None and _schema_types(schema) - {"null"} == {"string"}


_ENUM_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (dict, "object"),
)


def _schema_types(schema: Any) -> set[str]:
    """Every type a JSON schema allows, from `type`, enum values and anyOf/oneOf/allOf; a schema
    that says nothing counts as string."""
    if not isinstance(schema, dict):
        return {"string"}
    found: set[str] = set()
    declared = schema.get("type")
    if isinstance(declared, str):
        found.add(declared)
    elif isinstance(declared, list):
        found.update(kind for kind in declared if isinstance(kind, str))
    enum = schema.get("enum")
    if isinstance(enum, list):
        found.update(kind for kind in map(_enum_value_type, enum) if kind)
    for combinator in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(combinator), list):
            for choice in schema[combinator]:
                found |= _schema_types(choice)
    return found or {"string"}


def _enum_value_type(value: Any) -> str | None:
    """The JSON type of one enum value (a bool is a boolean, not an integer)."""
    if value is None:
        return "null"
    return next((kind for python_type, kind in _ENUM_TYPES if isinstance(value, python_type)), None)


# ---------------------------------------------------------------------------------------- Granite

_GRANITE_TOKEN, _GRANITE_TAG = "<|tool_call|>", "<tool_call>"


class GraniteParser:
    """`granite`: the whole turn is one JSON list of {name, arguments}, after an optional marker.
    `<|tool_call|>` is a special token vLLM drops before parsing; text ahead of the list means no calls."""

    keeps_special_tokens = False

    def extract(self, text: str, tools: Tools | None) -> ExtractedToolCalls:
        body = text.strip().removeprefix(_GRANITE_TOKEN).removeprefix(_GRANITE_TAG).lstrip()
        if not body.startswith("["):
            return _not_called(text)
        try:
            listed = json.loads(body)
            if not isinstance(listed, list):
                return _not_called(text)
            calls = [_granite_call(entry) for entry in listed]
        except Exception:  # invalid JSON, a call without name or arguments: vLLM keeps the text
            return _not_called(text)
        return ExtractedToolCalls(None, calls)


def _granite_call(entry: Any) -> ParsedCall:
    name = entry["name"]
    if not isinstance(name, str):
        raise TypeError("a call name must be a string")
    return ParsedCall(name, json.dumps(entry["arguments"], ensure_ascii=False))


# ------------------------------------------------------------------------------- gpt-oss (harmony)

_H_START, _H_MESSAGE, _H_CHANNEL, _H_CONSTRAIN = "<|start|>", "<|message|>", "<|channel|>", "<|constrain|>"
_H_STOPS = ("<|end|>", "<|call|>", "<|return|>")
_H_ROLES = ("user", "assistant", "system", "developer", "tool")
_H_BUILTIN_TOOLS = ("python", "browser", "container")
_H_HEADER_SPLIT = re.compile(r"[ \t\n\r\x0c]+")  # ASCII whitespace only, as the harmony parser splits


class HarmonyError(ValueError):
    """Text openai_harmony would refuse to parse (vLLM then fails the request)."""


@dataclass(frozen=True)
class HarmonyMessage:
    role: str
    channel: str | None
    recipient: str | None
    content_type: str | None
    text: str


def parse_harmony(text: str) -> list[HarmonyMessage]:
    """The messages of a gpt-oss generation, read like openai_harmony's StreamableParser reads the
    tokens (strict mode, first role `assistant`). The stop token that ended the generation was removed
    from `text`, so a message still open at the end counts as complete. Parsing stops at the first
    malformed part, keeping the messages before it."""
    messages: list[HarmonyMessage] = []
    position, role = 0, "assistant"
    while position < len(text):
        if role is None:
            if not text.startswith(_H_START, position):
                break  # harmony expects <|start|> after a stop token
            position += len(_H_START)
        header_end = text.find(_H_MESSAGE, position)
        if header_end < 0:
            break  # the header never closed: no message
        try:
            header = _harmony_header(text[position:header_end], role)
        except HarmonyError:
            break
        body_start = header_end + len(_H_MESSAGE)
        body_end, stop_length = _next_stop(text, body_start)
        messages.append(HarmonyMessage(*header, text[body_start:body_end]))
        position, role = body_end + stop_length, None
    return messages


def _next_stop(text: str, start: int) -> tuple[int, int]:
    """Where the message body starting at `start` ends, and the length of the stop token there."""
    found = [(index, len(stop)) for stop in _H_STOPS if (index := text.find(stop, start)) >= 0]
    return min(found) if found else (len(text), 0)


def _harmony_header(header: str, role: str | None) -> tuple[str, str | None, str | None, str | None]:
    """(role, channel, recipient, content type) of a header such as
    `assistant<|channel|>commentary to=functions.f <|constrain|>json`."""
    channel = None
    marker = header.find(_H_CHANNEL)
    if marker >= 0:
        after = header[marker + len(_H_CHANNEL) :]
        length = next((i for i, char in enumerate(after) if char.isspace() or char == "<"), len(after))
        if length == 0:
            raise HarmonyError("a channel marker without a channel")
        channel = after[:length]
        header = header[:marker] + after[length:]
    header = header.strip()
    if _H_CONSTRAIN in header:
        header = header.replace(_H_CONSTRAIN, " " + _H_CONSTRAIN).strip()
    parts = [part for part in _H_HEADER_SPLIT.split(header) if part]
    if role is None:
        role = _harmony_role(parts)
    if parts and parts[0] == role:
        parts.pop(0)
    recipient, content_type = _recipient_and_type(parts)
    return role, channel, recipient, content_type


def _harmony_role(parts: list[str]) -> str:
    """The role a header names first; an unknown name before a recipient makes it a tool message."""
    if not parts:
        raise HarmonyError("a header without a role")
    if parts[0] in _H_ROLES:
        return parts[0]
    if len(parts) > 1 or parts[0].startswith("to="):
        parts.pop(0)
        return "tool"
    raise HarmonyError(f"unknown role {parts[0]!r}")


def _recipient_and_type(parts: list[str]) -> tuple[str | None, str | None]:
    """The last word is the recipient (`to=` or a lone unconstrained word) or the content type, with
    the recipient then before it; any word left over is an error."""
    if not parts:
        return None, None
    count, last = len(parts), parts.pop()
    recipient = content_type = None
    if last.startswith("to="):
        recipient = last.removeprefix("to=")
    elif count == 1 and not last.startswith(_H_CONSTRAIN):
        recipient = last
    else:
        content_type = last
        if parts:
            recipient = parts.pop().removeprefix("to=")
    if parts:
        raise HarmonyError(f"unexpected header words {parts!r}")
    return recipient, content_type


def _is_function_call(message: HarmonyMessage) -> bool:
    """An assistant message to a function: `functions.x`, or any bare name but the built-in tools."""
    recipient = message.recipient
    if message.role != "assistant" or not recipient or recipient.startswith("<|"):
        return False
    if recipient.startswith("functions."):
        return len(recipient) > len("functions.")
    return recipient != "assistant" and recipient.split(".", 1)[0] not in _H_BUILTIN_TOOLS


def _function_arguments(message: HarmonyMessage) -> str:
    """JSON bodies are re-serialised by vLLM (json.dumps defaults: ASCII escapes, `, ` and `: `);
    invalid JSON and other content types stay verbatim."""
    if message.content_type and "json" not in message.content_type:
        return message.text
    try:
        return json.dumps(json.loads(message.text))
    except json.JSONDecodeError:
        return message.text


def _visible_content(messages: list[HarmonyMessage]) -> str | None:
    """The last `final` message, else the last commentary without recipient (a preamble)."""
    final = commentary = None
    for message in messages:
        if message.role != "assistant" or _is_function_call(message):
            continue
        if message.channel == "final":
            final = message.text
        elif message.channel == "commentary" and not message.recipient:
            commentary = message.text
    return final or commentary


class HarmonyToolParser:
    """`openai`: vLLM reads gpt-oss tool calls from the harmony messages, not from text, so special
    tokens must stay in the text. Takes either a harmony text (from `GptOssReasoningParser`, when it
    holds calls) or the plain content that parser already picked."""

    keeps_special_tokens = True

    def extract(self, text: str, tools: Tools | None) -> ExtractedToolCalls:
        if _H_MESSAGE not in text:
            return ExtractedToolCalls(text or None, [])
        messages = parse_harmony(text)
        calls = [
            ParsedCall(m.recipient.removeprefix("functions."), _function_arguments(m))
            for m in messages
            if _is_function_call(m) and m.recipient
        ]
        return ExtractedToolCalls(_visible_content(messages), calls)


class GptOssReasoningParser(ReasoningParserDefaults):
    """`openai_gptoss`: the analysis messages, joined by newlines, are the reasoning. What is left is
    the content the `openai` tool parser would return, or, when the turn calls functions, the harmony
    text itself so that the tool parser can read the calls from it."""

    # The channels are special tokens: without them there is nothing to split.
    keeps_special_tokens = True

    def extract(self, text: str) -> tuple[str | None, str | None]:
        messages = parse_harmony(text)
        reasoning = "\n".join(m.text for m in messages if m.channel == "analysis") or None
        if any(_is_function_call(m) for m in messages):
            return reasoning, text
        return reasoning, _visible_content(messages)


PARSERS: dict[str, Callable[[], ToolCallParser]] = {
    "deepseek_v3": DeepSeekV3Parser,
    "deepseek_v31": DeepSeekV31Parser,
    "kimi_k2": KimiK2Parser,
    "glm45": Glm45Parser,
    "granite": GraniteParser,
    "openai": HarmonyToolParser,
}

REASONING_PARSERS: dict[str, Callable[[], ReasoningParser]] = {"openai_gptoss": GptOssReasoningParser}
