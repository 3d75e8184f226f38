"""Reading a ranked gene list out of a reply, and scoring it against a screen's signed relevance vector.

Written here from AssayBench's published definitions (paper section 3, the `assaybench` package's metric
names): adjusted nDCG@k against the screen's analytic random baseline, precision@k, its hit-count-normalized
form, directional FDR@k and recall@k. A predicted gene the screen did not assay is unscored: it is dropped
after the top-k cut, so a model is not punished for not knowing the library.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

ANSWER_HEADER = re.compile(r"\[\[\s*##\s*(\w+)\s*##\s*\]\]")
THINK_BLOCK = re.compile(r"<think>.*?</think>\s*", re.DOTALL | re.IGNORECASE)
# A gene symbol as HGNC writes them: a capital first, then capitals, digits, '-' or '.' (C1orf43-style
# lowercase is accepted too); anything else in an answer field is noise around a symbol.
SYMBOL = re.compile(r"[A-Z][A-Za-z0-9.\-]{0,19}")
ANNOTATION = re.compile(r"\s*[(\[].*?[)\]]")
# The raw-reply scan only trusts tokens that look like symbols and are not common capitalised words.
RAW_TOKEN = re.compile(r"(?<![A-Za-z0-9])[A-Z][A-Z0-9\-]{1,14}(?![A-Za-z0-9])")
NOT_GENES = frozenset(
    "A AN AND THE OF OR IN TO FOR WITH DNA RNA CRISPR KO SCREEN GENE GENES HIT HITS TOP LIST NOTE CELL "
    "CELLS ANSWER REASONING COMPLETED I II III IV OK YES NO".split()
)

# How the list was found (`extraction_mode`).
FROM_ANSWER_FIELD = "answer_field"
FROM_QUALITY_GATE = "quality_gate_fallback"
FROM_RAW_SCAN = "raw_fallback"
NOTHING_FOUND = "none"


def answer_field(text: str) -> str | None:
    """The text under the first `[[ ## answer ## ]]` header up to the next header; None without one."""
    headers = list(ANSWER_HEADER.finditer(text))
    for position, header in enumerate(headers):
        if header.group(1).lower() == "answer":
            end = headers[position + 1].start() if position + 1 < len(headers) else len(text)
            return text[header.end() : end]
    return None


def genes_from_answer(field: str) -> list[str]:
    """Comma-, semicolon- or line-separated symbols; list markers, numbering and `(alias)` notes dropped."""
    genes = []
    for piece in re.split(r"[,;\n]", field):
        piece = ANNOTATION.sub("", piece).strip().strip("*`'\" ")
        piece = re.sub(r"^(?:\d+[.)]|[-*•])\s*", "", piece)
        if SYMBOL.fullmatch(piece):
            genes.append(piece)
    return genes


def genes_from_raw_text(text: str) -> list[str]:
    """Last resort for a reply without an answer field: every symbol-like capitalised token, in order."""
    return list(dict.fromkeys(token for token in RAW_TOKEN.findall(text) if token not in NOT_GENES))


def extract_genes(text: str, min_expected_genes: int = 0) -> tuple[list[str], str]:
    """(genes, extraction mode). The answer field wins; with fewer than `min_expected_genes` there, the raw
    scan is kept when it finds more (the reference harness's quality gate)."""
    field = answer_field(text)
    if field is None:
        genes = genes_from_raw_text(text)
        return genes, FROM_RAW_SCAN if genes else NOTHING_FOUND
    genes, mode = genes_from_answer(field), FROM_ANSWER_FIELD
    if len(genes) < min_expected_genes:
        fallback = genes_from_raw_text(text)
        if len(fallback) > len(genes):
            genes, mode = fallback, FROM_QUALITY_GATE
    return genes, mode if genes else NOTHING_FOUND


def canonical(symbol: str, normalize: bool) -> str:
    """The symbol as scored: with `normalize`, upper-cased without a trailing `(alias)` note."""
    if not normalize:
        return symbol.strip()
    return ANNOTATION.sub("", symbol).strip().upper()


def dcg(relevances: Sequence[float | None], k: int) -> float:
    """Gain of the top k (a short list padded with zeros), unscored genes removed after the cut."""
    padded = list(relevances[:k]) + [0.0] * max(0, k - len(relevances))
    scored = [r for r in padded if r is not None]
    return sum(r / math.log2(i + 2) for i, r in enumerate(scored))


def ndcg(predicted: Sequence[float | None], all_relevances: Sequence[float], k: int) -> float:
    """DCG over the ideal DCG of the clipped-positive relevances (an ideal ranking avoids negatives)."""
    ideal = dcg(sorted((max(r, 0.0) for r in all_relevances), reverse=True), k)
    return dcg(predicted, k) / ideal if ideal > 0 else 0.0


def adjusted_ndcg(predicted: Sequence[float | None], all_relevances: Sequence[float], k: int) -> float:
    """nDCG rescaled so a random ranking scores 0 and the ideal 1; worse than random is 0.

    The random ranking's expected relevance at every rank is the screen's mean relevance."""
    mean = sum(all_relevances) / len(all_relevances)
    random = ndcg([mean] * min(k, len(all_relevances)), all_relevances, k)
    if random >= 1.0:
        return 0.0
    return max((ndcg(predicted, all_relevances, k) - random) / (1.0 - random), 0.0)


def ranking_metrics(
    predicted: Sequence[str],
    genes: Sequence[str],
    scores: Sequence[float],
    k_values: Sequence[int],
    normalize: bool,
) -> dict[str, float]:
    """Every metric at every k. precision/fdr@k exist only when at least k distinct genes were predicted;
    normalized precision only when the screen has hits."""
    relevance = {canonical(g, normalize): s for g, s in zip(genes, scores, strict=True)}
    ranked = list(dict.fromkeys(canonical(g, normalize) for g in predicted))
    predicted_relevance = [relevance.get(gene) for gene in ranked]
    num_hits = sum(1 for s in scores if s > 0)
    metrics: dict[str, float] = {
        "num_distinct_predicted": float(len(ranked)),
        "unscored_rate": (sum(r is None for r in predicted_relevance) / len(ranked) if ranked else 0.0),
    }
    for k in k_values:
        metrics[f"ndcg@{k}"] = ndcg(predicted_relevance, scores, k)
        metrics[f"adjusted_ndcg@{k}"] = adjusted_ndcg(predicted_relevance, scores, k)
        top = [r for r in predicted_relevance[:k] if r is not None]
        hits = sum(1 for r in top if r > 0)
        metrics[f"recall@{k}"] = hits / num_hits if num_hits else 0.0
        if len(ranked) >= k:
            metrics[f"precision@{k}"] = hits / len(top) if top else 0.0
            metrics[f"fdr@{k}"] = sum(1 for r in top if r < 0) / len(top) if top else 0.0
            if num_hits:
                metrics[f"normalized_precision@{k}"] = hits / min(num_hits, len(top)) if top else 0.0
    return metrics
