"""GDP.pdf grading pieces: the judge prompt, reading PASS/FAIL, and the all-pass / mean-pass metrics."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml

from nemo_gym.config_types import ConfigError
from nemo_gym.envkit.pass_at_k_metrics import compute_pass_majority_metrics

CriterionVerdict = Literal["PASS", "FAIL"]
PROMPT_FIELDS = ("task_prompt", "candidate_answer", "criterion")
_VERDICT = re.compile(r"\b(PASS|FAIL)\b", flags=re.IGNORECASE)


def load_prompt(folder: Path, path: str) -> str:
    """The `user` prompt of the YAML file at `path` (relative to `folder`), checked to fill with the three
    fields, so a broken prompt stops the server at start."""
    full_path = Path(path) if Path(path).is_absolute() else folder / path
    try:
        prompt = yaml.safe_load(full_path.read_text(encoding="utf-8"))["user"]
        prompt.format(**dict.fromkeys(PROMPT_FIELDS, ""))
    except OSError as error:
        raise ConfigError(f"judge_prompt_path: cannot read {full_path} ({error.strerror})") from None
    except (yaml.YAMLError, TypeError, KeyError, IndexError, ValueError, AttributeError) as error:
        raise ConfigError(
            f"judge_prompt_path: {full_path} must be YAML with a `user` prompt using only the placeholders "
            f"{{task_prompt}}, {{candidate_answer}} and {{criterion}} (literal braces doubled): {error!r}"
        ) from None
    return prompt


def read_verdict(text: str) -> CriterionVerdict | None:
    """The last PASS or FAIL word of the judge's answer (any case), or None when it has neither."""
    found = _VERDICT.findall(text)
    return "PASS" if found and found[-1].upper() == "PASS" else ("FAIL" if found else None)


def domain_slug(domain: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", domain.lower()).strip("_") or "unknown"


def rubric_scores(rollout: dict[str, Any]) -> dict[str, float]:
    return {
        "all_pass": float(rollout.get("all_pass") or 0.0),
        "mean_pass": float(rollout.get("mean_pass") or 0.0),
    }


def gdp_pdf_metrics(tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """Over the scored rollouts (a failed judgment is left out): pass@k and pass@1[avg-of-k] of `all_pass`
    and `mean_pass` in percent, `domain/<slug>/pass@1[avg-of-k]/mean_pass`, and the task/rollout counts."""
    scored = [[rollout for rollout in task if rollout.get("judge_failure") is None] for task in tasks]
    scored = [task for task in scored if task]
    metrics: dict[str, Any] = {
        "tasks/observed": len(tasks),
        "rollouts/scored": sum(len(task) for task in scored),
    }
    overall, *_ = compute_pass_majority_metrics(scored, score_fn=rubric_scores)
    metrics.update(overall)
    by_domain: dict[str, list[list[dict[str, Any]]]] = {}
    for task in scored:
        domain = str((task[0].get("verifier_metadata") or {}).get("domain") or "unknown")
        by_domain.setdefault(domain_slug(domain), []).append(task)
    for slug, domain_tasks in sorted(by_domain.items()):
        domain_metrics, *_ = compute_pass_majority_metrics(domain_tasks, score_fn=rubric_scores)
        metrics.update(
            {
                f"domain/{slug}/{name}": value
                for name, value in domain_metrics.items()
                if name.startswith("pass@1[avg-of-") and name.endswith("/mean_pass")
            }
        )
    return metrics
