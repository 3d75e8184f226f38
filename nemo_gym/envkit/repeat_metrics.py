"""NeMo Gym 0.7's repeat-level metrics: with several rollouts per task, how much a run's score moves from
one repeat to the next. Repeat *i* is every task's rollout with `_ng_rollout_index` *i*; its entry in
`repeat_level_metrics` holds the means over those rollouts, and `<stat>_across_repeats/<metric>` in the
agent metrics summarise those per-repeat means (mean, median, std, min, max, standard error and a 95%
normal interval). With one repeat there is no spread to report, so the summary is left out."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from nemo_gym.config.jsonl import ROLLOUT_INDEX_KEY

NUM_REPEATS_KEY = "num_repeats"
MEAN_PREFIX = "mean/"
Z_95 = 1.959963984540054


def repeat_level_metrics(infos: Iterable[Mapping[str, Any]], column_means: Any) -> list[dict[str, Any]]:
    """One entry per rollout index: its rollouts' count and the `mean/<metric>` of `column_means(rows)`."""
    by_repeat: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    for info in infos:
        by_repeat[info[ROLLOUT_INDEX_KEY]].append(info)
    return [
        {ROLLOUT_INDEX_KEY: index, "num_rollouts": len(rows), **column_means(rows)}
        for index, rows in sorted(by_repeat.items())
    ]


def across_repeats(repeats: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """`num_repeats`, and the spread of each per-repeat mean that every repeat has."""
    summary: dict[str, Any] = {NUM_REPEATS_KEY: len(repeats)}
    if len(repeats) < 2:
        return summary
    names = [key for key in repeats[0] if key.startswith(MEAN_PREFIX)]
    for key in names:
        if not all(key in repeat for repeat in repeats):
            continue
        metric = key[len(MEAN_PREFIX) :]
        values = [float(repeat[key]) for repeat in repeats]
        mean = statistics.fmean(values)
        std = statistics.stdev(values)
        se = std / math.sqrt(len(values))
        summary |= {
            f"mean_across_repeats/{metric}": mean,
            f"median_across_repeats/{metric}": statistics.median(values),
            f"std_across_repeats/{metric}": std,
            f"min_across_repeats/{metric}": min(values),
            f"max_across_repeats/{metric}": max(values),
            f"se_across_repeats/{metric}": se,
            f"ci_low_95_across_repeats/{metric}": mean - Z_95 * se,
            f"ci_high_95_across_repeats/{metric}": mean + Z_95 * se,
        }
    return summary
