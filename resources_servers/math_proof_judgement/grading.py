"""Reading a proof judge's verdict and scoring it as a binary classifier.

The judge ends with `Judgement: Yes` (the proof is correct) or `Judgement: No`; the first such line
counts (optionally in bold), as NeMo Skills reads it. Reasoning blocks are removed first unless parity
with Skills is asked for: a reasoning model musing "so Judgement: No would apply if ..." must not decide
the verdict. Metrics treat "Yes" as the positive class: per-rollout true/false positives/negatives, and
precision / recall / F1 averaged over the k samples the way Skills averages them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

Verdict = bool | None  # True = Yes, False = No, None = no readable verdict
Confusion = tuple[float, float, float, float]  # (tp, fp, fn, tn)

_JUDGEMENT = re.compile(r"\*{0,2}Judgement\*{0,2}\s*:", re.IGNORECASE)
_BLOCKS = (("<think>", "</think>"), ("<thinking>", "</thinking>"))


def parse_judgement(text: str | None) -> Verdict:
    """The verdict after the first `Judgement:` (bold allowed): Yes → True, No → False, else None."""
    match = _JUDGEMENT.search(text or "")
    if match is None:
        return None
    verdict = text[match.end() :].strip().lstrip("*").strip().lower()
    if verdict.startswith("yes"):
        return True
    return False if verdict.startswith("no") else None


def _without_blocks(text: str, opener: str, closer: str) -> str:
    kept: list[str] = []
    position = 0
    while (start := text.find(opener, position)) >= 0 and (end := text.find(closer, start)) >= 0:
        kept.append(text[position:start])
        position = end + len(closer)
    kept.append(text[position:])
    return "".join(kept)


def strip_thinking(text: str) -> str:
    """Without `<think>..</think>` / `<thinking>..</thinking>` blocks, nor the reasoning before a closing
    tag whose opening tag a reasoning parser already removed."""
    for opener, closer in _BLOCKS:
        text = _without_blocks(text, opener, closer)
    for _, closer in _BLOCKS:
        _, found, after = text.partition(closer)
        if found:
            text = after
    return text.strip()


def verdict_label(verdict: Verdict) -> str | None:
    return None if verdict is None else ("Yes" if verdict else "No")


def label_verdict(label: Any) -> Verdict:
    return {"Yes": True, "No": False}.get(label) if isinstance(label, str) else None


def confusion(predicted: Verdict, gold: Verdict) -> Confusion:
    """One-hot (tp, fp, fn, tn); all zero when either side has no verdict."""
    if predicted is None or gold is None:
        return 0.0, 0.0, 0.0, 0.0
    return (
        float(predicted and gold),
        float(predicted and not gold),
        float(not predicted and gold),
        float(not predicted and not gold),
    )


# ---------------------------------------------------------------------------------------------------------
# Classification metrics over rollouts grouped by task (each rollout carries the verify answer's fields)


def precision_recall_f1(
    counts: Sequence[tuple[float, float, float]], total_positives: int
) -> tuple[float, ...]:
    """Precision, recall and F1 in percent, each computed per (tp, fp, fn) and averaged. No positive
    prediction: precision 1; no positive gold: recall 1; precision + recall 0: F1 0."""
    if not counts:
        return 0.0, 0.0, 0.0
    scores = []
    for tp, fp, _ in counts:
        precision = tp / (tp + fp) if tp + fp > 0 else 1.0
        recall = tp / total_positives if total_positives > 0 else 1.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
        scores.append((precision, recall, f1))
    return tuple(100.0 * sum(column) / len(scores) for column in zip(*scores, strict=True))


def pass_verdict(verdicts: Sequence[Verdict], gold: Verdict) -> Verdict:
    """Best of k: the gold verdict if any sample gave it, else the first readable one."""
    if gold is not None and gold in verdicts:
        return gold
    return next((verdict for verdict in verdicts if verdict is not None), None)


def majority_verdict(verdicts: Sequence[Verdict]) -> Verdict:
    """The more frequent readable verdict; a tie goes to the first readable one."""
    yes, no = verdicts.count(True), verdicts.count(False)
    if yes != no:
        return yes > no
    return next((verdict for verdict in verdicts if verdict is not None), None)


def _summed(pairs: Sequence[tuple[Verdict, Verdict]]) -> tuple[float, float, float]:
    tp = fp = fn = 0.0
    for predicted, gold in pairs:
        one_tp, one_fp, one_fn, _ = confusion(predicted, gold)
        tp, fp, fn = tp + one_tp, fp + one_fp, fn + one_fn
    return tp, fp, fn


def classification_metrics(tasks: Sequence[Sequence[dict[str, Any]]]) -> dict[str, float]:
    """`pass@1[avg-of-k]`, `pass@k` and `majority@k` precision / recall / F1 for every k, and
    `total_positives` (tasks whose gold is Yes)."""
    tasks = [task for task in tasks if task]
    if not tasks:
        return {}
    golds = [parse_judgement(task[0].get("expected_judgement")) for task in tasks]
    verdicts = [[label_verdict(rollout.get("extracted_judgement")) for rollout in task] for task in tasks]
    total_positives = sum(gold is True for gold in golds)
    max_k = max(len(task) for task in tasks)
    by_task = list(zip(verdicts, golds, strict=True))
    per_sample = [
        _summed([(task[index], gold) for task, gold in by_task if index < len(task)])
        for index in range(max_k)
    ]
    metrics: dict[str, float] = {}
    for k in range(1, max_k + 1):
        families = {
            "pass@1[avg-of-{k}]": per_sample[:k],
            "pass@{k}": [_summed([(pass_verdict(task[:k], gold), gold) for task, gold in by_task])],
            "majority@{k}": [_summed([(majority_verdict(task[:k]), gold) for task, gold in by_task])],
        }
        for family, counts in families.items():
            values = precision_recall_f1(counts, total_positives)
            for name, value in zip(("precision", "recall", "f1"), values, strict=True):
                metrics[f"{family.format(k=k)}/{name}"] = value
    metrics["total_positives"] = float(total_positives)
    return metrics
