"""labbench2 grading pieces: the judge prompts, reading the judge's equivalence label, and the metrics."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from nemo_gym.config_types import ConfigError
from nemo_gym.envkit.pass_at_k_metrics import compute_pass_majority_metrics

Verdict = Literal["equal", "not_equal"]
PLAIN_FIELDS = ("question", "expected_answer", "generated_answer")
PROTOCOL_FIELDS = (*PLAIN_FIELDS, "reference_passage")


def load_template(folder: Path, path: str, key: str, fields: tuple[str, ...]) -> str:
    """The text prompt at `path` (relative to `folder`), checked to fill with exactly `fields`, so a broken
    template stops the server at start instead of failing every verify."""
    full_path = Path(path) if Path(path).is_absolute() else folder / path
    try:
        template = full_path.read_text(encoding="utf-8").strip()
    except OSError as error:
        raise ConfigError(f"{key}: cannot read {full_path} ({error.strerror})") from None
    try:
        template.format(**dict.fromkeys(fields, ""))
    except (KeyError, IndexError, ValueError) as error:
        names = ", ".join("{" + field + "}" for field in fields)
        raise ConfigError(
            f"{key}: {full_path} may use only the placeholders {names} (literal braces doubled): {error!r}"
        ) from None
    return template


def read_verdict(text: str, equal_label: str, not_equal_label: str) -> Verdict | None:
    """The label that appears first in the judge's answer (case and surrounding spaces inside the brackets
    ignored), or None when the answer carries neither."""
    positions: list[tuple[int, Verdict]] = []
    for label, verdict in ((equal_label, "equal"), (not_equal_label, "not_equal")):
        match = re.search(_label_pattern(label), text, flags=re.IGNORECASE)
        if match is not None:
            positions.append((match.start(), verdict))
    return min(positions)[1] if positions else None


def _label_pattern(label: str) -> str:
    """`[[A=B]]` also matches `[[ A = B ]]`: whitespace between the label's characters is optional."""
    return r"\s*".join(re.escape(char) for char in label if not char.isspace())


def accuracy(rollout: dict[str, Any]) -> dict[str, float]:
    return {"accuracy": float(rollout.get("verdict") == "equal")}


def labbench_metrics(tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """pass@k, pass@1[avg-of-k] and majority@k of `accuracy` (percent) over the judged rollouts (a failed
    judgment has no verdict and is left out), overall and per `verifier_metadata.tag` as `<tag>/<metric>`."""
    judged = [[rollout for rollout in task if rollout.get("verdict") is not None] for task in tasks]
    judged = [task for task in judged if task]
    metrics, *_ = compute_pass_majority_metrics(judged, score_fn=accuracy, answer_key="extracted_answer")
    by_tag: dict[str, list[list[dict[str, Any]]]] = {}
    for task in judged:
        tag = (task[0].get("verifier_metadata") or {}).get("tag")
        if tag:
            by_tag.setdefault(str(tag), []).append(task)
    for tag, tag_tasks in sorted(by_tag.items()):
        tag_metrics, *_ = compute_pass_majority_metrics(
            tag_tasks, score_fn=accuracy, answer_key="extracted_answer"
        )
        metrics.update(
            {f"{tag}/{name}": value for name, value in tag_metrics.items() if name != "per_sample_aggregate"}
        )
    return metrics
