"""Omniscience's pieces that need no server: the answer the judge sees, the judge prompt, the grade and the
metrics."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml

from nemo_gym.config_types import ConfigError
from nemo_gym.reward_profile import compute_pass_majority_metrics

Verdict = Literal["correct", "incorrect", "partial", "not_attempted"]
VERDICTS: tuple[Verdict, ...] = ("correct", "incorrect", "partial", "not_attempted")
# The four grades, by letter or by name.
GRADE_WORDS: dict[str, Verdict] = {
    "A": "correct",
    "B": "incorrect",
    "C": "partial",
    "D": "not_attempted",
    "CORRECT": "correct",
    "INCORRECT": "incorrect",
    "PARTIAL_ANSWER": "partial",
    "PARTIAL": "partial",
    "NOT_ATTEMPTED": "not_attempted",
}
PLACEHOLDERS = {"question": "", "expected_answer": "", "generation": ""}
WRAPPING = "*_`#>\"'()[]{}.:,;- \t"
_THINK_BLOCK = re.compile(r"<(think|thinking)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_UNOPENED_THINK = re.compile(r"^.*?</think(?:ing)?>", re.DOTALL | re.IGNORECASE)
_UNCLOSED_THINK = re.compile(r"<think(?:ing)?>", re.IGNORECASE)


def final_answer(text: str) -> str:
    """What the reply answers once its reasoning is gone: whole <think>/<thinking> blocks and everything up
    to a closing tag whose opening tag was in the prompt are removed; a block still open at the end means
    the model never finished thinking, so there is no answer ("")."""
    text = _UNOPENED_THINK.sub("", _THINK_BLOCK.sub("", text))
    if _UNCLOSED_THINK.search(text):
        return ""
    return text.strip()


def parse_grade(judge_text: str) -> Verdict | None:
    """The grade opening the judge's answer or its last line: a capital letter A-D or a grade name (markdown
    and punctuation around it ignored); None when neither line opens with one."""
    lines = [line for line in judge_text.strip().splitlines() if line.strip(WRAPPING)]
    for line in lines[:1] + lines[-1:]:
        first_word = line.strip(WRAPPING).split(maxsplit=1)[0].strip(WRAPPING)
        if first_word in GRADE_WORDS:
            return GRADE_WORDS[first_word]
    return None


def checked_template(template: Any, where: str) -> str:
    """`template` if it is a prompt using only {question}, {expected_answer} and {generation}; else a
    ConfigError naming `where`, so a broken prompt stops the server instead of failing every verify."""
    try:
        template.format(**PLACEHOLDERS)
    except (AttributeError, KeyError, IndexError, ValueError) as error:
        raise ConfigError(
            f"{where} must be a prompt using only the placeholders {{question}}, {{expected_answer}} and "
            f"{{generation}} (literal braces doubled): {error!r}"
        ) from None
    return template


def load_prompt(folder: Path, path: str) -> str:
    """The `user` prompt of the YAML file at `path` (relative to `folder`)."""
    full_path = Path(path) if Path(path).is_absolute() else folder / path
    try:
        document = yaml.safe_load(full_path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(f"judge_prompt_path: cannot read {full_path} ({error.strerror})") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"judge_prompt_path: {full_path} is not YAML: {error}") from None
    if not isinstance(document, dict) or "user" not in document:
        raise ConfigError(f"judge_prompt_path: {full_path} must be YAML with a `user` prompt")
    return checked_template(document["user"], f"judge_prompt_path ({full_path})")


def verdict_scores(rollout: dict[str, Any]) -> dict[str, float]:
    """The per-rollout scores the pass@k metrics are built on: the reward and one flag per verdict."""
    verdict = rollout.get("verdict")
    return {
        "reward": float(rollout.get("reward") or 0.0),
        **{name: float(verdict == name) for name in VERDICTS},
    }


def omniscience_metrics(tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """pass@k, pass@1[avg-of-k] and majority@k of the reward and of each verdict over the judged rollouts (a
    failed judgment has no verdict); per family `omniscience_index` = correct - incorrect and
    `hallucination_rate` = incorrect / (every verdict but correct); all in percent."""
    judged = [[rollout for rollout in task if rollout.get("verdict") in VERDICTS] for task in tasks]
    metrics, *_ = compute_pass_majority_metrics(
        [task for task in judged if task], score_fn=verdict_scores, answer_key="extracted_answer"
    )
    for key in [key for key in metrics if key.endswith("/correct")]:
        family = key.removesuffix("/correct")
        incorrect = metrics.get(f"{family}/incorrect", 0.0)
        not_correct = incorrect + sum(metrics.get(f"{family}/{name}", 0.0) for name in VERDICTS[2:])
        metrics[f"{family}/omniscience_index"] = metrics[key] - incorrect
        metrics[f"{family}/hallucination_rate"] = 100 * incorrect / not_correct if not_correct else 0.0
    return metrics
