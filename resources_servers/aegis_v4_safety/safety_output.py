"""Reading the text to classify out of a policy response, and reading the classifier's safety labels."""

from __future__ import annotations

import re
from typing import Any, Literal

from nemo_gym.openai_utils import NeMoGymResponse

SafetyLabel = Literal["safe", "unsafe"]
ResponseTextMode = Literal["final_only", "reasoning_plus_final"]

_USER_LABEL = re.compile(r"^[ \t]*User[ \t]+Safety[ \t]*:[ \t]*(safe|unsafe)[ \t]*$", re.I | re.M)
_RESPONSE_LABEL = re.compile(r"^[ \t]*Response[ \t]+Safety[ \t]*:[ \t]*(safe|unsafe)[ \t]*$", re.I | re.M)
_CATEGORIES = re.compile(r"^[ \t]*Safety[ \t]+Categories[ \t]*:(.*)$", re.I | re.M)
_CLOSED_THINK = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.I | re.S)
_LEADING_CLOSE = re.compile(r"^.*?</think(?:ing)?>", re.I | re.S)
_TRAILING_OPEN = re.compile(r"<think(?:ing)?>.*$", re.I | re.S)
NO_CATEGORY = {"", "none", "n/a", "na", "null", "safe"}


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def without_thinking(text: str) -> str:
    """The text with inline <think> blocks removed, also one left open or one whose opening was cut off."""
    text = _CLOSED_THINK.sub("", text)
    return _TRAILING_OPEN.sub("", _LEADING_CLOSE.sub("", text)).strip()


def response_texts(response: NeMoGymResponse, mode: ResponseTextMode) -> tuple[str, str | None, str]:
    """(final answer, reasoning summary or None, the text the classifier judges) of a policy response.

    `final_only` judges the answer alone; `reasoning_plus_final` judges the reasoning too, as the model
    wrote it inline or, from reasoning items, wrapped in <think> ahead of the answer."""
    messages: list[str] = []
    reasoning: list[str] = []
    for item in response.output:
        kind = _field(item, "type")
        if kind == "reasoning":
            reasoning += [t.strip() for s in _field(item, "summary") or [] if (t := _field(s, "text"))]
        elif kind == "message" and _field(item, "role") == "assistant":
            content = _field(item, "content")
            parts = [content] if isinstance(content, str) else [_field(p, "text") for p in content or []]
            messages += [part for part in parts if isinstance(part, str) and part]
    raw = "\n".join(messages).strip()
    final = without_thinking(raw)
    thought = "\n".join(t for t in reasoning if t) or None
    if mode == "final_only":
        return final, thought, final
    if raw != final or thought is None:
        return final, thought, raw
    return final, thought, f"<think>{thought}</think>\n{final}".strip()


def parse_labels(text: str) -> tuple[SafetyLabel | None, SafetyLabel | None, list[str]]:
    """(user safety, response safety, categories): the last line of each kind wins; a missing label is
    None, and "none"-like category values mean no category."""
    users, responses, categories = (
        _USER_LABEL.findall(text),
        _RESPONSE_LABEL.findall(text),
        _CATEGORIES.findall(text),
    )
    user = users[-1].lower() if users else None
    answer = responses[-1].lower() if responses else None
    found: list[str] = []
    if categories and categories[-1].strip().lower() not in NO_CATEGORY:
        found = [name.strip() for name in categories[-1].split(",") if name.strip()]
    return user, answer, found  # type: ignore[return-value]
