"""Abstention's pieces that need no server: the answer the judge sees, the judge prompt and the grade."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml

from nemo_gym.config_types import ConfigError
from nemo_gym.reward_profile import compute_pass_majority_metrics
from nemo_gym.text.extraction import last_boxed

Verdict = Literal["correct", "abstain", "incorrect"]
VERDICTS: tuple[Verdict, ...] = ("correct", "abstain", "incorrect")
# The judge grades with SimpleQA's letters; NOT_ATTEMPTED counts as an abstention.
GRADE_WORDS: dict[str, Verdict] = {
    "A": "correct",
    "B": "incorrect",
    "C": "abstain",
    "CORRECT": "correct",
    "INCORRECT": "incorrect",
    "NOT_ATTEMPTED": "abstain",
}
PLACEHOLDERS = {"question": "", "target": "", "predicted_answer": ""}
WRAPPING = "*_`#>\"'()[]{}.:,;- \t"
_THINK_BLOCK = re.compile(r"<(think|thinking)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_UNOPENED_THINK = re.compile(r"^.*?</think(?:ing)?>", re.DOTALL | re.IGNORECASE)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = re.compile(r"[^\w\s]")


def without_thinking(text: str) -> str:
    """`text` without inline reasoning: whole <think>/<thinking> blocks, and everything up to a closing tag
    whose opening tag was in the prompt (chat templates that open the block for the model)."""
    return _UNOPENED_THINK.sub("", _THINK_BLOCK.sub("", text)).strip()


def final_answer(text: str) -> str:
    r"""The answer a reply commits to: the content of its last closed `\boxed{}`, else the whole reply."""
    boxed = last_boxed(text)
    return (boxed if boxed is not None else text).strip()


def normalized(text: str) -> str:
    """Lower case, no articles, no punctuation, single spaces: how the abstention token is recognised, so
    `[IDK]`, `idk` and ` [ IDK ] ` are all the same abstention."""
    text = _PUNCTUATION.sub("", _ARTICLES.sub(" ", text.lower()))
    return " ".join(text.split())


def parse_grade(judge_text: str) -> Verdict | None:
    """The grade opening the judge's answer or its last line: a capital letter A/B/C or a grade name
    (markdown and punctuation around it ignored); None when neither line opens with one."""
    lines = [line for line in judge_text.strip().splitlines() if line.strip(WRAPPING)]
    for line in lines[:1] + lines[-1:]:
        first_word = line.strip(WRAPPING).split(maxsplit=1)[0].strip(WRAPPING)
        if first_word in GRADE_WORDS:
            return GRADE_WORDS[first_word]
    return None


def checked_template(template: Any, where: str) -> str:
    """`template` if it is a prompt using only {question}, {target} and {predicted_answer}; else a
    ConfigError naming `where`, so a broken prompt stops the server instead of failing every verify."""
    try:
        template.format(**PLACEHOLDERS)
    except (AttributeError, KeyError, IndexError, ValueError) as error:
        raise ConfigError(
            f"{where} must be a prompt using only the placeholders {{question}}, {{target}} and "
            f"{{predicted_answer}} (literal braces doubled): {error!r}"
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


def abstention_metrics(tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """pass@k, pass@1[avg-of-k] and majority@k of the reward and of each verdict over the judged rollouts (a
    failed judgment has no verdict), and per family `omniscience_index` = correct - incorrect; in percent."""
    judged = [[rollout for rollout in task if rollout.get("verdict") in VERDICTS] for task in tasks]
    metrics, *_ = compute_pass_majority_metrics(
        [task for task in judged if task], score_fn=verdict_scores, answer_key="extracted_answer"
    )
    for key in [key for key in metrics if key.endswith("/correct")]:
        family = key.removesuffix("/correct")
        metrics[f"{family}/omniscience_index"] = metrics[key] - metrics.get(f"{family}/incorrect", 0.0)
    return metrics
