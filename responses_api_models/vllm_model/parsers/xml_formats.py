"""Qwen3-Coder's XML tool-call format, as vLLM's `qwen3_coder` and `qwen3_xml` parsers read it
(non-streaming `extract_tool_calls`)::

    <tool_call>
    <function=get_weather>
    <parameter=city>
    Paris
    </parameter>
    </function>
    </tool_call>

The two vLLM parsers read the same format differently, so each is reproduced on its own:
`qwen3_coder` with regular expressions and a schema-driven value conversion, `qwen3_xml` with an
incremental expat parser whose quirks (how it concatenates the arguments, which text it keeps as
content) decide the message. Both follow vLLM's `vllm/tool_parsers/qwen3coder_tool_parser.py`
and `qwen3xml_tool_parser.py` as they were before vLLM moved Qwen3 to its parser engine.
"""

from __future__ import annotations

import ast
import itertools
import json
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar
from xml.parsers.expat import ParserCreate

from responses_api_models.vllm_model.parsers.base import (
    ExtractedToolCalls,
    ParsedCall,
    ToolCallParser,
    Tools,
)

_CALL_START = "<tool_call>"
_CALL_END = "</tool_call>"
_FUNCTION_START = "<function="
_FUNCTION_END = "</function>"
_PARAMETER_START = "<parameter="
_PARAMETER_END = "</parameter>"

# Schema type names both parsers treat as "keep the text".
_STRING_KINDS = ("string", "str", "text", "varchar", "char", "enum")
_INTEGER_PREFIXES = ("int", "uint", "long", "short", "unsigned")
_NUMBER_PREFIXES = ("num", "float")
_BOOLEAN_KINDS = ("boolean", "bool", "binary")


def _tool_properties(tools: Tools | None, name: str) -> Mapping[str, Any]:
    """The `properties` of the first function tool called `name`, {} when none (vLLM's
    `find_tool_properties`: a tool without `properties` has none)."""
    for tool in tools or ():
        if not isinstance(tool, Mapping) or tool.get("type", "function") != "function":
            continue
        function = tool.get("function")
        if not isinstance(function, Mapping) or function.get("name") != name:
            continue
        parameters = function.get("parameters")
        properties = parameters.get("properties", {}) if isinstance(parameters, Mapping) else {}
        return properties if isinstance(properties, Mapping) else {}
    return {}


def _whole_number_or_float(value: str) -> float | int:
    """Float text as vLLM returns it: an int when it has no fractional part. `inf` raises
    OverflowError, which vLLM does not catch; `nan` raises ValueError, which it does."""
    number = float(value)
    return number if number - int(number) != 0 else int(number)


# --------------------------------------------------------------------------------------------
# qwen3_coder
# --------------------------------------------------------------------------------------------

_CODER_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*?)$", re.DOTALL)
_CODER_FUNCTION = re.compile(r"<function=(.*?)</function>|<function=(.*)$", re.DOTALL)
# A value ends at its closing tag, at the next parameter, at </function>, or at the end.
_CODER_PARAMETER = re.compile(
    r"<parameter=(.*?)(?:</parameter>|(?=<parameter=)|(?=</function>)|$)",
    re.DOTALL,
)


def _coder_function_bodies(text: str) -> list[str]:
    """`name>...` of every function, from the <tool_call> blocks or, without any, the whole text."""
    blocks = [closed or unclosed for closed, unclosed in _CODER_BLOCK.findall(text)] or [text]
    return [closed or unclosed for block in blocks for closed, unclosed in _CODER_FUNCTION.findall(block)]


def _coder_schema_kind(spec: Any) -> str:
    """The lower-cased `type` of a property (its `str()` when it is a list); `anyOf` counts as an
    object; anything else as a string."""
    if isinstance(spec, Mapping) and "type" in spec:
        return str(spec["type"]).strip().lower()
    if isinstance(spec, Mapping) and "anyOf" in spec:
        return "object"
    return "string"


_NOT_SCALAR = object()


def _scalar_value(value: str, kind: str) -> Any:
    """`value` converted for a string, integer, number or boolean schema type (left as text when it
    does not convert), or `_NOT_SCALAR` for any other type. Both Qwen3 parsers convert scalars alike."""
    if kind in _STRING_KINDS:
        return value
    if kind.startswith(_INTEGER_PREFIXES):
        try:
            return int(value)
        except (ValueError, TypeError):
            return value
    if kind.startswith(_NUMBER_PREFIXES):
        try:
            return _whole_number_or_float(value)
        except (ValueError, TypeError):
            return value
    if kind in _BOOLEAN_KINDS:
        return value.lower() == "true"
    return _NOT_SCALAR


def _coder_value(value: str, name: str, properties: Mapping[str, Any]) -> Any:
    """A parameter's text converted by its schema type, as `Qwen3CoderToolParser` does."""
    if value.lower() == "null":
        return None
    if name not in properties:
        return value
    kind = _coder_schema_kind(properties[name])
    scalar = _scalar_value(value, kind)
    if scalar is not _NOT_SCALAR:
        return scalar
    if kind in ("object", "array", "arr") or kind.startswith(("dict", "list")):
        try:
            return json.loads(value)
        except (json.JSONDecodeError, TypeError, ValueError):
            pass
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            return ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError):
        return value


def _trim_one_newline(value: str) -> str:
    """The template puts the value on its own line: drop one newline at each end."""
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


def _coder_call(body: str, tools: Tools | None) -> ParsedCall | None:
    """One `name>...` function body; None when it has no `>` (vLLM drops it)."""
    name_end = body.find(">")
    if name_end == -1:
        return None
    name = body[:name_end]
    properties = _tool_properties(tools, name)
    arguments: dict[str, Any] = {}
    for match in _CODER_PARAMETER.findall(body[name_end + 1 :]):
        separator = match.index(">")  # a parameter without `>` fails the whole extraction
        key = match[:separator]
        arguments[key] = _coder_value(_trim_one_newline(match[separator + 1 :]), key, properties)
    return ParsedCall(name, json.dumps(arguments, ensure_ascii=False))


class Qwen3CoderParser:
    """vLLM `qwen3_coder` (Qwen3CoderToolParser).

    Content: the text before the first `<tool_call>` (or, without one, before `<function=`),
    unstripped, None when empty; text after the calls is dropped. Values: "null" (any case) is
    null whatever the schema; a parameter the schema does not declare stays a string; otherwise
    the declared type converts it (see `_coder_value`). A function without `>` is dropped; a
    parameter without `>`, a number value of `inf`, or a value JSON cannot hold (a set from
    `literal_eval`) turns the whole text into content with no calls.
    """

    keeps_special_tokens: ClassVar[bool] = False

    def extract(self, text: str, tools: Tools | None) -> ExtractedToolCalls:
        if _FUNCTION_START not in text:
            return ExtractedToolCalls(content=text)
        try:
            bodies = _coder_function_bodies(text)
            if not bodies:
                return ExtractedToolCalls(content=text)
            calls = [call for call in (_coder_call(body, tools) for body in bodies) if call is not None]
        except Exception:  # vLLM catches everything here and falls back to plain text
            return ExtractedToolCalls(content=text)
        cut = text.find(_CALL_START)
        if cut < 0:
            cut = text.find(_FUNCTION_START)
        return ExtractedToolCalls(content=text[:cut] or None, calls=calls)


# --------------------------------------------------------------------------------------------
# qwen3_xml
# --------------------------------------------------------------------------------------------

_XML_ESCAPES = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&quot;"), ("'", "&apos;"))
_TOOL_TAG_PREFIXES = (
    _CALL_START,
    _CALL_END,
    _FUNCTION_START,
    _FUNCTION_END,
    _PARAMETER_START,
    _PARAMETER_END,
)
_FUNCTION_TAG = re.compile(r"<function=([^>]+)>")
_PARAMETER_TAG = re.compile(r"<parameter=([^>]+)>")
_PARAMETER_ELEMENT = re.compile(r'<parameter name="([^"]+)">')
# Types vLLM keeps; any other declared type is read as a string.
_KNOWN_XML_KINDS = ("object", "array", "arr", "sequence")
_call_ids = itertools.count()


def _escape_xml(text: str) -> str:
    for char, entity in _XML_ESCAPES:
        text = text.replace(char, entity)
    return text


def _xml_kind(declared: str) -> str:
    """vLLM's `repair_param_type`: unknown type names become "string" (no lower-casing)."""
    known = (
        declared in _STRING_KINDS
        or declared.startswith(_INTEGER_PREFIXES)
        or declared.startswith(_NUMBER_PREFIXES)
        or declared in _BOOLEAN_KINDS
        or declared in _KNOWN_XML_KINDS
        or declared.startswith(("dict", "list"))
    )
    return declared if known else "string"


def _xml_value(value: str, kind: str) -> Any:
    """`StreamingXMLToolCallParser._convert_param_value`: only scalars are converted."""
    if value.lower() == "null":
        return None
    scalar = _scalar_value(value, kind.strip().lower())
    return value if scalar is _NOT_SCALAR else scalar


def _xml_json_text(value: Any, kind: str) -> str:
    """What vLLM writes into the arguments for a (partial) value: string kinds as the inside of a
    JSON string, other kinds as JSON, except a text left unconverted, which goes in verbatim."""
    if value is None or value == "":
        return ""
    if kind in _STRING_KINDS:
        return json.dumps(value, ensure_ascii=False)[1:-1]
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


@dataclass
class _ArgumentPiece:
    """One fragment vLLM streams for a call (its name, or a piece of the arguments text)."""

    index: int
    call_id: str | None
    name: str | None
    arguments: str


@dataclass
class _Qwen3XmlReader:
    """vLLM's StreamingXMLToolCallParser fed the whole generation as one chunk.

    The text is cut into elements (a tag, or the text up to the next `<`), tool tags are turned
    into XML (`<function=x>` -> `<function name="x">`), everything else is XML-escaped, and each
    element goes to an expat parser whose events append JSON fragments to the current call.
    Text outside calls is collected as content only before the first call and, when it is not
    blank, between calls. Each call is its own XML document (a new parser after `</tool_call>`).
    """

    tools: Tools | None
    pieces: list[_ArgumentPiece | str] = field(default_factory=list)  # str = content
    buffer: str = ""
    position: int = 0
    text_outside: str = ""
    calls_started: int = 0
    call_id: str | None = None
    function_name: str | None = None
    function_open: bool = False
    finished_parameters: dict[str, Any] = field(default_factory=dict)
    parameter: str | None = None
    parameter_text: str = ""
    parameter_json: str = ""
    quote_opened: bool = False
    newline_held: bool = False
    raw_parameter: bool = False  # pre-pass: collecting a container value verbatim
    raw_text: str = ""
    raw_name: str | None = None
    deferred: bool = False  # the value is read with literal_eval when the parameter closes
    deferred_text: str = ""

    def __post_init__(self) -> None:
        self._new_document()

    # -- driving ------------------------------------------------------------------------------

    def read(self, text: str) -> tuple[str | None, list[ParsedCall]]:
        self.buffer += text
        if self._feed_elements():
            try:
                self._close_unfinished(text)
            except Exception:  # vLLM logs these and keeps what it has
                pass
            return self._message()
        if self.text_outside and self.calls_started == 0:
            return self.text_outside, []  # vLLM returns this text alone
        if self.call_id is not None and (_FUNCTION_END in text or _CALL_END in text):
            if self.parameter:
                self._end("parameter")
            if _FUNCTION_END in text and self.function_name:
                self._end("function")
            if _CALL_END in text:
                self._end("tool_call")
            return self._message()
        return None, []

    def _close_unfinished(self, text: str) -> None:
        """vLLM's fallback for a call whose closing tags produced no closing fragment."""
        if self.call_id is not None and _FUNCTION_END in text and not self._has_piece("}", "{}"):
            self._end_open_function()
        # Any empty fragment of this call counts, the one naming the function included.
        if self.call_id is not None and _CALL_END in text and not self._has_piece(""):
            self._end_open_function()
            self._end("tool_call")

    def _has_piece(self, *arguments: str) -> bool:
        """Whether the current call has an argument fragment that is one of `arguments`."""
        return any(
            isinstance(piece, _ArgumentPiece)
            and piece.call_id == self.call_id
            and piece.arguments in arguments
            for piece in self.pieces
        )

    def _end_open_function(self) -> None:
        if self.parameter:
            self._end("parameter")
        if self.function_name:
            self._end("function")

    def _message(self) -> tuple[str | None, list[ParsedCall]]:
        """Merge the fragments per call id, in order of first appearance."""
        content = "".join(piece for piece in self.pieces if isinstance(piece, str))
        merged: dict[str | None, list[Any]] = {}
        for piece in self.pieces:
            if isinstance(piece, str):
                continue
            if piece.call_id not in merged:
                merged[piece.call_id] = [piece.name, piece.arguments]
                continue
            if piece.name:
                merged[piece.call_id][0] = piece.name
            merged[piece.call_id][1] += piece.arguments
        calls = [ParsedCall(name, arguments) for name, arguments in merged.values() if name]
        return content or None, calls

    def _feed_elements(self) -> bool:
        fed = False
        while self.position < len(self.buffer):
            element, end = self._next_element()
            if element is None:
                break
            if self._kept_as_text(element):
                self.position = end
                continue
            try:
                prepared = self._prepare(element)
                opening = prepared.strip()
                if (
                    opening.startswith((_CALL_START, "<function name="))
                    and self.calls_started == 0
                    and self.text_outside
                ):
                    self.pieces.append(self.text_outside)
                    self.text_outside = ""
                if opening.startswith(_CALL_START) and self.calls_started > 0 and self.call_id:
                    if self.parameter:
                        self._end("parameter")
                    if self.function_open or self.function_name:
                        self._end("function")
                    self._piece(self.calls_started - 1, None, "")
                    self._after_call()
                self.expat.Parse(prepared, False)
                fed = True
            except Exception:  # vLLM logs XML errors and moves on to the next element
                pass
            self.position = end
        return fed

    def _next_element(self) -> tuple[str | None, int]:
        """A tag (to its `>`, or up to the next `<`), or the text up to the next `<`."""
        start = self.position
        rest = self.buffer[start:]
        if not rest:
            return None, start
        if not rest.startswith("<"):
            cut = rest.find("<")
            cut = len(rest) if cut == -1 else cut
            return rest[:cut], start + cut
        next_open = rest.find("<", 1)
        next_close = rest.find(">", 1)
        if next_close != -1 and (next_open == -1 or next_close < next_open):
            return rest[: next_close + 1], start + next_close + 1
        if next_open != -1:
            return rest[:next_open], start + next_open
        # An unfinished tag at the very end: vLLM waits for more text, so it is never read.
        if self.call_id is not None:
            return None, start
        if (
            rest == _CALL_START[: len(rest)]
            or rest.startswith(_FUNCTION_START)
            or rest == _FUNCTION_START[: len(rest)]
        ):
            return None, start
        return rest, start + len(rest)

    def _kept_as_text(self, element: str) -> bool:
        """Outside a call, anything but a tool tag is collected as text instead of parsed."""
        if element.startswith((_CALL_START, _FUNCTION_START, _PARAMETER_START)):
            return False
        if self.call_id is None and element:
            self.text_outside += element
            return True
        if self.call_id is not None:
            return False
        return not element

    def _prepare(self, element: str) -> str:
        """The XML handed to expat for one element (vLLM's `_preprocess_xml_chunk`)."""
        is_tool_tag = element.startswith(_TOOL_TAG_PREFIXES)
        converted = _FUNCTION_TAG.sub(r'<function name="\1">', element)
        converted = _PARAMETER_TAG.sub(r'<parameter name="\1">', converted)
        if self.raw_parameter:
            if converted.startswith(_PARAMETER_END):
                body = self.raw_text
                self.deferred = True
                self.deferred_text = body
                self.raw_parameter, self.raw_text, self.raw_name = False, "", None
                return _escape_xml(body) + _PARAMETER_END
            if self.raw_text == "" and not self._needs_deferral(element):
                self.raw_parameter = False
                return _escape_xml(element)
            self.raw_text += element
            return ""
        if converted.startswith("<parameter name="):
            named = _PARAMETER_ELEMENT.match(converted)
            if named:
                self.raw_name = named.group(1)
            self.raw_parameter, self.raw_text = True, ""
            return converted
        return converted if is_tool_tag else _escape_xml(converted)

    def _needs_deferral(self, first_chunk: str) -> bool:
        """Arrays are always read whole (Python literals); objects only when they look like a
        Python literal with single quotes."""
        kind = self._kind(self.raw_name) if self.raw_name else "string"
        if kind in ("array", "arr", "sequence") or kind.startswith(("dict", "list")):
            return True
        looks_literal = any(char in first_chunk for char in "[{(") and "'" in first_chunk
        return kind == "object" and looks_literal

    def _kind(self, parameter: str) -> str:
        if not self.tools or not self.function_name:
            return "string"
        spec = _tool_properties(self.tools, self.function_name).get(parameter)
        return _xml_kind(str(spec.get("type", "string"))) if isinstance(spec, Mapping) else "string"

    # -- expat events ---------------------------------------------------------------------------

    def _new_document(self) -> None:
        self.expat = ParserCreate()
        self.expat.buffer_text = True
        self.expat.StartElementHandler = self._start
        self.expat.EndElementHandler = self._end
        self.expat.CharacterDataHandler = self._text

    def _piece(self, index: int, name: str | None, arguments: str) -> None:
        # A <parameter=...> outside any call still streams fragments, under no call id.
        self.pieces.append(_ArgumentPiece(index, self.call_id, name, arguments))

    def _close_before(self, incoming: str | None = None) -> None:
        if self.parameter:
            self._end("parameter")
        if incoming in ("function", "tool_call") and self.function_name:
            self._end("function")
        if incoming == "tool_call" and self.call_id:
            self._end("tool_call")

    def _start(self, tag: str, attributes: dict[str, str]) -> None:
        if tag == "tool_call":
            self._close_before("tool_call")
            self.finished_parameters = {}
            self.call_id = f"call-{next(_call_ids)}"
            self.calls_started += 1
        elif tag.startswith("function"):
            if not self.call_id:
                self._start("tool_call", {})
            self._close_before("function")
            self.function_name = attributes.get("name") if attributes else None
            self.function_open = True
            if self.function_name:
                self._piece(self.calls_started - 1, self.function_name, "")
        elif tag.startswith("parameter"):
            self._close_before("parameter")
            name = attributes.get("name") if attributes else None
            self.parameter, self.parameter_text, self.parameter_json = name, "", ""
            self.quote_opened = False
            if name:
                opener = "{" if not self.finished_parameters else ", "
                self._piece(self.calls_started - 1, None, f'{opener}"{name}": ')

    def _text(self, data: str) -> None:
        if not data or not self.parameter:
            return
        if self.deferred:
            self.parameter_text += self._hold_last_newline(data)
            return
        kind = self._kind(self.parameter)
        if not self.parameter_text and data.startswith("\n"):
            data = data[1:]
        if kind in _STRING_KINDS and not self.quote_opened:
            self._piece(self.calls_started - 1, None, '"')
            self.quote_opened = True
        if not data:
            return
        self.parameter_text += self._hold_last_newline(data)
        rendered = _xml_json_text(_xml_value(self.parameter_text, kind), kind)
        fresh = rendered[len(self.parameter_json) :]
        self.parameter_json = rendered
        self._piece(self.calls_started - 1, None, fresh)

    def _hold_last_newline(self, data: str) -> str:
        """A value's final newline belongs to the template: hold it until more text follows."""
        if self.newline_held:
            data = "\n" + data
            self.newline_held = False
        if data.endswith("\n"):
            self.newline_held = True
            data = data[:-1]
        return data

    def _end(self, tag: str) -> None:
        if (tag.startswith("function") or tag == "tool_call") and self.parameter:
            self._close_before()
        if tag.startswith("parameter") and self.parameter:
            self._end_parameter()
        elif tag.startswith("function"):
            self._piece(self.calls_started - 1, None, "}" if self.finished_parameters else "{}")
            self.function_open = False
        elif tag == "tool_call":
            if self.function_open:
                if self.parameter:
                    self._end("parameter")
                self._end("function")
            self._piece(self.calls_started - 1, None, "")
            if self.text_outside.strip():
                self.pieces.append(self.text_outside)
            self._after_call()

    def _end_parameter(self) -> None:
        name = self.parameter
        assert name is not None
        if self.deferred:
            raw = self.deferred_text or self.parameter_text
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", SyntaxWarning)
                    value = ast.literal_eval(raw + "\n" if self.newline_held else raw)
                written = json.dumps(value, ensure_ascii=False)
            except Exception:
                value, written = raw, json.dumps(raw, ensure_ascii=False)
            self._piece(self.calls_started - 1, None, written)
            self.deferred, self.deferred_text = False, ""
        else:
            kind = self._kind(name)
            value = _xml_value(self.parameter_text, kind)  # may raise, as vLLM's does
            if kind in _STRING_KINDS:
                empty = not self.parameter_text and not self.quote_opened
                self._piece(self.calls_started - 1, None, '""' if empty else '"')
        self.newline_held = False
        self.finished_parameters[name] = value
        self.parameter, self.parameter_text, self.parameter_json = None, "", ""
        self.quote_opened = False

    def _after_call(self) -> None:
        """Each call is its own XML document: start a new parser and forget the call's state."""
        self._new_document()
        self.call_id = None
        self.function_name = None
        self.function_open = False
        self.finished_parameters = {}
        self.parameter, self.parameter_text, self.parameter_json = None, "", ""
        self.newline_held = False
        self.quote_opened = False
        self.text_outside = ""
        self.raw_parameter, self.raw_text, self.raw_name = False, "", None
        self.deferred, self.deferred_text = False, ""


class Qwen3XmlParser:
    """vLLM `qwen3_xml` (Qwen3XMLToolParser): see `_Qwen3XmlReader`.

    The arguments text is assembled fragment by fragment: `{"key": ` + value + `, "key2": ` ...
    + `}` (`{}` without parameters), keys unescaped. Values of string kinds are JSON strings
    ("null" in any case becomes ""), integer/number/boolean kinds JSON scalars, arrays (and
    objects written with single quotes) are read with `literal_eval` and re-serialised (or, when
    that fails, kept as a JSON string of the raw text), other kinds go in verbatim; None values
    of non-string kinds leave the value out (`{"k": }`), as vLLM does. Content is the text
    before the first call plus non-blank text between calls; text after the last call is lost.
    """

    keeps_special_tokens: ClassVar[bool] = False

    def extract(self, text: str, tools: Tools | None) -> ExtractedToolCalls:
        content, calls = _Qwen3XmlReader(tools).read(text)
        return ExtractedToolCalls(content=content, calls=calls)


PARSERS: dict[str, Callable[[], ToolCallParser]] = {
    "qwen3_coder": Qwen3CoderParser,
    "qwen3_xml": Qwen3XmlParser,
}
