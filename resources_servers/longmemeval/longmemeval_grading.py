"""LongMemEval's rubrics: which prompt judges which question, reading the judge's yes/no, and the metrics."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

from nemo_gym.config_types import ConfigError
from nemo_gym.text.extraction import without_reasoning

QUESTION_TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
)
# An abstention question (its id ends in `_abs`, or `abstention: true`) is judged by this rubric whatever
# its question type: the right answer is to say the history does not tell.
ABSTENTION = "abstention"
RUBRICS = (*QUESTION_TYPES, ABSTENTION)
PLACEHOLDERS = {"question": "", "answer": "", "response": ""}
VERDICT_WORD = re.compile(r"[a-z]+")


def rubric_for(question_type: str, question_id: str, abstention: bool) -> str:
    """The rubric that judges a question: abstention rows first, then the question type's own."""
    return ABSTENTION if abstention or "_abs" in question_id else question_type


def load_prompts(folder: Path, paths: dict[str, str]) -> dict[str, str]:
    """The `user` prompt of each rubric's YAML file (relative paths from `folder`), checked to fill with
    {question}, {answer} and {response}, so a broken file stops the server instead of failing verifies."""
    missing = [rubric for rubric in RUBRICS if rubric not in paths]
    unknown = [rubric for rubric in paths if rubric not in RUBRICS]
    if missing or unknown:
        raise ConfigError(
            f"judge_prompt_paths: needs exactly the keys {', '.join(RUBRICS)}"
            + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; unknown {', '.join(unknown)}" if unknown else "")
        )
    prompts = {}
    for rubric, path in paths.items():
        full_path = Path(path) if Path(path).is_absolute() else folder / path
        try:
            prompt = yaml.safe_load(full_path.read_text(encoding="utf-8"))["user"]
            prompt.format(**PLACEHOLDERS)
        except OSError as error:
            raise ConfigError(
                f"judge_prompt_paths.{rubric}: cannot read {full_path} ({error.strerror})"
            ) from None
        except (yaml.YAMLError, TypeError, KeyError, IndexError, ValueError, AttributeError) as error:
            raise ConfigError(
                f"judge_prompt_paths.{rubric}: {full_path} must be YAML with a `user` prompt using only "
                f"the placeholders {{question}}, {{answer}} and {{response}} (literal braces doubled): "
                f"{error!r}"
            ) from None
        prompts[rubric] = prompt
    return prompts


def parse_verdict(judge_text: str) -> bool | None:
    """True for a judge answer whose first word is "yes", False for "no", None for anything else."""
    words = VERDICT_WORD.findall(without_reasoning(judge_text).lower())
    if words and words[0] in ("yes", "no"):
        return words[0] == "yes"
    return None


def longmemeval_metrics(tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """Accuracy over the judged rollouts (failed judgments are left out, as LongMemEval skips them), and per
    question type and over the abstention questions."""
    judged = [
        rollout
        for task in tasks
        for rollout in task
        if rollout.get("judge_failure") is None and isinstance(rollout.get("reward"), int | float)
    ]
    metrics: dict[str, Any] = {"count": len(judged)}
    if not judged:
        return metrics
    metrics["accuracy"] = sum(float(rollout["reward"]) for rollout in judged) / len(judged)
    groups: dict[str, list[float]] = defaultdict(list)
    for rollout in judged:
        groups[f"question_type/{rollout.get('question_type') or 'unknown'}"].append(float(rollout["reward"]))
        if rollout.get("abstention"):
            groups[ABSTENTION].append(float(rollout["reward"]))
    for group, rewards in sorted(groups.items()):
        metrics[f"{group}/accuracy"] = sum(rewards) / len(rewards)
        metrics[f"{group}/count"] = len(rewards)
    return metrics
