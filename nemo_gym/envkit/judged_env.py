"""Small pieces that environments grading with an LLM judge share around `nemo_gym.envkit.judge`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from nemo_gym.envkit.judge import JUDGE_FAILURE_RATE_KEY, Unusable, last_assistant_text
from nemo_gym.envkit.pass_at_k_metrics import TOKEN_MEANS, pass_at_k_key_metrics
from nemo_gym.wire.responses import NeMoGymResponse


def unusable_unless(parse: Callable[[str], object | None], missing: str) -> Unusable:
    """An `unusable` check for `Judge.ask`: the judge's answer (its last assistant text) is refused when
    `parse` reads None from it, with the message "the judge's answer <missing>: <its first 100 chars>"."""

    def unusable(response: NeMoGymResponse) -> str | None:
        text = last_assistant_text(response)
        if parse(text) is None:
            return f"the judge's answer {missing}: {text[:100]!r}"
        return None

    return unusable


def judged_key_metrics(agent_metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The headline metrics of a judged environment: the token means and `judge_failure_rate`, then the
    highest-k pass@1[avg-of-k] and pass@k entries."""
    return pass_at_k_key_metrics(
        agent_metrics, leading=(*TOKEN_MEANS, JUDGE_FAILURE_RATE_KEY), best_of=("pass@{k}",)
    )
