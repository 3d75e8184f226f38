"""What the judge is shown and what it said: the prompt template, the texts compared, the verdict.

`extract_with_regexes` applies regexes that come from the config or from the row itself to model text,
so the server runs it in the CPU pool under a deadline (a pathological pattern cannot stall the loop).
"""

from __future__ import annotations

import re
from pathlib import Path

from nemo_gym.config_types import ConfigError
from nemo_gym.openai_utils import (
    NeMoGymEasyInputMessage,
    NeMoGymMessage,
    NeMoGymResponseCreateParamsNonStreaming,
    NeMoGymResponseInputText,
)

REGEX_FLAGS = re.MULTILINE | re.DOTALL


def last_user_text(params: NeMoGymResponseCreateParamsNonStreaming) -> str:
    """The text of the last user message that has some, stripped; "" when there is none. A message of
    content parts (a question with an image) gives its text parts joined by newlines, so that the judge
    still reads the question, as in NeMo Gym 0.7."""
    if isinstance(params.input, str):
        return params.input.strip()
    texts = [
        _text_of(item.content)
        for item in params.input
        if isinstance(item, (NeMoGymEasyInputMessage, NeMoGymMessage)) and item.role == "user"
    ]
    texts = [text for text in texts if text]
    return texts[-1].strip() if texts else ""


def _text_of(content: str | list) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(part.text for part in content if isinstance(part, NeMoGymResponseInputText))


def regex_extract(text: str, pattern: str | None) -> str:
    """The last match's first non-empty group (else the whole match), stripped; `text` itself when the
    pattern is unset, invalid or does not match."""
    if not pattern or not text:
        return text
    try:
        last = None
        for last in re.finditer(pattern, text, REGEX_FLAGS):  # noqa: B007 (only the last one is wanted)
            pass
    except re.error:
        return text
    if last is None:
        return text
    group = next((value for value in last.groups() if value and value.strip()), None)
    return (group if group is not None else last.group(0)).strip()


def extract_with_regexes(
    question: str, question_regex: str | None, answer: str, answer_regex: str | None
) -> tuple[str, str]:
    """Both extractions at once: one trip to the CPU pool per verify."""
    return regex_extract(question, question_regex), regex_extract(answer, answer_regex)


def load_template(folder: Path, fpath: str) -> str:
    """The judge prompt template (a relative path is from `folder`), checked to fill with the three fields."""
    path = Path(fpath) if Path(fpath).is_absolute() else folder / fpath
    try:
        template = path.read_text(encoding="utf-8").strip()
        template.format(question="", expected_answer="", generated_answer="")
    except OSError as error:
        raise ConfigError(f"judge_prompt_template_fpath: cannot read {path} ({error.strerror})") from None
    except (KeyError, IndexError, ValueError) as error:
        raise ConfigError(
            f"judge_prompt_template_fpath: {path} is not a template with only the placeholders "
            f"{{question}}, {{expected_answer}} and {{generated_answer}} (literal braces doubled): {error!r}"
        ) from None
    return template
