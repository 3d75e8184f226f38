"""vLLM's reasoning parsers (non-streaming `extract_reasoning`): how a generation is split into
(reasoning, content) before the tool-call parser sees the content.

Each class follows the vLLM source named in its docstring (`vllm/reasoning/`, 2026 main before
Qwen3, GLM and Mistral moved to vLLM's parser engine). Parsers whose vLLM counterpart reads
`chat_template_kwargs` take the same switch as a constructor argument; the factories in
`PARSERS` use vLLM's default for a request that sets nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from responses_api_models.vllm_model.parsers.base import ReasoningParser, ReasoningParserDefaults

_THINK_START = "<think>"
_THINK_END = "</think>"


def _after_first(text: str, marker: str) -> str:
    """The text after the first `marker`, or the text itself without one."""
    before, found, after = text.partition(marker)
    return after if found else before


class ThinkTagsParser(ReasoningParserDefaults):
    """vLLM `deepseek_r1` (BaseThinkingReasoningParser.extract_reasoning).

    A leading `<think>` is optional (R1's template puts it in the prompt): the text after the
    first `<think>`, if any, is reasoning up to the first `</think>` and content after it (None
    when empty). Without `</think>` the whole text is reasoning and the content None.
    """

    def extract(self, text: str) -> tuple[str | None, str | None]:
        text = _after_first(text, _THINK_START)
        if _THINK_END not in text:
            return text, None
        reasoning, _, content = text.partition(_THINK_END)
        return reasoning, content or None


class Qwen3Parser(ReasoningParserDefaults):
    """vLLM `qwen3` (Qwen3ReasoningParser after the 2026 fixes for truncated thinking and for
    `<tool_call>` inside thinking).

    The first `<think>` is dropped if generated. With `</think>`: reasoning before it (possibly
    ""), content after it (None when empty). Without it: all content when thinking is disabled
    (`enable_thinking: false` in the request's chat_template_kwargs); else, when `<tool_call>`
    appears, reasoning before it and content from it (each None when empty); else all reasoning.
    """

    def __init__(self, thinking_enabled: bool = True) -> None:
        self.thinking_enabled = thinking_enabled

    def for_request(self, template_kwargs: Mapping[str, Any]) -> Qwen3Parser:
        """vLLM reads the switch from the request's `chat_template_kwargs.enable_thinking`."""
        return Qwen3Parser(template_kwargs.get("enable_thinking", True) is not False)

    def extract(self, text: str) -> tuple[str | None, str | None]:
        text = _after_first(text, _THINK_START)
        if _THINK_END in text:
            reasoning, _, content = text.partition(_THINK_END)
            return reasoning, content or None
        if not self.thinking_enabled:
            return None, text
        tool_call = text.find("<tool_call>")
        if tool_call != -1:
            return text[:tool_call] or None, text[tool_call:] or None
        return text, None


class DeepSeekV3Parser(ReasoningParserDefaults):
    """vLLM `deepseek_v3`: `deepseek_r1` when the request's chat_template_kwargs set `thinking`
    or `enable_thinking`, else no reasoning at all (the whole text is content)."""

    def __init__(self, thinking: bool = False) -> None:
        self.thinking = thinking

    def for_request(self, template_kwargs: Mapping[str, Any]) -> DeepSeekV3Parser:
        """vLLM reads the switch from the request's `chat_template_kwargs`."""
        return DeepSeekV3Parser(
            bool(template_kwargs.get("thinking") or template_kwargs.get("enable_thinking"))
        )

    def extract(self, text: str) -> tuple[str | None, str | None]:
        if self.thinking:
            return ThinkTagsParser().extract(text)
        return None, text


class Glm45Parser(ReasoningParserDefaults):
    """vLLM `glm45` (Glm4MoeModelReasoningParser): both `<think>` and `</think>` must be in the
    text, else it is all content; reasoning lies between them, content is the text after
    `</think>` (None when empty; text before `<think>` is dropped)."""

    def extract(self, text: str) -> tuple[str | None, str | None]:
        if _THINK_START not in text or _THINK_END not in text:
            return None, text
        text = _after_first(text, _THINK_START)
        if _THINK_END not in text:
            return None, text
        reasoning, _, content = text.partition(_THINK_END)
        return reasoning, content or None


_GRANITE_SECTIONS = re.compile(
    r"(?:Here's|Here is) my thought process:(.*?)(?:Here's|Here is) my response:(.*)",
    re.DOTALL,
)


class GraniteParser(ReasoningParserDefaults):
    """vLLM `granite` (GraniteReasoningParser): Granite writes plain-text headers. Reasoning is
    the text between "Here is my thought process:" and "Here is my response:" ("Here's" also
    accepted), content what follows (None when empty); without both headers all is content."""

    def extract(self, text: str) -> tuple[str | None, str | None]:
        found = _GRANITE_SECTIONS.search(text)
        if found is None:
            return None, text
        reasoning, content = found.groups()
        return reasoning, content or None


_MISTRAL_THINK_START = "[THINK]"
_MISTRAL_THINK_END = "[/THINK]"


class MistralThinkParser(ReasoningParserDefaults):
    """vLLM `mistral` (MistralReasoningParser): `[THINK]...[/THINK]` (control tokens, so the text
    holds them only when special tokens are kept).

    Empty text gives (None, ""). With `[THINK]` then `[/THINK]`: reasoning between them, content
    the text around them (None when empty). `[THINK]` alone: reasoning after it, content before
    it (None when empty). No `[THINK]`: all content, a stray first `[/THINK]` removed.
    """

    def extract(self, text: str) -> tuple[str | None, str | None]:
        if not text:
            return None, ""
        before, start, after = text.partition(_MISTRAL_THINK_START)
        if start and _MISTRAL_THINK_END in after:
            reasoning, _, rest = after.partition(_MISTRAL_THINK_END)
            content = before + rest
            return reasoning, content or None
        if start:
            return after, before or None
        if _MISTRAL_THINK_END in before:
            head, _, tail = before.partition(_MISTRAL_THINK_END)
            return None, head + tail
        return None, before


PARSERS: dict[str, Callable[[], ReasoningParser]] = {
    "deepseek_r1": ThinkTagsParser,
    "qwen3": Qwen3Parser,
    "deepseek_v3": DeepSeekV3Parser,
    "glm45": Glm45Parser,
    "granite": GraniteParser,
    "mistral": MistralThinkParser,
}
