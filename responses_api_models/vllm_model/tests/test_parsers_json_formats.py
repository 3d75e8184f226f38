"""Hand-written vectors for the JSON/pythonic tool-call formats: each is what vLLM's parser of that
name returns for the text (vllm/tool_parsers/*, 2026 main), quirks included."""

from __future__ import annotations

import pytest

from responses_api_models.vllm_model.parsers.base import ExtractedToolCalls, ParsedCall
from responses_api_models.vllm_model.parsers.json_formats import (
    PARSERS,
    HermesParser,
    Llama3JsonParser,
    Llama4PythonicParser,
    MistralParser,
    PythonicParser,
    _starts_like_call_list,
)

TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]


def calls(*pairs: tuple[str, str]) -> list[ParsedCall]:
    return [ParsedCall(name, arguments) for name, arguments in pairs]


def test_registry_names_and_special_tokens():
    assert set(PARSERS) == {"hermes", "llama3_json", "llama4_json", "pythonic", "llama4_pythonic", "mistral"}
    kept = {name for name, factory in PARSERS.items() if factory().keeps_special_tokens}
    assert kept == {"hermes", "mistral"}  # the two whose adjust_request sets skip_special_tokens=False


# -- hermes ---------------------------------------------------------------------------------------

HERMES_CASES = [
    pytest.param(
        '<tool_call>\n{"name": "f", "arguments": {"city": "Zürich", "n": 2}}\n</tool_call>',
        ExtractedToolCalls(None, calls(("f", '{"city": "Zürich", "n": 2}'))),
        id="one-call-utf8-kept",
    ),
    pytest.param(
        'Checking.\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>\n'
        '<tool_call>\n{"name":"g","arguments":{"a":[1,2.0]}}\n</tool_call>\ntrailing text',
        ExtractedToolCalls("Checking.\n", calls(("f", "{}"), ("g", '{"a": [1, 2.0]}'))),
        id="content-before-unstripped-two-calls-redumped-trailing-dropped",
    ),
    pytest.param(
        '<tool_call>{"name": "f", "arguments": {"a": 1}}',
        ExtractedToolCalls(None, calls(("f", '{"a": 1}'))),
        id="unclosed-last-block",
    ),
    pytest.param(
        '<tool_call>{"name": "f", "arguments": "{\\"a\\": 1}"}</tool_call>',
        ExtractedToolCalls(None, calls(("f", '"{\\"a\\": 1}"'))),
        id="string-arguments-stay-a-json-string",
    ),
    pytest.param("just text", ExtractedToolCalls("just text"), id="no-marker"),
    pytest.param(
        'ok <tool_call>{"name": "f", "arguments": {}}</tool_call><tool_call>{"name": "g"}</tool_call>',
        ExtractedToolCalls(
            'ok <tool_call>{"name": "f", "arguments": {}}</tool_call><tool_call>{"name": "g"}</tool_call>'
        ),
        id="missing-arguments-voids-all",
    ),
    pytest.param(
        "<tool_call>{not json}</tool_call>",
        ExtractedToolCalls("<tool_call>{not json}</tool_call>"),
        id="bad-json-whole-text",
    ),
    pytest.param(
        '<tool_call>{"name": 3, "arguments": {}}</tool_call>',
        ExtractedToolCalls('<tool_call>{"name": 3, "arguments": {}}</tool_call>'),
        id="non-string-name-whole-text",
    ),
    pytest.param("<tool_call></tool_call>", ExtractedToolCalls("<tool_call></tool_call>"), id="empty-block"),
]


@pytest.mark.parametrize(("text", "expected"), HERMES_CASES)
def test_hermes(text, expected):
    assert HermesParser().extract(text, TOOLS) == expected


# -- llama3_json ----------------------------------------------------------------------------------

LLAMA_CASES = [
    pytest.param(
        '{"name": "f", "parameters": {"q": "ä"}}',
        ExtractedToolCalls(None, calls(("f", '{"q": "ä"}'))),
        id="parameters-key",
    ),
    pytest.param(
        'Let me look. {"name": "f", "arguments": {"x": {"y": 1}}}; {"name": "g", "parameters": {}} done',
        ExtractedToolCalls(None, calls(("f", '{"x": {"y": 1}}'), ("g", "{}"))),
        id="several-calls-surrounding-text-dropped",
    ),
    pytest.param(
        '<|python_tag|>{"name": "f", "arguments": {}, "parameters": {"ignored": 1}}',
        ExtractedToolCalls(None, calls(("f", "{}"))),
        id="python-tag-and-arguments-preferred",
    ),
    pytest.param("no braces here", ExtractedToolCalls("no braces here"), id="plain"),
    pytest.param(
        '{"name": "f", "arguments": {}} and {oops}',
        ExtractedToolCalls('{"name": "f", "arguments": {}} and {oops}'),
        id="later-bad-json-voids-all",
    ),
    pytest.param('{"tool": "f"}', ExtractedToolCalls('{"tool": "f"}'), id="missing-name"),
    pytest.param(
        '{"name": "f", "arguments": {}}{"name": "g", "arguments": {"a": 1}}',
        ExtractedToolCalls('{"name": "f", "arguments": {}}{"name": "g", "arguments": {"a": 1}}'),
        id="adjacent-object-skipped-then-inner-brace-fails",
    ),
    pytest.param("<|python_tag|>no json", ExtractedToolCalls("<|python_tag|>no json"), id="tag-without-json"),
]


@pytest.mark.parametrize(("text", "expected"), LLAMA_CASES)
def test_llama3_json(text, expected):
    assert Llama3JsonParser().extract(text, TOOLS) == expected


# -- pythonic / llama4_pythonic -------------------------------------------------------------------

PYTHONIC_CASES = [
    pytest.param(
        "[get_weather(city='Paris', days=3)]",
        ExtractedToolCalls(None, calls(("get_weather", '{"city": "Paris", "days": 3}'))),
        id="one-call",
    ),
    pytest.param(
        '[f(a=[1, 2.5], b={"k": None}), g(flag=True, x=null, y=false), h()]',
        ExtractedToolCalls(
            None,
            calls(
                ("f", '{"a": [1, 2.5], "b": {"k": null}}'),
                ("g", '{"flag": true, "x": null, "y": false}'),
                ("h", "{}"),
            ),
        ),
        id="several-calls-literals-and-json-words",
    ),
    pytest.param("[f(a='é')]", ExtractedToolCalls(None, calls(("f", '{"a": "é"}'))), id="utf8-kept"),
    pytest.param("Sure: [f(a=1)]", ExtractedToolCalls("Sure: [f(a=1)]"), id="content-before-means-no-calls"),
    pytest.param("[f(a=1)] done", ExtractedToolCalls("[f(a=1)] done"), id="text-after-is-a-syntax-error"),
    pytest.param("[f(a=-1)]", ExtractedToolCalls("[f(a=-1)]"), id="negative-number-not-a-literal"),
    pytest.param("[f(a=x)]", ExtractedToolCalls("[f(a=x)]"), id="bare-name-not-a-literal"),
    pytest.param("[f(1, a=2)]", ExtractedToolCalls("[f(1, a=2)]"), id="positional-fails-the-pattern"),
    pytest.param(
        "[f(a=1, *rest)]", ExtractedToolCalls(None, calls(("f", '{"a": 1}'))), id="starred-positional-ignored"
    ),
    pytest.param("[f(a=b'x')]", ExtractedToolCalls("[f(a=b'x')]"), id="bytes-unserialisable"),
    pytest.param("[1, 2]", ExtractedToolCalls("[1, 2]"), id="not-calls"),
]


@pytest.mark.parametrize(("text", "expected"), PYTHONIC_CASES)
def test_pythonic(text, expected):
    assert PythonicParser().extract(text, TOOLS) == expected


@pytest.mark.parametrize(
    ("text", "is_call_list"),
    [
        ("[f()g()]", True),  # passes vLLM's pattern (then fails to parse as Python)
        ("[f(), g()]", True),
        ("[f(a=1), g(b=')]')", True),  # after `name(key=` anything may precede `)]`
        ("[ f()]", False),  # no space allowed after the bracket
        ("[f() , g()]", False),  # the comma must follow the parenthesis
        ("[f(), g]", False),
        ("[f(a=1]", False),  # `)` then `]` must follow the first keyword
        ("[1f()]", False),
    ],
)
def test_pythonic_shape_gate(text, is_call_list):
    assert _starts_like_call_list(text) == is_call_list


def test_pythonic_truncated_long_list_is_plain_text_quickly():
    # vLLM's regular expression needs a timeout here; the gate must stay linear.
    text = "[search(" + "term='x', " * 5000
    assert PythonicParser().extract(text, TOOLS) == ExtractedToolCalls(text)


def test_llama4_pythonic_drops_python_markers_only_when_leading():
    parser = Llama4PythonicParser()
    wrapped = "<|python_start|>[f(a=1)]<|python_end|>"
    assert parser.extract(wrapped, TOOLS) == ExtractedToolCalls(None, calls(("f", '{"a": 1}')))
    assert parser.extract("[f(a=1)]", TOOLS) == ExtractedToolCalls(None, calls(("f", '{"a": 1}')))
    # Not a call list once trimmed: the content is the trimmed text.
    assert parser.extract("<|python_start|>hello<|python_end|>", TOOLS) == ExtractedToolCalls("hello")
    # Without the leading marker nothing is trimmed.
    assert parser.extract("x<|python_start|>[f()]", TOOLS) == ExtractedToolCalls("x<|python_start|>[f()]")


# -- mistral --------------------------------------------------------------------------------------

MISTRAL_V11_CASES = [
    pytest.param(
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}',
        ExtractedToolCalls(None, calls(("get_weather", '{"city": "Paris"}'))),
        id="one-call",
    ),
    pytest.param(
        'Let me check.[TOOL_CALLS]f[ARGS]{"a":1}[TOOL_CALLS]g[ARGS]{ "b" : [1] } ',
        ExtractedToolCalls("Let me check.", calls(("f", '{"a":1}'), ("g", '{ "b" : [1] } '))),
        id="arguments-verbatim-content-before",
    ),
    pytest.param(
        "[TOOL_CALLS]f[ARGS]{not json",
        ExtractedToolCalls(None, calls(("f", "{not json"))),
        id="malformed-arguments-still-a-call",
    ),
    pytest.param(
        '[TOOL_CALLS]f[ARGS]{"a": 1}[TOOL_CALLS]no_brace',
        ExtractedToolCalls(None, calls(("f", '{"a": 1}'))),
        id="chunk-without-brace-skipped",
    ),
    pytest.param("plain answer", ExtractedToolCalls("plain answer"), id="no-marker"),
]


@pytest.mark.parametrize(("text", "expected"), MISTRAL_V11_CASES)
def test_mistral_v11(text, expected):
    assert MistralParser(pre_v11=False).extract(text, TOOLS) == expected


MISTRAL_PRE_V11_CASES = [
    pytest.param(
        '[TOOL_CALLS] [{"name": "f", "arguments": {"a": "ü"}}, {"name": "g"}]',
        ExtractedToolCalls(None, calls(("f", '{"a": "ü"}'), ("g", "{}"))),
        id="json-list-missing-arguments-is-empty",
    ),
    pytest.param(
        'Hi[TOOL_CALLS][{"name": "f", "arguments": {}}] trailing',
        ExtractedToolCalls("Hi", calls(("f", "{}"))),
        id="trailing-text-ignored-by-raw-decode",
    ),
    pytest.param(
        'x[TOOL_CALLS] junk [{"name": "f", "arguments": {"b": 2}}] end',
        ExtractedToolCalls("x", calls(("f", '{"b": 2}'))),
        id="regex-fallback",
    ),
    pytest.param(
        "Hi[TOOL_CALLS]  not json at all ",
        ExtractedToolCalls("not json at all"),
        id="unreadable-gives-stripped-tail-as-content",
    ),
]


@pytest.mark.parametrize(("text", "expected"), MISTRAL_PRE_V11_CASES)
def test_mistral_pre_v11(text, expected):
    assert MistralParser(pre_v11=True).extract(text, TOOLS) == expected


@pytest.mark.parametrize(
    "text",
    [
        '[TOOL_CALLS][{"name": "f"}][TOOL_CALLS][]',
        '[TOOL_CALLS]{"name": "f"}',
        '[TOOL_CALLS][{"arguments": {}}]',
    ],
)
def test_mistral_pre_v11_failures_vllm_turns_into_request_errors(text):
    with pytest.raises(ValueError):
        MistralParser(pre_v11=True).extract(text, TOOLS)


def test_mistral_format_follows_args_marker_by_default():
    parser = MistralParser()
    assert parser.extract('[TOOL_CALLS]f[ARGS]{"a": 1}', TOOLS).calls == calls(("f", '{"a": 1}'))
    assert parser.extract('[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}}]', TOOLS).calls == calls(
        ("f", '{"a": 1}')
    )
