"""Hand-written vectors for Qwen3-Coder's XML format as vLLM's `qwen3_coder` and `qwen3_xml` parsers
read it (vllm/tool_parsers/qwen3coder_tool_parser.py and qwen3xml_tool_parser.py)."""

from __future__ import annotations

import pytest

from responses_api_models.vllm_model.parsers.base import ExtractedToolCalls, ParsedCall
from responses_api_models.vllm_model.parsers.xml_formats import PARSERS, Qwen3CoderParser, Qwen3XmlParser


def tool(name: str, **types: object) -> dict:
    properties = {key: (kind if isinstance(kind, dict) else {"type": kind}) for key, kind in types.items()}
    return {
        "type": "function",
        "function": {"name": name, "parameters": {"type": "object", "properties": properties}},
    }


def calls(*pairs: tuple[str, str]) -> list[ParsedCall]:
    return [ParsedCall(name, arguments) for name, arguments in pairs]


def block(name: str, **values: str) -> str:
    parameters = "".join(f"<parameter={key}>\n{value}\n</parameter>\n" for key, value in values.items())
    return f"<tool_call>\n<function={name}>\n{parameters}</function>\n</tool_call>"


WEATHER = [tool("get_weather", city="string", days="integer")]


def test_registry():
    assert set(PARSERS) == {"qwen3_coder", "qwen3_xml"}
    assert not any(factory().keeps_special_tokens for factory in PARSERS.values())


# -- shared behaviour ----------------------------------------------------------------------------

BOTH_CASES = [
    pytest.param(
        "I will check.\n" + block("get_weather", city="Paris", days="3"),
        WEATHER,
        ExtractedToolCalls("I will check.\n", calls(("get_weather", '{"city": "Paris", "days": 3}'))),
        id="content-before-unstripped",
    ),
    pytest.param(
        block("get_weather", city="Zürich", days="1") + "\n" + block("get_weather", city="Oslo", days="2"),
        WEATHER,
        ExtractedToolCalls(
            None,
            calls(
                ("get_weather", '{"city": "Zürich", "days": 1}'),
                ("get_weather", '{"city": "Oslo", "days": 2}'),
            ),
        ),
        id="two-calls-utf8-kept",
    ),
    pytest.param(
        "<tool_call>\n<function=ping>\n</function>\n</tool_call>",
        WEATHER,
        ExtractedToolCalls(None, calls(("ping", "{}"))),
        id="no-parameters",
    ),
    pytest.param(
        block("get_weather", city="line one\n\nline three\n", days="7"),
        WEATHER,
        ExtractedToolCalls(
            None, calls(("get_weather", '{"city": "line one\\n\\nline three\\n", "days": 7}'))
        ),
        id="one-template-newline-trimmed-each-side",
    ),
    pytest.param(
        block("get_weather", city="Paris", days="3"),
        None,
        ExtractedToolCalls(None, calls(("get_weather", '{"city": "Paris", "days": "3"}'))),
        id="no-tools-everything-a-string",
    ),
    pytest.param(
        block("lookup", q="a < b & c > d"),
        [tool("lookup", q="string")],
        ExtractedToolCalls(None, calls(("lookup", '{"q": "a < b & c > d"}'))),
        id="angle-brackets-and-ampersand-in-value",
    ),
    pytest.param(
        "Plain answer, no calls.", WEATHER, ExtractedToolCalls("Plain answer, no calls."), id="plain-text"
    ),
]


@pytest.mark.parametrize(("text", "tools", "expected"), BOTH_CASES)
def test_qwen3_coder_common(text, tools, expected):
    assert Qwen3CoderParser().extract(text, tools) == expected


@pytest.mark.parametrize(("text", "tools", "expected"), BOTH_CASES)
def test_qwen3_xml_common(text, tools, expected):
    assert Qwen3XmlParser().extract(text, tools) == expected


# -- qwen3_coder ---------------------------------------------------------------------------------

CONVERTING = [
    tool(
        "f",
        i="integer",
        n="number",
        whole="number",
        b="boolean",
        o="object",
        a="array",
        s="string",
        d="dict",
        odd="custom",
        multi={"type": ["integer", "null"]},
        union={"anyOf": [{"type": "integer"}, {"type": "null"}]},
        bad_int="integer",
        nan="number",
        nested_str="string",
    )
]

CODER_CONVERSIONS = [
    pytest.param("i", " 42 ", 42, id="int-via-int()"),
    pytest.param("i", "4.5", "4.5", id="bad-int-stays-string"),
    pytest.param("n", "2.5", 2.5, id="float"),
    pytest.param("whole", "2.0", 2, id="whole-float-becomes-int"),
    pytest.param("nan", "nan", "nan", id="nan-stays-string"),
    pytest.param("b", "True", True, id="bool-case-insensitive"),
    pytest.param("b", "yes", False, id="non-true-bool-is-false"),
    pytest.param("o", '{"k": [1, null]}', {"k": [1, None]}, id="object-json"),
    pytest.param("a", "['x', 1]", ["x", 1], id="array-python-literal-fallback"),
    pytest.param("a", "not a list", "not a list", id="array-unreadable-stays-string"),
    pytest.param("d", '{"k": 1}', {"k": 1}, id="dict-prefix-json"),
    pytest.param("odd", "(1, 2)", [1, 2], id="unknown-type-literal-eval"),
    pytest.param("odd", "hello", "hello", id="unknown-type-unreadable-string"),
    pytest.param("multi", "5", 5, id="type-list-stringified-then-literal-eval"),
    pytest.param("union", "5", 5, id="anyof-read-as-object-json"),
    pytest.param("s", "NULL", None, id="null-even-for-strings"),
    pytest.param("s", "123", "123", id="string-kept"),
    pytest.param("undeclared", "123", "123", id="undeclared-parameter-string"),
]


@pytest.mark.parametrize(("key", "raw", "value"), CODER_CONVERSIONS)
def test_qwen3_coder_schema_conversion(key, raw, value):
    import json

    result = Qwen3CoderParser().extract(block("f", **{key: raw}), CONVERTING)
    assert result.content is None
    assert [call.name for call in result.calls] == ["f"]
    assert json.loads(result.calls[0].arguments) == {key: value}
    assert result.calls[0].arguments == json.dumps({key: value}, ensure_ascii=False)


CODER_CASES = [
    pytest.param(
        "Sure <function=get_weather>\n<parameter=city>\nRome\n</parameter>\n</function>",
        ExtractedToolCalls("Sure ", calls(("get_weather", '{"city": "Rome"}'))),
        id="bare-function-without-tool-call",
    ),
    pytest.param(
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n<parameter=days>\n2\n</function>\n</tool_call>",
        ExtractedToolCalls(None, calls(("get_weather", '{"city": "Rome", "days": 2}'))),
        id="missing-parameter-close-ends-at-next-tag",
    ),
    pytest.param(
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome",
        ExtractedToolCalls(None, calls(("get_weather", '{"city": "Rome"}'))),
        id="truncated-call",
    ),
    pytest.param(
        "x<tool_call>\n<function=broken</function>\n</tool_call>",
        ExtractedToolCalls("x", []),
        id="function-without-gt-dropped-content-kept",
    ),
    pytest.param(
        "<tool_call>\n<function=get_weather>\n<parameter=city\nRome\n</parameter>\n</function>\n</tool_call>",
        ExtractedToolCalls(
            "<tool_call>\n<function=get_weather>\n<parameter=city\nRome\n</parameter>\n</function>\n</tool_call>"
        ),
        id="parameter-without-gt-voids-all",
    ),
    pytest.param(
        block("get_weather", city="Paris") + "\nAnything after",
        ExtractedToolCalls(None, calls(("get_weather", '{"city": "Paris"}'))),
        id="text-after-dropped",
    ),
]


@pytest.mark.parametrize(("text", "expected"), CODER_CASES)
def test_qwen3_coder(text, expected):
    assert Qwen3CoderParser().extract(text, WEATHER) == expected


def test_qwen3_coder_infinite_number_voids_everything():
    text = block("f", n="inf")
    assert Qwen3CoderParser().extract(text, CONVERTING) == ExtractedToolCalls(text)


# -- qwen3_xml -----------------------------------------------------------------------------------

XML_TOOLS = [tool("f", s="string", i="integer", n="number", b="boolean", o="object", a="array", x="Integer")]

XML_CASES = [
    pytest.param(
        block("f", s="null", i="7", b="true"),
        ExtractedToolCalls(None, calls(("f", '{"s": "", "i": 7, "b": true}'))),
        id="string-null-becomes-empty",
    ),
    pytest.param(
        block("f", a="[1, 'two', 3.0]"),
        ExtractedToolCalls(None, calls(("f", '{"a": [1, "two", 3.0]}'))),
        id="array-read-as-python-literal",
    ),
    pytest.param(
        block("f", a="[true, null]"),
        ExtractedToolCalls(None, calls(("f", '{"a": "\\n[true, null]\\n"}'))),
        id="array-with-json-words-kept-as-raw-string",
    ),
    pytest.param(
        block("f", o='{"k":  [1,2]}'),
        ExtractedToolCalls(None, calls(("f", '{"o": {"k":  [1,2]}}'))),
        id="object-copied-verbatim",
    ),
    pytest.param(
        block("f", o="{'k': 'v'}"),
        ExtractedToolCalls(None, calls(("f", '{"o": {"k": "v"}}'))),
        id="object-with-single-quotes-read-as-literal",
    ),
    pytest.param(
        block("f", i="twelve", n="2.0"),
        ExtractedToolCalls(None, calls(("f", '{"i": twelve, "n": 2}'))),
        id="unconvertible-int-goes-in-verbatim",
    ),
    pytest.param(
        block("f", i="null"),
        ExtractedToolCalls(None, calls(("f", '{"i": }'))),
        id="null-of-non-string-leaves-a-hole",
    ),
    pytest.param(
        block("f", x="5"),
        ExtractedToolCalls(None, calls(("f", '{"x": "5"}'))),
        id="unknown-case-type-read-as-string",
    ),
    pytest.param(
        block("f", s="a") + "\nnote between\n" + block("f", s="b") + "\nafter the calls",
        ExtractedToolCalls("\nnote between\n", calls(("f", '{"s": "a"}'), ("f", '{"s": "b"}'))),
        id="text-between-kept-text-after-lost",
    ),
    pytest.param(
        "Answer: 1 < 2 and <b>bold</b>",
        ExtractedToolCalls("Answer: 1 < 2 and <b>bold</b>"),
        id="plain-text-with-tags",
    ),
    pytest.param(
        "Ends with a partial <tool", ExtractedToolCalls("Ends with a partial "), id="partial-tag-at-end-lost"
    ),
    pytest.param(
        "<tool_call>\n<function=f>\n<parameter=s>\nhi\n</parameter>\n</function>",
        ExtractedToolCalls(None, calls(("f", '{"s": "hi"}'))),
        id="missing-tool-call-close",
    ),
    pytest.param(
        "<tool_call>\n<function=f>\n<parameter=s>\nhi",
        ExtractedToolCalls(None, calls(("f", '{"s": "hi'))),
        id="truncated-value-left-open",
    ),
    pytest.param(
        block("f", n="inf", s="x"),
        ExtractedToolCalls(None, calls(("f", '{"n": '))),
        id="infinite-number-stops-the-call",
    ),
    pytest.param(
        block("f", s="bad \x01 char") + "\n" + block("f", s="ok"),
        # expat rejects the control character before any text reaches the handler; the next
        # <tool_call> closes the broken call with an empty string.
        ExtractedToolCalls(None, calls(("f", '{"s": ""}'), ("f", '{"s": "ok"}'))),
        id="xml-error-loses-the-value",
    ),
]


@pytest.mark.parametrize(("text", "expected"), XML_CASES)
def test_qwen3_xml(text, expected):
    assert Qwen3XmlParser().extract(text, XML_TOOLS) == expected
