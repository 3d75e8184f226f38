"""Transcript scores for asr_with_pc, meant to run in a CPU worker: the edit distances cost
reference length × hypothesis length, and the hypothesis is whatever the model wrote.

Four word error rates are defined the way NeMo Skills' audio evaluator (and NeMo Gym after it) defines
them, so numbers compare across the two:

- `wer`: Whisper's English normalizer on the lower-cased text (spelling, numbers, contractions, no
  punctuation), then word-level WER;
- `wer_c`: punctuation removed, case kept;
- `wer_pc`: punctuation kept as tokens of their own, case kept;
- `per`: the error rate of the punctuation marks alone, aligned in order.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import jiwer

# A whole task type is right when its error rate is below this.
CORRECT_BELOW = 0.5
# Speech runs at roughly 600-900 characters a minute; far above that, the transcript repeats itself.
HALLUCINATION_CHARS_PER_MINUTE = 1500.0

_WHITESPACE = re.compile(r"\s+")
_PUNCTUATION = re.compile(r"[^\w\s]")
_PC_TOKEN = re.compile(r"\w+|[^\w\s]")


def squeeze(text: str) -> str:
    """Runs of whitespace as one space, none at the ends."""
    return _WHITESPACE.sub(" ", text).strip()


@lru_cache(maxsize=1)
def _whisper_normalizer() -> Any:
    from whisper_normalizer.english import EnglishTextNormalizer

    return EnglishTextNormalizer()


def standard_text(text: str) -> str:
    """What the plain `wer` compares: lower case, Whisper-normalized, whitespace squeezed."""
    return squeeze(_whisper_normalizer()(text.lower()))


def pc_tokens(text: str) -> str:
    """Words and single punctuation marks, space-separated: `Hi, there.` → `Hi , there .`."""
    return " ".join(_PC_TOKEN.findall(squeeze(text)))


def without_punctuation(text: str) -> str:
    return squeeze(_PUNCTUATION.sub("", text))


def punctuation_marks(text: str) -> list[str]:
    return [char for char in text if not char.isalnum() and not char.isspace()]


def punctuation_error_rate(reference: str, hypothesis: str) -> float:
    """Errors over all aligned marks, (S + D + I) / (C + S + D + I), of the two texts' punctuation.

    The alignment is the usual edit-distance table whose cells keep their (C, S, D, I) counts; equal marks
    always align, otherwise the cheapest of substitution, deletion and insertion wins, ties going in that
    order. The tie rule decides C, so it is fixed here to give the numbers NeMo Skills gives.
    """
    ref, hyp = punctuation_marks(reference), punctuation_marks(hypothesis)
    if not ref and not hyp:
        return 0.0
    # previous[j] holds the (C, S, D, I) counts of aligning ref[:i-1] with hyp[:j].
    previous = [(0, 0, 0, j) for j in range(len(hyp) + 1)]
    for i in range(1, len(ref) + 1):
        current = [(0, 0, i, 0)]
        for j in range(1, len(hyp) + 1):
            if ref[i - 1] == hyp[j - 1]:
                c, s, d, n = previous[j - 1]
                current.append((c + 1, s, d, n))
                continue
            c, s, d, n = previous[j - 1]
            options = [(c, s + 1, d, n)]
            c, s, d, n = previous[j]
            options.append((c, s, d + 1, n))
            c, s, d, n = current[j - 1]
            options.append((c, s, d, n + 1))
            current.append(min(options, key=lambda counts: counts[1] + counts[2] + counts[3]))
        previous = current
    correct, substituted, deleted, inserted = previous[-1]
    errors = substituted + deleted + inserted
    return errors / (correct + errors)


def score_asr_pc(reference: str, hypothesis: str) -> dict[str, Any]:
    """All four rates; right when `wer_pc` is below 0.5. The compared strings are kept so a corpus-level
    rate can be computed again over many answers."""
    ref_pc_tok, hyp_pc_tok = pc_tokens(reference), pc_tokens(hypothesis)
    ref_c, hyp_c = without_punctuation(reference), without_punctuation(hypothesis)
    text, pred_text = standard_text(reference), standard_text(hypothesis)
    wer_pc = jiwer.wer(ref_pc_tok, hyp_pc_tok)
    return {
        "wer": jiwer.wer(text, pred_text),
        "wer_c": jiwer.wer(ref_c, hyp_c),
        "wer_pc": wer_pc,
        "per": punctuation_error_rate(reference, hypothesis),
        "is_correct": wer_pc < CORRECT_BELOW,
        "text": text,
        "pred_text": pred_text,
        "ref_pc_tok": ref_pc_tok,
        "hyp_pc_tok": hyp_pc_tok,
        "ref_c": ref_c,
        "hyp_c": hyp_c,
    }


def plain_wer(reference: str, hypothesis: str) -> tuple[float, str, str]:
    """(wer, normalized reference, normalized hypothesis); an empty hypothesis reads as the word `empty`,
    as the Open ASR Leaderboard scores it. The caller makes sure the normalized reference is not empty."""
    text = standard_text(reference)
    pred_text = standard_text(hypothesis) or "empty"
    return jiwer.wer(text, pred_text), text, pred_text


def score_asr(reference: str, hypothesis: str, more_references: dict[str, str]) -> dict[str, Any]:
    """`wer` alone (right below 0.5), plus `wer_<suffix>`/`is_correct_<suffix>` for each further
    reference (`text_tn` → `wer_tn`); a further reference that normalizes to nothing gets None."""
    wer, text, pred_text = plain_wer(reference, hypothesis)
    scores: dict[str, Any] = {
        "wer": wer,
        "is_correct": wer < CORRECT_BELOW,
        "text": text,
        "pred_text": pred_text,
    }
    for field, value in more_references.items():
        suffix = field.removeprefix("text_")
        extra = plain_wer(value, hypothesis)[0] if standard_text(value) else None
        scores[f"wer_{suffix}"] = extra
        scores[f"is_correct_{suffix}"] = None if extra is None else extra < CORRECT_BELOW
    return scores


def score_hallucination(reference: str, hypothesis: str, audio_duration: float) -> dict[str, Any]:
    """Right unless the transcript runs faster than HALLUCINATION_CHARS_PER_MINUTE for the audio's length."""
    char_rate = len(hypothesis) / audio_duration * 60.0
    hallucinating = char_rate > HALLUCINATION_CHARS_PER_MINUTE
    return {
        "is_correct": not hallucinating,
        "hallucination_rate": float(hallucinating),
        "char_rate": round(char_rate, 2),
        "text": reference,
        "pred_text": hypothesis,
    }


def exact_match_text(text: str) -> str:
    return squeeze(_PUNCTUATION.sub(" ", text.lower()))


def score_exact_match(reference: str, hypothesis: str) -> dict[str, Any]:
    """Right when both texts agree once lower-cased, punctuation made spaces and whitespace squeezed."""
    text, pred_text = exact_match_text(reference), exact_match_text(hypothesis)
    return {"is_correct": bool(text) and text == pred_text, "text": text, "pred_text": pred_text}


def score(
    task_type: str,
    reference: str,
    hypothesis: str,
    audio_duration: float | None,
    more_references: dict[str, str],
) -> dict[str, Any]:
    """The scores of one answer by task type; the caller has checked the inputs the type needs."""
    if task_type == "ASR-PC":
        return score_asr_pc(reference, hypothesis)
    if task_type in ("ASR", "ASR_LEADERBOARD"):
        return score_asr(reference, hypothesis, more_references)
    if task_type == "Hallucination":
        assert audio_duration is not None
        return score_hallucination(reference, hypothesis, audio_duration)
    return score_exact_match(reference, hypothesis)


def corpus_wer(references: list[str], hypotheses: list[str]) -> float:
    """Word errors summed over all pairs, over the reference words summed (not a mean of rates)."""
    return jiwer.wer(references, hypotheses)
