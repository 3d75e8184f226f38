"""Generated texts and the messages vLLM's chat endpoint makes of them, per tool-call parser.

For an integration test: `SAMPLES[parser](content, calls)` gives `(raw, expected)` where `raw` is
what that model family generates for an assistant turn with this content and these calls (the
text between the assistant header and the end-of-turn token, markers included) and `expected` is
`{"content": str | None, "tool_calls": [{"name", "arguments"}]}` as vLLM returns it, arguments as
the exact JSON text vLLM writes. Written from vLLM's parser sources, independently of this
package's parsers, so that a parser bug shows.

Assumptions the expectations rest on:
- The request offers tools and `tool_choice` is auto. For `qwen3_coder` and `qwen3_xml`, whose
  arguments depend on the schema, the tools are `sample_tools(calls)` (each argument declared
  with the JSON type of its value); the other formats ignore the schema.
- Special tokens (`SPECIAL_MARKERS`) are in the text the parser sees when vLLM keeps them for that
  parser; for the others vLLM drops them, so no sample puts them in `raw`.
- A sample function raises ValueError for content or values whose result would depend on
  details it does not model (markers inside values, control characters, negative numbers in
  pythonic calls, ...), rather than guess.
"""

from __future__ import annotations

import ast
import json
import keyword
import math
import re
from collections.abc import Callable
from typing import Any

Calls = list[tuple[str, dict]]
Message = dict[str, Any]

SPECIAL_MARKERS: dict[str, tuple[str, ...]] = {
    # Qwen2.5/Qwen3 (the usual hermes models): <tool_call> is an added token, not a special one.
    "hermes": (),
    "llama3_json": ("<|python_tag|>",),
    "pythonic": (),
    "llama4_pythonic": ("<|python_start|>", "<|python_end|>"),
    "mistral": ("[TOOL_CALLS]", "[ARGS]"),
    # Qwen3-Coder: <tool_call>/</tool_call> are added tokens with special=false; the rest is text.
    "qwen3_coder": (),
    "qwen3_xml": (),
}

_QWEN_MARKERS = ("<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=", "</parameter>")
_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
# Characters XML 1.0 forbids (qwen3_xml feeds values to an XML parser).
_XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _message(content: str | None, calls: list[tuple[str, str]]) -> Message:
    return {
        "content": content,
        "tool_calls": [{"name": name, "arguments": arguments} for name, arguments in calls],
    }


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _refuse_in(text: str, markers: tuple[str, ...], what: str) -> None:
    for marker in markers:
        if marker in text:
            raise ValueError(f"{what} holds {marker!r}, which the format reads as a marker")


def _json_kind(value: Any) -> str:
    """The JSON Schema type of a Python value (bool before int: bool is an int)."""
    if value is None:
        return "null"
    for python_type, kind in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string")):
        if isinstance(value, python_type):
            return kind
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    raise ValueError(f"not a JSON value: {value!r}")


def sample_tools(calls: Calls) -> list[dict[str, Any]]:
    """Chat-format tools declaring each argument with the JSON type of its value (the schema the
    qwen3_coder and qwen3_xml expectations assume)."""
    properties_by_name: dict[str, dict[str, Any]] = {}
    for name, arguments in calls:
        properties = properties_by_name.setdefault(name, {})
        for key, value in arguments.items():
            kind = _json_kind(value)
            if properties.setdefault(key, {"type": kind})["type"] != kind:
                raise ValueError(f"{name}.{key} has values of two types; one schema cannot hold both")
    return [
        {
            "type": "function",
            "function": {"name": name, "parameters": {"type": "object", "properties": properties}},
        }
        for name, properties in properties_by_name.items()
    ]


# -- hermes -------------------------------------------------------------------------------------


def hermes(content: str, calls: Calls) -> tuple[str, Message]:
    """Qwen3 style: content, then `<tool_call>\\n{json}\\n</tool_call>` blocks joined by newlines.
    vLLM: content is the text before the first block (None when empty); arguments re-dumped."""
    _refuse_in(content, ("<tool_call>",), "content")
    if not calls:
        return content, _message(content, [])
    blocks = "\n".join(
        f"<tool_call>\n{_json({'name': name, 'arguments': arguments})}\n</tool_call>"
        for name, arguments in calls
    )
    expected = [(name, _json(json.loads(_json(arguments)))) for name, arguments in calls]
    return content + blocks, _message(content or None, expected)


# -- llama3_json --------------------------------------------------------------------------------


def llama3_json(content: str, calls: Calls) -> tuple[str, Message]:
    """Llama 3.1/3.2 JSON calls `{"name": ..., "parameters": {...}}` joined by "; ". vLLM decodes
    every top-level `{` and drops all other text when it finds calls (content None)."""
    if "{" in content or "<|python_tag|>" in content:
        raise ValueError("vLLM reads any '{' in llama3_json content as the start of a call")
    if not calls:
        return content, _message(content, [])
    objects = "; ".join(_json({"name": name, "parameters": arguments}) for name, arguments in calls)
    expected = [(name, _json(json.loads(_json(arguments)))) for name, arguments in calls]
    return content + objects, _message(None, expected)


# -- pythonic / llama4_pythonic ---------------------------------------------------------------


def _python_literal(value: Any) -> str:
    """Python source for a value; negative numbers are refused (vLLM versions disagree on them)."""
    if value is None or isinstance(value, (bool, str)):
        return repr(value)
    if isinstance(value, (int, float)):
        if value < 0 or (isinstance(value, float) and not math.isfinite(value)):
            raise ValueError(
                f"{value!r}: negative or non-finite numbers are read differently across vLLM versions"
            )
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_python_literal(item) for item in value) + "]"
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            raise ValueError("dict keys must be strings")
        return "{" + ", ".join(f"{key!r}: {_python_literal(item)}" for key, item in value.items()) + "}"
    raise ValueError(f"not a JSON value: {value!r}")


def _python_name(name: str) -> str:
    if not _IDENTIFIER.fullmatch(name) or keyword.iskeyword(name):
        raise ValueError(f"{name!r} is not a name vLLM's pythonic pattern accepts")
    return name


def pythonic(content: str, calls: Calls) -> tuple[str, Message]:
    """Llama 3.2 style `[f(a=1), g(b='x')]` as the whole generation. vLLM only reads calls when
    the text starts with the list, so content before it makes everything plain content."""
    if not calls:
        return content, _message(content, [])
    listed = ", ".join(
        f"{_python_name(name)}("
        + ", ".join(f"{_python_name(key)}={_python_literal(value)}" for key, value in arguments.items())
        + ")"
        for name, arguments in calls
    )
    raw = f"[{listed}]"
    if content:
        raw = f"{content}\n{raw}"
        return raw, _message(raw, [])
    expected = [(name, _json(json.loads(_json(arguments)))) for name, arguments in calls]
    return raw, _message(None, expected)


def llama4_pythonic(content: str, calls: Calls) -> tuple[str, Message]:
    """Llama 4 writes the same list (its `<|python_start|>` wrapper is a special token that vLLM
    drops for this parser, so it is left out)."""
    return pythonic(content, calls)


# -- mistral ------------------------------------------------------------------------------------


def mistral(content: str, calls: Calls) -> tuple[str, Message]:
    """Mistral v11+ tokenizers: `content[TOOL_CALLS]name[ARGS]{json}` per call. vLLM passes the
    arguments through verbatim; content is the text before the first marker (None when empty)."""
    _refuse_in(content, ("[TOOL_CALLS]",), "content")
    if not calls:
        return content, _message(content, [])
    for name, _ in calls:
        _refuse_in(name, ("{", "[TOOL_CALLS]", "[ARGS]"), "a tool name")
    raw = content + "".join(f"[TOOL_CALLS]{name}[ARGS]{_json(arguments)}" for name, arguments in calls)
    return raw, _message(content or None, [(name, _json(arguments)) for name, arguments in calls])


# -- qwen3_coder / qwen3_xml --------------------------------------------------------------------


def _qwen_value_text(value: Any) -> str:
    """How Qwen3-Coder writes a value: strings as they are, anything else as JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("non-finite numbers have no JSON spelling")
    return value if isinstance(value, str) else _json(value)


def _qwen_check(content: str, calls: Calls) -> None:
    _refuse_in(content, _QWEN_MARKERS, "content")
    for name, arguments in calls:
        _refuse_in(name, (">", "<", "\n"), "a function name")
        for key, value in arguments.items():
            if not _IDENTIFIER.fullmatch(key):
                raise ValueError(f"argument name {key!r} is not a plain identifier")
            if isinstance(value, str):
                _refuse_in(value, _QWEN_MARKERS, f"value of {key}")


def _qwen_raw(content: str, calls: Calls) -> str:
    blocks = []
    for name, arguments in calls:
        parameters = "".join(
            f"<parameter={key}>\n{_qwen_value_text(value)}\n</parameter>\n"
            for key, value in arguments.items()
        )
        blocks.append(f"<tool_call>\n<function={name}>\n{parameters}</function>\n</tool_call>")
    return content + "\n".join(blocks)


def _coder_expected(value: Any) -> Any:
    """vLLM's qwen3_coder conversion of a value written by `_qwen_value_text`, declared with its
    own JSON type: "null" (any case) is null; a number without fraction becomes an int."""
    text = _qwen_value_text(value)
    if text.lower() == "null":
        return None
    if isinstance(value, float):
        number = float(text)
        return int(number) if number == int(number) else number
    return value


def qwen3_coder(content: str, calls: Calls) -> tuple[str, Message]:
    """Qwen3-Coder XML calls. vLLM: content before the first `<tool_call>` (None when empty);
    each value converted by the type `sample_tools` declares; arguments dumped with json.dumps."""
    _qwen_check(content, calls)
    if not calls:
        return content, _message(content, [])
    expected = [
        (name, _json({key: _coder_expected(value) for key, value in arguments.items()}))
        for name, arguments in calls
    ]
    return _qwen_raw(content, calls), _message(content or None, expected)


def _xml_fragment(value: Any) -> str:
    """The JSON text qwen3_xml writes for one value, given `sample_tools` types."""
    text = _qwen_value_text(value)
    if isinstance(value, str) or value is None:  # "null" is repaired to a string type
        if _XML_FORBIDDEN.search(text):
            raise ValueError("XML cannot carry control characters")
        text = text.replace("\r\n", "\n").replace("\r", "\n")  # the XML parser normalises line ends
        return '""' if text.lower() == "null" else _json(text)
    if isinstance(value, float):
        number = float(text)
        return _json(int(number) if number == int(number) else number)
    if isinstance(value, (bool, int)):
        return text
    if "<" in text:
        raise ValueError("'<' inside a container value splits it into several XML events")
    read_whole = isinstance(value, list) or "'" in text  # arrays, or objects that look like Python
    if not read_whole:
        return text  # objects go in verbatim
    raw = f"\n{text}\n"
    try:
        return _json(ast.literal_eval(raw + "\n"))
    except (ValueError, SyntaxError):  # JSON true/false/null are not Python literals
        return _json(raw)


def qwen3_xml(content: str, calls: Calls) -> tuple[str, Message]:
    """Same text as qwen3_coder. vLLM's qwen3_xml concatenates `{"key": value, ...}` itself:
    string "null" becomes "", arrays are read as Python literals (kept as a JSON string of the
    raw text when that fails), objects are copied verbatim."""
    _qwen_check(content, calls)
    if "<" in content:
        raise ValueError("qwen3_xml cuts content at '<'; a trailing partial tag would be dropped")
    if not calls:
        return content, _message(content, [])
    expected = []
    for name, arguments in calls:
        pairs = ", ".join(f'"{key}": {_xml_fragment(value)}' for key, value in arguments.items())
        expected.append((name, "{" + pairs + "}" if arguments else "{}"))
    return _qwen_raw(content, calls), _message(content or None, expected)


SAMPLES: dict[str, Callable[[str, Calls], tuple[str, Message]]] = {
    "hermes": hermes,
    "llama3_json": llama3_json,
    "pythonic": pythonic,
    "llama4_pythonic": llama4_pythonic,
    "mistral": mistral,
    "qwen3_coder": qwen3_coder,
    "qwen3_xml": qwen3_xml,
}
