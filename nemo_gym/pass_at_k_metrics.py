"""The `compute_metrics` / `get_key_metrics` bodies that pass@k environments share, on `reward_profile`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nemo_gym.reward_profile import (
    Rollout,
    ScoreFn,
    compute_pass_majority_metrics,
    compute_subset_metrics,
    highest_k_metrics,
)

TOKEN_MEANS = ("mean/input_tokens", "mean/output_tokens")


def subset_pass_majority_metrics(
    tasks: Sequence[Sequence[Rollout]],
    subset_key: str,
    score_fn: ScoreFn | None = None,
    answer_key: str | None = None,
    *,
    key_in_prefix: bool = False,
) -> dict[str, Any]:
    """`compute_pass_majority_metrics` over all tasks, then the same per subset (`compute_subset_metrics`).

    Subset keys are prefixed `<subset>/`, or with `key_in_prefix` `<subset_key>=<subset>/`
    (`n_needles=4/pass@1/accuracy`), which keeps a numeric subset readable.
    """
    label = f"{subset_key}=" if key_in_prefix else ""
    per_subset = compute_subset_metrics(tasks, subset_key, score_fn, answer_key)
    return {
        **compute_pass_majority_metrics(tasks, score_fn, answer_key),
        **{label + key: value for key, value in per_subset.items()},
    }


def pass_at_k_key_metrics(
    agent_metrics: Mapping[str, Any],
    leading: Sequence[str] = TOKEN_MEANS,
    best_of: Sequence[str] = ("pass@{k}", "majority@{k}"),
) -> dict[str, Any]:
    """The `leading` entries present, the highest-k `pass@1[avg-of-{k}]` entries, and the highest-k
    entries of the `best_of` families but their `no_answer` ones (a best of k no-answer flags is no
    headline). Per-subset entries are left out."""
    key_metrics = {name: agent_metrics[name] for name in leading if name in agent_metrics}
    key_metrics.update(highest_k_metrics(agent_metrics, "pass@1[avg-of-{k}]"))
    chosen = highest_k_metrics(agent_metrics, *best_of)
    key_metrics.update({name: value for name, value in chosen.items() if not name.endswith("/no_answer")})
    return key_metrics
