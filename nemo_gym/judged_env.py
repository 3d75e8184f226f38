"""Small pieces that environments grading with an LLM judge share around `nemo_gym.judge`."""

from __future__ import annotations

from collections.abc import Callable

from nemo_gym.judge import Unusable, last_assistant_text
from nemo_gym.openai_utils import NeMoGymResponse


def unusable_unless(parse: Callable[[str], object | None], missing: str) -> Unusable:
    """An `unusable` check for `Judge.ask`: the judge's answer (its last assistant text) is refused when
    `parse` reads None from it, with the message "the judge's answer <missing>: <its first 100 chars>"."""

    def unusable(response: NeMoGymResponse) -> str | None:
        text = last_assistant_text(response)
        if parse(text) is None:
            return f"the judge's answer {missing}: {text[:100]!r}"
        return None

    return unusable
