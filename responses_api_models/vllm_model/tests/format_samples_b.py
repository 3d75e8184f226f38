"""Generated turns in the marker-token formats (DeepSeek V3 / V3.1, Kimi K2, GLM-4.5, Granite 3, gpt-oss)
and the message vLLM 0.23.0's chat endpoint returns for each, written from vLLM's parsers, not from
this project's: a parser bug here shows up as a mismatch.

`SAMPLES[parser](content, calls)` gives `(raw, message)`. `raw` is what the model writes between the
chat template's assistant header and its end-of-turn token, every marker spelled out (special tokens
included). `message` is `{"content", "tool_calls": [{"name", "arguments"}]}` (plus `reasoning_content`
for `openai`), with the arguments as the exact string vLLM returns. Markers listed in
`SPECIAL_MARKERS[parser]` are special tokens of that family's tokenizer: vLLM drops them from the text
unless the parser asks to keep special tokens (kimi_k2, glm45, openai do when the request has tools).

Assumptions the expected messages rely on: argument values that are strings have no surrounding
whitespace and do not read as JSON or Python literals (GLM-4.5 would otherwise convert them unless the
tool declares them strings); non-string values are declared non-string by the tool.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

Calls = list[tuple[str, dict[str, Any]]]
Sample = tuple[str, dict[str, Any]]


def _message(content: str | None, calls: list[tuple[str, str]]) -> dict[str, Any]:
    return {"content": content, "tool_calls": [{"name": name, "arguments": args} for name, args in calls]}


def _content_with_calls(prefix: str) -> str | None:
    """vLLM's endpoint, once calls were found: the parser's content, with whitespace alone as None."""
    return prefix if prefix.strip() else None


def _model_json(arguments: dict[str, Any]) -> str:
    """Arguments as these models write them: JSON with spaces after separators, UTF-8 kept."""
    return json.dumps(arguments, ensure_ascii=False)


# DeepSeek V3 / V3.1: the section ends the turn before <｜end▁of▁sentence｜>; V3 puts a line break between
# calls (as its chat template renders them). vLLM returns the arguments verbatim and the text before the
# section as content.
DS_CALLS_BEGIN, DS_CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
DS_CALL_BEGIN, DS_CALL_END, DS_SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"


def deepseek_v3(content: str, calls: Calls) -> Sample:
    if not calls:
        return content, _message(content, [])
    written = [
        f"{DS_CALL_BEGIN}function{DS_SEP}{name}\n```json\n{_model_json(args)}\n```{DS_CALL_END}"
        for name, args in calls
    ]
    raw = content + DS_CALLS_BEGIN + "\n".join(written) + DS_CALLS_END
    return raw, _message(_content_with_calls(content), [(n, _model_json(a)) for n, a in calls])


def deepseek_v31(content: str, calls: Calls) -> Sample:
    if not calls:
        return content, _message(content, [])
    written = [f"{DS_CALL_BEGIN}{name}{DS_SEP}{_model_json(args)}{DS_CALL_END}" for name, args in calls]
    raw = content + DS_CALLS_BEGIN + "".join(written) + DS_CALLS_END
    return raw, _message(_content_with_calls(content), [(n, _model_json(a)) for n, a in calls])


# Kimi K2: ids `functions.{name}:{index}` written by the model; the turn ends with <|im_end|>.
KIMI_SECTION_BEGIN, KIMI_SECTION_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
KIMI_CALL_BEGIN, KIMI_ARGUMENT_BEGIN, KIMI_CALL_END = (
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
)


def kimi_k2(content: str, calls: Calls) -> Sample:
    if not calls:
        return content, _message(content, [])
    written = [
        f"{KIMI_CALL_BEGIN}functions.{name}:{index}{KIMI_ARGUMENT_BEGIN}{_model_json(args)}{KIMI_CALL_END}"
        for index, (name, args) in enumerate(calls)
    ]
    raw = content + KIMI_SECTION_BEGIN + "".join(written) + KIMI_SECTION_END
    return raw, _message(_content_with_calls(content), [(n, _model_json(a)) for n, a in calls])


# GLM-4.5 without thinking (the prompt ends `<|assistant|>\n<think></think>`): the model writes "\n",
# its text, then each call as `\n<tool_call>{name}\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>\n
# </tool_call>`, strings verbatim and other values as JSON; the turn ends at <|observation|> or <|user|>.
# vLLM rebuilds the arguments with json.dumps(ensure_ascii=False) and keeps the text before the first
# <tool_call> unstripped, the line break before it included.
def glm45(content: str, calls: Calls) -> Sample:
    text = f"\n{content}" if content else ""
    written = [
        f"\n<tool_call>{name}\n"
        + "".join(
            f"<arg_key>{key}</arg_key>\n<arg_value>{_glm_value(value)}</arg_value>\n"
            for key, value in args.items()
        )
        + "</tool_call>"
        for name, args in calls
    ]
    raw = text + "".join(written)
    if not calls:
        return raw, _message(raw, [])
    return raw, _message(_content_with_calls(text + "\n"), [(n, _model_json(a)) for n, a in calls])


def _glm_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


# Granite 3: `<|tool_call|>` (a special token, dropped from vLLM's text) then one JSON list; the turn ends
# with <|end_of_text|>. vLLM parses only a turn that is nothing but that list: any text before it leaves
# the whole turn as content, marker dropped.
GRANITE_MARKER = "<|tool_call|>"


def granite(content: str, calls: Calls) -> Sample:
    if not calls:
        return content, _message(content, [])
    listed = json.dumps([{"name": name, "arguments": args} for name, args in calls], ensure_ascii=False)
    raw = content + GRANITE_MARKER + listed
    if content.strip():
        return raw, _message(content + listed, [])
    return raw, _message(None, [(n, json.dumps(a, ensure_ascii=False)) for n, a in calls])


# gpt-oss (harmony): an analysis message, then a preamble (commentary without recipient) and one call
# message per call, or the final message. The prompt ends with `<|start|>assistant`; the stop token that
# ends the turn (<|call|> or <|return|>) is not part of the text, but calls after the first are shown
# joined by <|call|> (the real model stops there: one call per turn). vLLM parses the harmony messages:
# reasoning = the analysis texts, content = the last final message, else the last preamble; arguments
# re-serialised with json.dumps defaults (ASCII escapes, ", " and ": ").
HARMONY_REASONING = "The user wants the weather, so I look it up."


def openai(content: str, calls: Calls) -> Sample:
    raw = f"<|channel|>analysis<|message|>{HARMONY_REASONING}<|end|>"
    if not calls:
        raw += f"<|start|>assistant<|channel|>final<|message|>{content}"
        return raw, {**_message(content or None, []), "reasoning_content": HARMONY_REASONING}
    if content:
        raw += f"<|start|>assistant<|channel|>commentary<|message|>{content}<|end|>"
    raw += "<|call|>".join(
        f"<|start|>assistant<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>"
        + json.dumps(args, ensure_ascii=False, separators=(",", ":"))
        for name, args in calls
    )
    message = _message(content or None, [(name, json.dumps(args)) for name, args in calls])
    return raw, {**message, "reasoning_content": HARMONY_REASONING}


SAMPLES: dict[str, Callable[[str, Calls], Sample]] = {
    "deepseek_v3": deepseek_v3,
    "deepseek_v31": deepseek_v31,
    "kimi_k2": kimi_k2,
    "glm45": glm45,
    "granite": granite,
    "openai": openai,
}

# Markers that are special tokens in each family's own tokenizer. DeepSeek's and GLM-4.5's tool markers
# are ordinary added tokens (vLLM's parsers for them find the markers with skip_special_tokens on).
SPECIAL_MARKERS: dict[str, tuple[str, ...]] = {
    "deepseek_v3": (),
    "deepseek_v31": (),
    "kimi_k2": (KIMI_SECTION_BEGIN, KIMI_SECTION_END, KIMI_CALL_BEGIN, KIMI_ARGUMENT_BEGIN, KIMI_CALL_END),
    "glm45": (),
    "granite": (GRANITE_MARKER,),
    "openai": ("<|start|>", "<|channel|>", "<|message|>", "<|constrain|>", "<|end|>", "<|call|>"),
}
