"""Hand-written vectors for the reasoning parsers: (reasoning, content) as vLLM's `extract_reasoning`
returns them (vllm/reasoning/*)."""

from __future__ import annotations

import pytest

from responses_api_models.vllm_model.parsers.reasoning import (
    PARSERS,
    DeepSeekV3Parser,
    Glm45Parser,
    GraniteParser,
    MistralThinkParser,
    Qwen3Parser,
    ThinkTagsParser,
)


def test_registry():
    assert {"qwen3", "deepseek_r1"} <= set(PARSERS)
    for factory in PARSERS.values():
        assert factory().extract("plain") in {("plain", None), (None, "plain")}


DEEPSEEK_R1 = [
    pytest.param("<think>plan</think>answer", ("plan", "answer"), id="both-tags"),
    pytest.param("plan</think>\n\nanswer", ("plan", "\n\nanswer"), id="start-in-prompt-content-unstripped"),
    pytest.param("plan</think>", ("plan", None), id="nothing-after-end"),
    pytest.param("still thinking", ("still thinking", None), id="no-end-all-reasoning"),
    pytest.param("<think>a</think>b</think>c", ("a", "b</think>c"), id="first-end-splits"),
    pytest.param("intro<think>a</think>b", ("a", "b"), id="text-before-start-dropped"),
    pytest.param("", ("", None), id="empty"),
]


@pytest.mark.parametrize(("text", "expected"), DEEPSEEK_R1)
def test_deepseek_r1(text, expected):
    assert ThinkTagsParser().extract(text) == expected


QWEN3 = [
    pytest.param("<think>\nplan\n</think>\n\nanswer", ("\nplan\n", "\n\nanswer"), id="both-tags"),
    pytest.param("plan</think>answer", ("plan", "answer"), id="start-in-prompt"),
    pytest.param("</think>answer", ("", "answer"), id="empty-reasoning-is-empty-string"),
    pytest.param("cut off mid thought", ("cut off mid thought", None), id="truncated-is-reasoning"),
    pytest.param(
        "I should call it.\n<tool_call>\n{}\n</tool_call>",
        ("I should call it.\n", "<tool_call>\n{}\n</tool_call>"),
        id="tool-call-ends-reasoning",
    ),
    pytest.param("<tool_call>x", (None, "<tool_call>x"), id="tool-call-first-reasoning-none"),
    pytest.param("a</think>b<tool_call>c", ("a", "b<tool_call>c"), id="end-tag-wins-over-tool-call"),
]


@pytest.mark.parametrize(("text", "expected"), QWEN3)
def test_qwen3(text, expected):
    assert Qwen3Parser().extract(text) == expected


def test_qwen3_thinking_disabled_means_content_without_end_tag():
    parser = Qwen3Parser(thinking_enabled=False)
    assert parser.extract("just an answer <tool_call>x") == (None, "just an answer <tool_call>x")
    assert parser.extract("<think>a</think>b") == ("a", "b")


def test_deepseek_v3_needs_thinking_switch():
    assert DeepSeekV3Parser().extract("a</think>b") == (None, "a</think>b")
    assert DeepSeekV3Parser(thinking=True).extract("a</think>b") == ("a", "b")


GLM45 = [
    pytest.param("<think>a</think>b", ("a", "b"), id="both-tags"),
    pytest.param("a</think>b", (None, "a</think>b"), id="needs-start-tag"),
    pytest.param("<think>a", (None, "<think>a"), id="needs-end-tag"),
    pytest.param("<think>a</think>", ("a", None), id="empty-content-none"),
]


@pytest.mark.parametrize(("text", "expected"), GLM45)
def test_glm45(text, expected):
    assert Glm45Parser().extract(text) == expected


GRANITE = [
    pytest.param(
        "Here is my thought process: think Here is my response: answer",
        (" think ", " answer"),
        id="both-headers",
    ),
    pytest.param(
        "Here's my thought process:x Here is my response:", ("x ", None), id="short-form-empty-response"
    ),
    pytest.param(
        "Here is my thought process: only thoughts",
        (None, "Here is my thought process: only thoughts"),
        id="one-header",
    ),
    pytest.param("plain", (None, "plain"), id="none"),
]


@pytest.mark.parametrize(("text", "expected"), GRANITE)
def test_granite(text, expected):
    assert GraniteParser().extract(text) == expected


MISTRAL = [
    pytest.param("[THINK]plan[/THINK]answer", ("plan", "answer"), id="both"),
    pytest.param("pre[THINK]plan[/THINK]post", ("plan", "prepost"), id="content-around"),
    pytest.param("[THINK]plan[/THINK]", ("plan", None), id="no-content"),
    pytest.param("[THINK]unfinished", ("unfinished", None), id="start-only"),
    pytest.param("a[/THINK]b", (None, "ab"), id="stray-end-removed"),
    pytest.param("plain", (None, "plain"), id="plain"),
    pytest.param("", (None, ""), id="empty"),
]


@pytest.mark.parametrize(("text", "expected"), MISTRAL)
def test_mistral(text, expected):
    assert MistralThinkParser().extract(text) == expected
