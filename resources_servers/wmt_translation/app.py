"""wmt_translation: machine translation scored against a reference with sacrebleu.

The reward of one rollout is its sentence BLEU / 100 (NeMo Gym's dense RL signal); the benchmark's own
numbers are corpus-level and come from `compute_metrics`: BLEU and chrF per (source, target) language
pair, averaged over rollout indices (one corpus per index, as NeMo-Skills does with seeds), and the
cross-pair means `xx->xx`, `<src>->xx` and `xx-><tgt>`.

Not here: xCOMET (a GPU model fetched from the Hugging Face hub) and spBLEU (its SentencePiece model is
fetched at first use). A config asking for either is refused at start. Scoring runs in the CPU pool with
a deadline; an answer that cannot be scored (deadline, a tokenizer extra not installed, an empty
reference) is marked, never scored 0.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from pydantic import ConfigDict, Field, field_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.serving.cpu_pool import run_cpu_bound
from nemo_gym.wire.failure_kinds import VERIFIER_ERROR
from resources_servers.wmt_translation.scoring import (
    DOWNLOADING_TOKENIZERS,
    OFFLINE_TOKENIZERS,
    corpus_scores,
    sentence_scores,
    strip_reasoning,
    tokenizer_for,
    tokenizer_problem,
)

METRIC_NAMES = ("bleu", "chrf")
Pair = tuple[str, str]


class WmtTranslationConfig(BaseResourcesServerConfig):
    compute_comet: bool = Field(default=False, description="xCOMET scoring; unsupported here, must be false")
    comet_model: str = Field(default="Unbabel/XCOMET-XXL", description="accepted for config compatibility")
    comet_batch_size: int = Field(default=16, ge=1, description="accepted for config compatibility")
    comet_num_shards: int = Field(default=8, ge=1, description="accepted for config compatibility")
    comet_num_gpus: float = Field(default=1.0, ge=0, description="accepted for config compatibility")
    strip_reasoning: bool = Field(default=True, description="score only what follows a </think> preamble")
    bleu_tokenizer: str = Field(
        default="auto", description="auto: by target language (zh, ja-mecab, ko-mecab, else 13a); or one name"
    )

    @field_validator("compute_comet")
    @classmethod
    def _no_comet(cls, value: bool) -> bool:
        if value:
            raise ValueError(
                "compute_comet: xCOMET needs a downloaded GPU model; this port scores BLEU/chrF only"
            )
        return value

    @field_validator("bleu_tokenizer")
    @classmethod
    def _offline_tokenizer(cls, value: str) -> str:
        if value in DOWNLOADING_TOKENIZERS:
            raise ValueError(
                f"bleu_tokenizer {value!r} (spBLEU) downloads a SentencePiece model; unsupported here"
            )
        if value != "auto" and value not in OFFLINE_TOKENIZERS:
            raise ValueError(
                f"bleu_tokenizer {value!r} is not one of auto, {', '.join(sorted(OFFLINE_TOKENIZERS))}"
            )
        return value


class WmtTranslationVerifyRequest(BaseVerifyRequest):
    """NeMo Gym's row: the source `text`, its reference `translation`, and the language codes/names."""

    model_config = ConfigDict(extra="allow")

    text: str = ""
    translation: str
    source_language: str = Field(min_length=1)
    target_language: str = Field(min_length=1)
    source_lang_name: str | None = None
    target_lang_name: str | None = None


class WmtTranslationVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    text: str = ""
    translation: str = ""
    source_language: str = ""
    target_language: str = ""
    source_lang_name: str | None = None
    target_lang_name: str | None = None
    generation: str = ""
    sentence_bleu: float = 0.0
    sentence_chrf: float = 0.0
    bleu_tokenizer: str = ""
    comet_id: str | None = None


OWN_FIELDS = set(WmtTranslationVerifyResponse.model_fields) - set(WmtTranslationVerifyRequest.model_fields)


def echoed_row(body: WmtTranslationVerifyRequest) -> dict[str, Any]:
    """The row as the answer repeats it, less what the answer sets itself and the run's bookkeeping."""
    return {k: v for k, v in body.model_dump().items() if k not in OWN_FIELDS and not k.startswith("_ng_")}


class WmtTranslationResourcesServer(SimpleResourcesServer):
    config: WmtTranslationConfig

    async def verify(self, body: WmtTranslationVerifyRequest) -> WmtTranslationVerifyResponse:
        """reward = sentence BLEU / 100 of the answer (after any reasoning preamble) against `translation`."""
        raw = body.response.output_text or ""
        generation = (strip_reasoning(raw) if self.config.strip_reasoning else raw).strip()
        tokenize = tokenizer_for(body.target_language, self.config.bleu_tokenizer)
        answer = WmtTranslationVerifyResponse(
            **echoed_row(body), reward=0.0, generation=generation, bleu_tokenizer=tokenize
        )
        if not body.translation.strip():
            return marked(answer, "the row's reference translation is empty")
        problem = await run_cpu_bound(
            tokenizer_problem, tokenize, timeout_s=self.config.grading_timeout_s, on_timeout=None
        )
        if problem:
            return marked(answer, problem)
        if not generation:
            return answer  # no translation at all: a real 0, as in NeMo Gym
        scores = await run_cpu_bound(
            sentence_scores,
            generation,
            body.translation,
            tokenize,
            timeout_s=self.config.grading_timeout_s,
            on_timeout=None,
        )
        if scores is None:
            return answer  # the base server marks a fallback answer (mask_sample, verifier_error)
        answer.sentence_bleu = scores["sentence_bleu"]
        answer.sentence_chrf = scores["sentence_chrf"]
        answer.reward = scores["sentence_bleu"] / 100.0
        return answer

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """Corpus BLEU and chrF per language pair and rollout index, then their means over indices (with
        the population std across indices) and over pairs. Marked rollouts are left out of the corpora."""
        runs = min((len(task) for task in tasks), default=0)
        corpora: dict[Pair, list[tuple[list[str], list[str]]]] = defaultdict(
            lambda: [([], []) for _ in range(runs)]
        )
        tokenizers: dict[Pair, str] = {}
        for task in tasks:
            for index, rollout in enumerate(task[:runs]):
                src, tgt = rollout.get("source_language"), rollout.get("target_language")
                if not src or not tgt or rollout.get("mask_sample"):
                    continue
                hypotheses, references = corpora[(src, tgt)][index]
                hypotheses.append(rollout.get("generation") or "")
                references.append(rollout.get("translation") or "")
                tokenizers[(src, tgt)] = rollout.get("bleu_tokenizer") or tokenizer_for(
                    tgt, self.config.bleu_tokenizer
                )
        per_pair: dict[Pair, dict[str, list[float]]] = {}
        for pair, pair_runs in corpora.items():
            scored = [corpus_scores(h, r, tokenizers[pair]) for h, r in pair_runs if h]
            per_pair[pair] = {name: [s[name] for s in scored] for name in METRIC_NAMES}
        metrics: dict[str, Any] = {}
        pairs = sorted(per_pair)
        for src, tgt in pairs:
            add_mean_std(metrics, f"{src}->{tgt}", per_pair[(src, tgt)])
        add_mean_std(metrics, "xx->xx", across(per_pair, pairs, lambda p: True))
        for src in sorted({p[0] for p in pairs}):
            add_mean_std(metrics, f"{src}->xx", across(per_pair, pairs, lambda p, s=src: p[0] == s))
        for tgt in sorted({p[1] for p in pairs}):
            add_mean_std(metrics, f"xx->{tgt}", across(per_pair, pairs, lambda p, t=tgt: p[1] == t))
        return metrics

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        """The all-pairs BLEU and chrF, and the from-English ones when English is a source."""
        names = [f"{group}/{name}" for group in ("xx->xx", "en->xx") for name in METRIC_NAMES]
        return {name: agent_metrics[name] for name in names if name in agent_metrics}


def marked(answer: WmtTranslationVerifyResponse, reason: str) -> WmtTranslationVerifyResponse:
    """The answer as not measured: no score could be computed for it."""
    answer.mask_sample = True
    answer.failure_kind = VERIFIER_ERROR
    answer.failure_reason = reason
    return answer


def across(
    per_pair: dict[Pair, dict[str, list[float]]], pairs: list[Pair], keep: Callable[[Pair], bool]
) -> dict[str, list[float]]:
    """Per rollout index, the mean over the kept pairs (indices every kept pair has)."""
    kept = [per_pair[p] for p in pairs if keep(p)]
    result: dict[str, list[float]] = {}
    for name in METRIC_NAMES:
        count = min((len(scores[name]) for scores in kept), default=0)
        result[name] = [sum(scores[name][i] for scores in kept) / len(kept) for i in range(count)]
    return result


def add_mean_std(metrics: dict[str, Any], group: str, runs: dict[str, list[float]]) -> None:
    """`<group>/<name>` (mean over rollout indices) and `<group>/<name>_std_dev_across_runs` (population)."""
    for name in METRIC_NAMES:
        values = runs.get(name) or []
        if not values:
            continue
        mean = sum(values) / len(values)
        metrics[f"{group}/{name}"] = mean
        metrics[f"{group}/{name}_std_dev_across_runs"] = (
            sum((v - mean) ** 2 for v in values) / len(values)
        ) ** 0.5


if __name__ == "__main__":
    WmtTranslationResourcesServer.run_webserver()
