"""SimpleQA's three grades: the prompt, reading the judge's grade, and the metrics built on the grades."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml

from nemo_gym.config_types import ConfigError
from nemo_gym.reward_profile import compute_pass_majority_metrics

Verdict = Literal["correct", "incorrect", "not_attempted"]
TIERS: tuple[Verdict, ...] = ("correct", "incorrect", "not_attempted")
GRADE_WORDS: dict[str, Verdict] = {
    "A": "correct",
    "B": "incorrect",
    "C": "not_attempted",
    "CORRECT": "correct",
    "INCORRECT": "incorrect",
    "NOT_ATTEMPTED": "not_attempted",
}
WRAPPING = "*_`#>\"'()[]{}.:,;- \t"


def parse_grade(judge_text: str) -> Verdict | None:
    """The grade that opens the judge's answer or its last line: a letter A/B/C or a grade name (in capitals,
    markdown and punctuation around it ignored); None when neither opens with one."""
    lines = [line for line in judge_text.strip().splitlines() if line.strip(WRAPPING)]
    for line in lines[:1] + lines[-1:]:
        first_word = line.strip(WRAPPING).split(maxsplit=1)[0].strip(WRAPPING)
        if first_word in GRADE_WORDS:
            return GRADE_WORDS[first_word]
    return None


def load_prompt(folder: Path, path: str) -> str:
    """The `user` prompt of the YAML file at `path` (relative to `folder`), checked to fill with the three
    fields, so a broken prompt stops the server instead of failing every verify."""
    full_path = Path(path) if Path(path).is_absolute() else folder / path
    try:
        prompt = yaml.safe_load(full_path.read_text(encoding="utf-8"))["user"]
        prompt.format(question="", expected_answer="", generation="")
    except OSError as error:
        raise ConfigError(f"judge_prompt_path: cannot read {full_path} ({error.strerror})") from None
    except (yaml.YAMLError, TypeError, KeyError, IndexError, ValueError, AttributeError) as error:
        raise ConfigError(
            f"judge_prompt_path: {full_path} must be YAML with a `user` prompt using only the placeholders "
            f"{{question}}, {{expected_answer}} and {{generation}} (literal braces doubled): {error!r}"
        ) from None
    return prompt


def tier_scores(rollout: dict[str, Any]) -> dict[str, float]:
    return {tier: float(rollout.get("verdict") == tier) for tier in TIERS}


def simpleqa_metrics(tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """pass@k, pass@1[avg-of-k] and majority@k of each grade over the graded rollouts (a failed judgment has
    no grade), and for each of those families `accuracy_given_attempted` = correct / (correct + incorrect)
    and `f1`, the harmonic mean of that and `correct`; all in percent."""
    graded = [[rollout for rollout in task if rollout.get("verdict") in TIERS] for task in tasks]
    metrics, *_ = compute_pass_majority_metrics(
        [task for task in graded if task], score_fn=tier_scores, answer_key="extracted_answer"
    )
    for key in [key for key in metrics if key.endswith("/correct")]:
        family = key.removesuffix("/correct")
        correct, incorrect = metrics[key], metrics.get(f"{family}/incorrect", 0.0)
        given_attempted = 100 * correct / (correct + incorrect) if correct + incorrect else 0.0
        metrics[f"{family}/accuracy_given_attempted"] = given_attempted
        total = given_attempted + correct
        metrics[f"{family}/f1"] = 2 * given_attempted * correct / total if total else 0.0
    return metrics
