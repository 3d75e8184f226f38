"""The marker-token formats, vector by vector: each expected value is what vLLM 0.23.0's chat endpoint
returns for the text (its parser, then the endpoint's own rule that whitespace-only content next to
calls is no content), read from vLLM's source and openai_harmony's parser, not from this code."""

from __future__ import annotations

from typing import Any

import pytest

from responses_api_models.vllm_model.parsers.base import ExtractedToolCalls, ParsedCall
from responses_api_models.vllm_model.parsers.special_token_formats import (
    PARSERS,
    REASONING_PARSERS,
    parse_harmony,
)
from responses_api_models.vllm_model.tests.format_samples_b import SAMPLES, SPECIAL_MARKERS

B, END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
C, E, S = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"
KB, KE = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
KC, KA, KX = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"
PARIS = '{"city": "Paris"}'
WEATHER = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": ["integer", "null"]}},
            },
        },
    }
]


def v3_call(name: str, args: str, kind: str = "function") -> str:
    return f"{C}{kind}{S}{name}\n```json\n{args}\n```{E}"


def glm_call(name: str, *pairs: tuple[str, str]) -> str:
    body = "".join(f"<arg_key>{k}</arg_key>\n<arg_value>{v}</arg_value>\n" for k, v in pairs)
    return f"\n<tool_call>{name}\n{body}</tool_call>"


HARMONY_CALL = '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}'
ANALYSIS = "<|channel|>analysis<|message|>Need the weather.<|end|>"

VECTORS: list[tuple[str, str, Any, str | None, list[ParsedCall]]] = [
    # ---- deepseek_v3: content is the text before the section; arguments verbatim.
    ("deepseek_v3", B + v3_call("get_weather", PARIS) + END, None, None, [ParsedCall("get_weather", PARIS)]),
    (
        "deepseek_v3",
        "Let me check." + B + v3_call("get_weather", PARIS) + "\n" + v3_call("get_time", "{}") + END,
        None,
        "Let me check.",
        [ParsedCall("get_weather", PARIS), ParsedCall("get_time", "{}")],
    ),
    # Text after the section is dropped; whitespace before it is no content.
    ("deepseek_v3", " \n" + B + v3_call("f", "{}") + END + " Done.", None, None, [ParsedCall("f", "{}")]),
    ("deepseek_v3", "Paris is sunny.", None, "Paris is sunny.", []),
    # Pretty-printed arguments are not matched, yet the section marker still counts as calling tools.
    ("deepseek_v3", "Hi" + B + v3_call("f", '{\n"a": 1\n}') + END, None, "Hi", []),
    # A call type other than "function" fails vLLM's validation: the whole text stays content.
    (
        "deepseek_v3",
        "Hi" + B + v3_call("f", "{}", kind="tool") + END,
        None,
        "Hi" + B + v3_call("f", "{}", "tool") + END,
        [],
    ),
    # ---- deepseek_v31
    ("deepseek_v31", f"{B}{C}get_weather{S}{PARIS}{E}{END}", None, None, [ParsedCall("get_weather", PARIS)]),
    (
        "deepseek_v31",
        f'Checking both.{B}{C}get_weather{S}{{"city":"Paris"}}{E}{C}get_time{S}{{}}{E}{END}',
        None,
        "Checking both.",
        [ParsedCall("get_weather", '{"city":"Paris"}'), ParsedCall("get_time", "{}")],
    ),
    # A call whose arguments span lines is skipped; the others stay.
    ("deepseek_v31", f"{B}{C}f{S}{{\n}}{E}{C}g{S}{{}}{E}{END}", None, None, [ParsedCall("g", "{}")]),
    ("deepseek_v31", "No tools today.", None, "No tools today.", []),
    # ---- kimi_k2: the id comes from the text; whitespace around id and arguments is ignored.
    (
        "kimi_k2",
        f"{KB}{KC}functions.get_weather:0{KA}{PARIS}{KX}{KE}",
        None,
        None,
        [ParsedCall("get_weather", PARIS, "functions.get_weather:0")],
    ),
    (
        "kimi_k2",
        f"Both at once.{KB}{KC} functions.get_weather:3 \n{KA} {PARIS} \n{KX}{KC}get_time:4{KA}{{}}{KX}{KE}",
        None,
        "Both at once.",
        [
            ParsedCall("get_weather", PARIS, "functions.get_weather:3"),
            ParsedCall("get_time", "{}", "get_time:4"),
        ],
    ),
    # An id without `:N` is not a call; the section alone still makes whitespace content None.
    ("kimi_k2", f"  {KB}{KC}get_weather{KA}{{}}{KX}{KE}", None, None, []),
    # Call markers outside a section are plain text.
    ("kimi_k2", f"{KC}functions.f:0{KA}{{}}{KX}", None, f"{KC}functions.f:0{KA}{{}}{KX}", []),
    # ---- glm45: arguments rebuilt with json.dumps(ensure_ascii=False); content keeps its line break.
    ("glm45", glm_call("get_weather", ("city", "Paris")), WEATHER, None, [ParsedCall("get_weather", PARIS)]),
    (
        "glm45",
        "\nI'll look." + glm_call("get_weather", ("city", "Zürich"), ("days", "3")) + glm_call("get_time"),
        WEATHER,
        "\nI'll look.\n",
        [ParsedCall("get_weather", '{"city": "Zürich", "days": 3}'), ParsedCall("get_time", "{}")],
    ),
    # A string parameter is kept verbatim; undeclared values are read as JSON, then as a Python literal.
    (
        "glm45",
        glm_call(
            "get_weather",
            ("city", " 42 "),
            ("days", "null"),
            ("flag", "True"),
            ("pair", "(1, 2)"),
            ("w", "x y"),
        ),
        WEATHER,
        None,
        [
            ParsedCall(
                "get_weather", '{"city": " 42 ", "days": null, "flag": true, "pair": [1, 2], "w": "x y"}'
            )
        ],
    ),
    # Without the tool list the same digits are a number.
    (
        "glm45",
        glm_call("get_weather", ("city", " 42 ")),
        None,
        None,
        [ParsedCall("get_weather", '{"city": 42}')],
    ),
    # A name with no line break after it is skipped: no call left, so the text stays content.
    ("glm45", "<tool_call>get_time</tool_call>", None, "<tool_call>get_time</tool_call>", []),
    # A value json.dumps cannot write (a Python set) makes vLLM keep the whole text.
    (
        "glm45",
        glm_call("f", ("a", "{1, 2}")) + glm_call("g"),
        None,
        glm_call("f", ("a", "{1, 2}")) + glm_call("g"),
        [],
    ),
    ("glm45", "<tool_call>get_weather\n<arg_key>city", None, "<tool_call>get_weather\n<arg_key>city", []),
    # ---- granite: the whole turn must be the JSON list; content is then None.
    (
        "granite",
        '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]',
        None,
        None,
        [ParsedCall("get_weather", PARIS)],
    ),
    (
        "granite",
        ' [{"name":"get_weather","arguments":{"city":"Zürich"}},{"name":"get_time","arguments":{}}] ',
        None,
        None,
        [ParsedCall("get_weather", '{"city": "Zürich"}'), ParsedCall("get_time", "{}")],
    ),
    ("granite", '<tool_call> [{"name": "f", "arguments": "s"}]', None, None, [ParsedCall("f", '"s"')]),
    ("granite", ' \n<|tool_call|>[{"name": "f", "arguments": {}}]', None, None, [ParsedCall("f", "{}")]),
    ("granite", 'Sure: [{"name": "f", "arguments": {}}]', None, 'Sure: [{"name": "f", "arguments": {}}]', []),
    (
        "granite",
        '[{"name": "f", "arguments": {}}] thanks',
        None,
        '[{"name": "f", "arguments": {}}] thanks',
        [],
    ),
    ("granite", '[{"name": "f"}]', None, '[{"name": "f"}]', []),
    ("granite", '[{"name": 3, "arguments": {}}]', None, '[{"name": 3, "arguments": {}}]', []),
    # ---- openai (harmony): calls from messages to functions; arguments via json.dumps defaults.
    ("openai", ANALYSIS + HARMONY_CALL, None, None, [ParsedCall("get_weather", PARIS)]),
    (
        "openai",
        '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Zürich"}',
        None,
        None,
        [ParsedCall("get_weather", '{"city": "Z\\u00fcrich"}')],
    ),
    # The recipient may come before the channel, with a bare content type; a bare name is a function too.
    (
        "openai",
        ' to=get_weather<|channel|>commentary json<|message|>{"city": "Paris"}',
        None,
        None,
        [ParsedCall("get_weather", PARIS)],
    ),
    # A lone word after the channel is the recipient, not a content type.
    (
        "openai",
        '<|channel|>commentary get_weather<|message|>{"city":"Paris"}',
        None,
        None,
        [ParsedCall("get_weather", PARIS)],
    ),
    (
        "openai",
        ANALYSIS + "<|start|>assistant<|channel|>commentary<|message|>Checking now.<|end|>" + HARMONY_CALL,
        None,
        "Checking now.",
        [ParsedCall("get_weather", PARIS)],
    ),
    # Invalid JSON and non-JSON content types stay verbatim; built-in tools are not function calls.
    (
        "openai",
        "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{oops<|call|>"
        "<|start|>assistant<|channel|>commentary to=functions.g <|constrain|>text<|message|>a  b<|call|>"
        "<|start|>assistant<|channel|>analysis to=browser.search<|message|>{}",
        None,
        None,
        [ParsedCall("f", "{oops"), ParsedCall("g", "a  b")],
    ),
    # The last final message wins over an earlier one and over preambles.
    (
        "openai",
        "<|channel|>final<|message|>First.<|end|><|start|>assistant<|channel|>commentary<|message|>Pre.<|end|>"
        "<|start|>assistant<|channel|>final<|message|>Second.",
        None,
        "Second.",
        [],
    ),
    # After a stop token openai_harmony needs <|start|>; on anything else it raises and vLLM fails the
    # request. A message has to come out of a continued turn, so here the messages before it are kept.
    ("openai", "<|channel|>final<|message|>Kept.<|end|>stray" + HARMONY_CALL, None, "Kept.", []),
    # Plain text passes through: it is what `openai_gptoss` leaves when the turn has no calls (vLLM's
    # content then), not something vLLM's tool parser itself is given.
    ("openai", "Paris is sunny.", None, "Paris is sunny.", []),
]


@pytest.mark.parametrize(("parser", "text", "tools", "content", "calls"), VECTORS)
def test_each_vector_parses_as_vllm_returns_it(
    parser: str, text: str, tools: Any, content: str | None, calls: list[ParsedCall]
) -> None:
    assert PARSERS[parser]().extract(text, tools) == ExtractedToolCalls(content, calls)


def test_the_parsers_keep_special_tokens_exactly_where_vllm_asks_to() -> None:
    keeps = {name: factory().keeps_special_tokens for name, factory in PARSERS.items()}
    assert keeps == {
        "deepseek_v3": False,
        "deepseek_v31": False,
        "kimi_k2": True,
        "glm45": True,
        "granite": False,
        "openai": True,
    }


@pytest.mark.parametrize(
    ("text", "reasoning", "content"),
    [
        (ANALYSIS + "<|start|>assistant<|channel|>final<|message|>Sunny.", "Need the weather.", "Sunny."),
        (
            "<|channel|>analysis<|message|>One.<|end|><|start|>assistant<|channel|>analysis<|message|>Two.<|end|>"
            "<|start|>assistant<|channel|>final<|message|>Done.",
            "One.\nTwo.",
            "Done.",
        ),
        ("<|channel|>final<|message|>No thinking.", None, "No thinking."),
        (ANALYSIS, "Need the weather.", None),
        (ANALYSIS + "<|start|>assistant<|channel|>final<|message|>", "Need the weather.", None),
        # With calls, the harmony text itself goes on to the `openai` tool parser.
        (ANALYSIS + HARMONY_CALL, "Need the weather.", ANALYSIS + HARMONY_CALL),
        ("not harmony at all", None, None),
    ],
)
def test_the_gptoss_reasoning_parser_splits_analysis_from_what_the_tool_parser_reads(
    text: str, reasoning: str | None, content: str | None
) -> None:
    assert REASONING_PARSERS["openai_gptoss"]().extract(text) == (reasoning, content)


def test_reasoning_then_tool_parser_give_vllms_gptoss_message() -> None:
    text = ANALYSIS + "<|start|>assistant<|channel|>commentary<|message|>One moment.<|end|>" + HARMONY_CALL
    reasoning, rest = REASONING_PARSERS["openai_gptoss"]().extract(text)
    extracted = PARSERS["openai"]().extract(rest or "", WEATHER)
    assert (reasoning, extracted) == (
        "Need the weather.",
        ExtractedToolCalls("One moment.", [ParsedCall("get_weather", PARIS)]),
    )


def test_harmony_headers_are_read_like_openai_harmony_reads_them() -> None:
    text = (
        "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>"
        "<|start|>assistant to=functions.g<|channel|>commentary json<|message|>{}<|call|>"
        "<|start|>functions.g to=assistant<|channel|>commentary<|message|>sunny<|end|>"
        "<|start|>assistant<|channel|>final<|message|>a <|channel|> b"
    )
    read = [(m.role, m.channel, m.recipient, m.content_type, m.text) for m in parse_harmony(text)]
    assert read == [
        ("assistant", "commentary", "functions.f", "<|constrain|>json", "{}"),
        ("assistant", "commentary", "functions.g", "json", "{}"),
        ("tool", "commentary", "assistant", None, "sunny"),
        ("assistant", "final", None, None, "a <|channel|> b"),
    ]


def visible_text(parser: str, raw: str) -> str:
    """The generated text as vLLM decodes it: special tokens dropped unless the parser keeps them."""
    if PARSERS[parser]().keeps_special_tokens:
        return raw
    for marker in SPECIAL_MARKERS[parser]:
        raw = raw.replace(marker, "")
    return raw


def chat_message(parser: str, text: str) -> dict[str, Any]:
    """The message vLLM 0.23.0's chat endpoint builds with this tool parser (and, for `openai`, the
    `openai_gptoss` reasoning parser): parser content when calls were reported, else the text."""
    reasoning, content = (None, text)
    if parser == "openai":
        reasoning, content = REASONING_PARSERS["openai_gptoss"]().extract(text)
    extracted = PARSERS[parser]().extract(content or "", WEATHER)
    if extracted.calls or extracted.content:
        content = extracted.content
    message: dict[str, Any] = {
        "content": content,
        "tool_calls": [{"name": call.name, "arguments": call.arguments} for call in extracted.calls],
    }
    if parser == "openai":
        message["reasoning_content"] = reasoning
    return message


CASES = [
    ("", [("get_weather", {"city": "Paris"})]),
    ("Let me check both.", [("get_weather", {"city": "Zürich"}), ("get_time", {"zone": "CET", "days": 2})]),
    ("Paris is the sunniest.", []),
]


@pytest.mark.parametrize("parser", sorted(SAMPLES))
@pytest.mark.parametrize(("content", "calls"), CASES)
def test_every_sample_reads_back_into_the_message_vllm_returns(
    parser: str, content: str, calls: list
) -> None:
    raw, expected = SAMPLES[parser](content, calls)
    assert chat_message(parser, visible_text(parser, raw)) == expected


def test_samples_cover_every_parser_here() -> None:
    assert set(SAMPLES) == set(SPECIAL_MARKERS) == set(PARSERS)
