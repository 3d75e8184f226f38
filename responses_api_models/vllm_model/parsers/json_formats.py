"""Tool-call formats whose calls are JSON or Python call syntax: vLLM's `hermes`, `llama3_json`,
`pythonic`, `llama4_pythonic` and `mistral` parsers (non-streaming `extract_tool_calls`).

Each class reproduces what vLLM's parser of that name returns for a whole generation, including
its quirks (content kept or dropped, arguments re-serialised or passed through, the whole text
handed back as content when the calls cannot be read). The behaviour follows vLLM's sources under
`vllm/tool_parsers/` (2026 main); where versions differ, the docstring of the class says which
one is followed.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from collections.abc import Callable
from typing import Any, ClassVar

from responses_api_models.vllm_model.parsers.base import (
    ExtractedToolCalls,
    ParsedCall,
    ToolCallParser,
    Tools,
)


def _dump_arguments(value: Any) -> str:
    """The arguments text every JSON-reading vLLM parser writes: default separators, UTF-8 kept."""
    return json.dumps(value, ensure_ascii=False)


def _plain_text(text: str) -> ExtractedToolCalls:
    """No calls: vLLM hands the generation back as content."""
    return ExtractedToolCalls(content=text, calls=[])


def _checked_name(name: Any) -> str:
    """vLLM builds a pydantic `FunctionCall(name=...)`, which refuses anything but a string."""
    if not isinstance(name, str):
        raise TypeError(f"tool name must be a string, got {type(name).__name__}")
    return name


# --------------------------------------------------------------------------------------------
# hermes: <tool_call>{"name": ..., "arguments": {...}}</tool_call>, repeated.
# --------------------------------------------------------------------------------------------

_HERMES_START = "<tool_call>"
# A block runs to the first closing tag; an unclosed last block runs to the end of the text.
_HERMES_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)


class HermesParser:
    """vLLM `hermes` (Hermes2ProToolParser).

    Every block must be a JSON object with a string "name" and an "arguments" key, or the whole
    text comes back as content with no calls. Arguments are re-serialised from the parsed JSON
    (a string "arguments" stays a JSON string). Content is the text before the first
    `<tool_call>`, unstripped, None when empty; text after the last block is dropped.
    vLLM keeps special tokens for it when the request has tools (`adjust_request`).
    """

    keeps_special_tokens: ClassVar[bool] = True

    def extract(self, text: str, tools: Tools | None) -> ExtractedToolCalls:
        if _HERMES_START not in text:
            return _plain_text(text)
        try:
            calls = [self._call(closed or unclosed) for closed, unclosed in _HERMES_BLOCK.findall(text)]
        except Exception:  # vLLM catches everything here and falls back to plain text
            return _plain_text(text)
        before = text[: text.find(_HERMES_START)]
        return ExtractedToolCalls(content=before or None, calls=calls)

    @staticmethod
    def _call(body: str) -> ParsedCall:
        decoded = json.loads(body)
        return ParsedCall(_checked_name(decoded["name"]), _dump_arguments(decoded["arguments"]))


# --------------------------------------------------------------------------------------------
# llama3_json: {"name": ..., "parameters"|"arguments": {...}} objects anywhere in the text.
# --------------------------------------------------------------------------------------------

_LLAMA_PYTHON_TAG = "<|python_tag|>"


class Llama3JsonParser:
    """vLLM `llama3_json` (Llama3JsonToolParser; also registered as `llama4_json`).

    Every `{` that is not inside an object already decoded starts a JSON value; each must decode
    to an object with "name" and "arguments" (or "parameters"), else the whole text is content.
    A `{` right after the end of a decoded object counts as inside it (vLLM compares with `<=`).
    When there are calls the content is None: any text around them is dropped.
    """

    keeps_special_tokens: ClassVar[bool] = False

    def extract(self, text: str, tools: Tools | None) -> ExtractedToolCalls:
        if _LLAMA_PYTHON_TAG not in text and "{" not in text:
            return _plain_text(text)
        decoder = json.JSONDecoder()
        covered_until = -1
        calls: list[ParsedCall] = []
        for start in (index for index, char in enumerate(text) if char == "{"):
            if start <= covered_until:
                continue
            try:
                decoded, length = decoder.raw_decode(text[start:])
                covered_until = start + length
                arguments = decoded["arguments"] if "arguments" in decoded else decoded["parameters"]
                calls.append(ParsedCall(_checked_name(decoded["name"]), _dump_arguments(arguments)))
            except Exception:  # a missing key or bad JSON anywhere voids every call
                return _plain_text(text)
        if not calls:
            return _plain_text(text)
        return ExtractedToolCalls(content=None, calls=calls)


# --------------------------------------------------------------------------------------------
# pythonic / llama4_pythonic: [name(key=literal, ...), ...] as the whole generation.
# --------------------------------------------------------------------------------------------

# vLLM's gate is the regular expression
#   \[([a-zA-Z]+\w*\(([a-zA-Z]+\w*=.*,\s*)*([a-zA-Z]+\w*=.*\s)?\),\s*)*
#     ([a-zA-Z]+\w*\(([a-zA-Z]+\w*=.*,\s*)*([a-zA-Z]+\w*=.*\s*)?\)\s*)+\]   (DOTALL, `match`)
# which backtracks exponentially on a truncated call list (vLLM bounds it with a timeout).
# `_starts_like_call_list` decides the same language in one pass: since `.*` takes anything, the
# text must start with `[`, then calls `name()` (each followed by `,` and spaces while more
# follow, the last ones without the comma), then either `]`, or a call opening `name(key=` after
# which `)`, spaces and `]` appear somewhere.
_CLOSING_AFTER_KEYWORD = re.compile(r"\)\s*\]")


def _name_end(text: str, start: int) -> int:
    """End of a name (an ASCII letter, then letters, digits or `_`, Unicode included) or -1."""
    if start >= len(text) or not ("a" <= text[start] <= "z" or "A" <= text[start] <= "Z"):
        return -1
    end = start + 1
    while end < len(text) and (text[end].isalnum() or text[end] == "_"):
        end += 1
    return end


def _skip_spaces(text: str, index: int) -> int:
    while index < len(text) and text[index].isspace():
        index += 1
    return index


def _starts_like_call_list(text: str) -> bool:
    """Whether vLLM's pythonic pattern matches at the start of `text` (see above)."""
    if not text.startswith("["):
        return False
    index, comma_phase = 1, True
    while True:
        after_name = _name_end(text, index)
        if after_name == -1 or after_name >= len(text) or text[after_name] != "(":
            return False
        inside = after_name + 1
        if inside < len(text) and text[inside] == ")":
            index = inside + 1
            if index < len(text) and text[index] == ",":
                if not comma_phase:
                    return False
                index = _skip_spaces(text, index + 1)
                continue
            comma_phase = False
            index = _skip_spaces(text, index)
            if index < len(text) and text[index] == "]":
                return True
            continue
        after_key = _name_end(text, inside)
        if after_key == -1 or after_key >= len(text) or text[after_key] != "=":
            return False
        return _CLOSING_AFTER_KEYWORD.search(text, after_key + 1) is not None


# Bare JSON spellings the models use for Python's None/True/False.
_JSON_WORDS: dict[str, Any] = {"null": None, "true": True, "false": False}


class _NotACallList(ValueError):
    """The parsed text is not a list of calls with literal keyword arguments."""


def _literal(node: ast.expr) -> Any:
    """The value of one argument node; only literals, lists, literal-keyed dicts and JSON words."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Dict):
        if not all(isinstance(key, ast.Constant) for key in node.keys):
            raise _NotACallList("dict keys must be literals")
        return {key.value: _literal(value) for key, value in zip(node.keys, node.values, strict=True)}  # type: ignore[union-attr]
    if isinstance(node, ast.List):
        return [_literal(item) for item in node.elts]
    if isinstance(node, ast.Name) and node.id in _JSON_WORDS:
        return _JSON_WORDS[node.id]
    raise _NotACallList(f"unsupported argument node {type(node).__name__}")


def _dotted_name(node: ast.expr) -> str:
    """`a.b.c` for an attribute chain ending in a plain name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        raise _NotACallList("call target is not a name")
    parts.append(node.id)
    return ".".join(reversed(parts))


def _pythonic_call(call: ast.Call) -> ParsedCall:
    """Keyword arguments only (positional ones are ignored, as in vLLM)."""
    arguments = {keyword.arg: _literal(keyword.value) for keyword in call.keywords}
    return ParsedCall(_dotted_name(call.func), _dump_arguments(arguments))


def _pythonic_calls(text: str) -> list[ParsedCall] | None:
    """The calls of a pythonic list, or None when vLLM would treat the text as plain content."""
    if not _starts_like_call_list(text):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            module = ast.parse(text)
        listed = getattr(module.body[0], "value", None)
        if not isinstance(listed, ast.List) or not all(isinstance(item, ast.Call) for item in listed.elts):
            return None
        return [_pythonic_call(item) for item in listed.elts]  # type: ignore[arg-type]
    except Exception:  # syntax errors, unsupported nodes, unserialisable values
        return None


class PythonicParser:
    """vLLM `pythonic` (PythonicToolParser, argument reading from `tool_parsers/utils.py`).

    The whole text must be `[f(a=1), g(b='x')]` (the first statement is read; anything after a
    valid list is a syntax error and voids the calls). Content is None with calls, else the text.
    Arguments: constants, lists, dicts with literal keys, and null/true/false; any other node
    (a negative number `-1`, a tuple, a call...) voids every call in this vLLM version.
    """

    keeps_special_tokens: ClassVar[bool] = False

    def extract(self, text: str, tools: Tools | None) -> ExtractedToolCalls:
        calls = _pythonic_calls(text)
        if calls is None:
            return _plain_text(text)
        return ExtractedToolCalls(content=None, calls=calls)


_LLAMA4_PYTHON_START = "<|python_start|>"
_LLAMA4_PYTHON_END = "<|python_end|>"


class Llama4PythonicParser(PythonicParser):
    """vLLM `llama4_pythonic`: `pythonic` after dropping a leading `<|python_start|>` and, then
    only, every `<|python_end|>`; the content it hands back is that trimmed text."""

    def extract(self, text: str, tools: Tools | None) -> ExtractedToolCalls:
        if text.startswith(_LLAMA4_PYTHON_START):
            text = text[len(_LLAMA4_PYTHON_START) :].replace(_LLAMA4_PYTHON_END, "")
        return super().extract(text, tools)


# --------------------------------------------------------------------------------------------
# mistral: content[TOOL_CALLS]name[ARGS]{...}[TOOL_CALLS]... (v11+) or
#          content[TOOL_CALLS] [{"name": ..., "arguments": {...}}] (tokenizers before v11).
# --------------------------------------------------------------------------------------------

_MISTRAL_MARKER = "[TOOL_CALLS]"
_MISTRAL_ARGS = "[ARGS]"
_MISTRAL_LIST = re.compile(r"\[{.*}\]", re.DOTALL)


class MistralParser:
    """vLLM `mistral` (MistralToolParser) with a Hugging Face tokenizer, which keeps special
    tokens for it when the request has tools.

    vLLM picks the format from the tokenizer: v11+ when `[ARGS]` is in its vocabulary. Here
    `pre_v11=None` decides from the text (`[ARGS]` present means v11+), which agrees whenever the
    model writes its own format; pass a bool to pin it.

    v11+: each `[TOOL_CALLS]` chunk holding a `{` is a call; the name is the text before the
    first `{` with `[ARGS]` removed, the arguments are the rest of the chunk verbatim (not
    re-serialised, not validated). Chunks without `{` are skipped.
    Before v11: the text after the single marker is stripped and read as a JSON list of
    {"name", "arguments"} (arguments re-serialised, `{}` when absent); unreadable JSON gives that
    stripped text as content. Content is the text before the first marker, None when empty.

    vLLM fails the request (here: ValueError) when a pre-v11 text has several markers or a list
    whose items are not objects with a string "name".
    """

    keeps_special_tokens: ClassVar[bool] = True

    def __init__(self, pre_v11: bool | None = None) -> None:
        self.pre_v11 = pre_v11

    def extract(self, text: str, tools: Tools | None) -> ExtractedToolCalls:
        if _MISTRAL_MARKER not in text:
            return _plain_text(text)
        before, *chunks = text.split(_MISTRAL_MARKER)
        pre_v11 = self.pre_v11 if self.pre_v11 is not None else _MISTRAL_ARGS not in text
        if pre_v11:
            listed = _mistral_list(chunks)
            if isinstance(listed, str):
                return ExtractedToolCalls(content=listed, calls=[])
            calls = listed
        else:
            calls = [_mistral_v11_call(chunk) for chunk in chunks if "{" in chunk]
        return ExtractedToolCalls(content=before or None, calls=calls)


def _mistral_v11_call(chunk: str) -> ParsedCall:
    """`name[ARGS]{...}`: arguments are passed through as generated."""
    brace = chunk.find("{")
    return ParsedCall(chunk[:brace].replace(_MISTRAL_ARGS, ""), chunk[brace:])


def _mistral_list(chunks: list[str]) -> list[ParsedCall] | str:
    """Calls of a pre-v11 JSON list, or the stripped text when vLLM cannot read it."""
    if len(chunks) != 1:
        raise ValueError("vLLM's mistral parser fails the request: several [TOOL_CALLS] before v11")
    body = chunks[0].strip()
    try:
        listed, _ = json.JSONDecoder().raw_decode(body)
    except json.JSONDecodeError:
        found = _MISTRAL_LIST.findall(body)
        try:
            listed = json.loads(found[0])
        except (IndexError, json.JSONDecodeError):
            return body
    try:
        return [
            ParsedCall(_checked_name(item["name"]), _dump_arguments(item.get("arguments", {})))
            for item in listed
        ]
    except (KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"vLLM's mistral parser fails the request: {error!r}") from error


PARSERS: dict[str, Callable[[], ToolCallParser]] = {
    "hermes": HermesParser,
    "llama3_json": Llama3JsonParser,
    "llama4_json": Llama3JsonParser,
    "pythonic": PythonicParser,
    "llama4_pythonic": Llama4PythonicParser,
    "mistral": MistralParser,
}
