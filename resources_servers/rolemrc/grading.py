"""RoleMRC reference metrics for one reply, meant to run in a CPU worker: ROUGE-L's longest common
subsequence costs reply length × reference length, and the reply is the model's.

- ROUGE-1/2/L/Lsum: F-measures of `rouge-score` with its Porter stemmer (ROUGE-L is the reward);
- BLEU: the unsmoothed sentence BLEU of the RoleMRC evaluation (HF `evaluate`'s "bleu", i.e. the
  tensorflow/nmt `compute_bleu` over a one-sentence corpus): 13a tokens, up to 4-grams, brevity penalty,
  and 0.0 as soon as one n-gram order has no match;
- METEOR and BERTScore are not computed (they need NLTK's WordNet data and model weights).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import lru_cache
from typing import Any

BLEU_MAX_ORDER = 4
ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")

# The 13a tokenizer (mteval-v13a): symbols split off, periods and commas split off unless between
# digits, and a dash split off after a digit.
_13A_RULES = (
    (re.compile(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])"), r" \1 "),
    (re.compile(r"([^0-9])([\.,])"), r"\1 \2 "),
    (re.compile(r"([\.,])([^0-9])"), r" \1 \2"),
    (re.compile(r"([0-9])(-)"), r"\1 \2 "),
)
_ENTITIES = (("&quot;", '"'), ("&amp;", "&"), ("&lt;", "<"), ("&gt;", ">"))


def tokenize_13a(text: str) -> list[str]:
    text = text.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in text:
        for entity, char in _ENTITIES:
            text = text.replace(entity, char)
    text = f" {text} "
    for pattern, replacement in _13A_RULES:
        text = pattern.sub(replacement, text)
    return text.split()


def _ngrams(tokens: list[str]) -> Counter[tuple[str, ...]]:
    counts: Counter[tuple[str, ...]] = Counter()
    for order in range(1, BLEU_MAX_ORDER + 1):
        counts.update(tuple(tokens[i : i + order]) for i in range(len(tokens) - order + 1))
    return counts


def sentence_bleu(reply: str, reference: str) -> float:
    """Unsmoothed BLEU of one reply against one reference, in [0, 1]."""
    hypothesis, gold = tokenize_13a(reply), tokenize_13a(reference)
    if not hypothesis or not gold:
        return 0.0
    matches = [0] * BLEU_MAX_ORDER
    for ngram, count in (_ngrams(hypothesis) & _ngrams(gold)).items():
        matches[len(ngram) - 1] += count
    precisions = []
    for order in range(1, BLEU_MAX_ORDER + 1):
        possible = len(hypothesis) - order + 1
        precisions.append(matches[order - 1] / possible if possible > 0 else 0.0)
    if min(precisions) <= 0.0:
        return 0.0
    geometric_mean = math.exp(sum(math.log(p) for p in precisions) / BLEU_MAX_ORDER)
    ratio = len(hypothesis) / len(gold)
    return geometric_mean * (1.0 if ratio > 1.0 else math.exp(1.0 - 1.0 / ratio))


@lru_cache(maxsize=1)
def _rouge_scorer() -> Any:
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)


def reference_metrics(reply: str, reference: str) -> dict[str, float | None]:
    """ROUGE F-measures and BLEU of the reply against the gold reply; METEOR as None (not computed)."""
    scores = _rouge_scorer().score(reference, reply)
    metrics: dict[str, float | None] = {name: float(scores[name].fmeasure) for name in ROUGE_TYPES}
    metrics["bleu"] = sentence_bleu(reply, reference) if reply.strip() and reference.strip() else 0.0
    metrics["meteor"] = None
    return metrics


def strip_reasoning(text: str) -> str:
    """The reply without `<think>...</think>` blocks, stripped; if a `</think>` closes no block, the
    text after the first one. Text without `</think>` is returned as it is."""
    if "</think>" not in text:
        return text
    pieces, position = [], 0
    while (start := text.find("<think>", position)) != -1 and (end := text.find("</think>", start + 7)) != -1:
        pieces.append(text[position:start])
        position = end + len("</think>")
    cleaned = "".join(pieces) + text[position:]
    if cleaned == text:
        cleaned = text.split("</think>", 1)[1]
    return cleaned.strip()


# RoleMRC's evaluation dimensions, read from the suffix of the task name.
DIMENSION_BY_SUFFIX = (
    ("-2ndrefused", "multi_turn"),
    ("-2ndanswer", "multi_turn"),
    ("-special-content", "nested_instruction"),
    ("-special-format", "nested_instruction"),
    ("-refused", "instruction_priority"),
)


def task_dimension(task: str) -> str:
    return next(
        (dimension for suffix, dimension in DIMENSION_BY_SUFFIX if task.endswith(suffix)), "on_scene_dialogue"
    )
