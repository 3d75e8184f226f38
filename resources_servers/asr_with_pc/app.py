"""asr_with_pc: speech transcripts scored by word error rate, with or without punctuation and case.

A row holds the audio (in `responses_create_params.metadata.audio_url`, for a model server that splices
it into the prompt) and the reference transcript `expected_answer`. The `task_type` (row, else config)
picks the score: ASR-PC (WER, WER with case, WER with punctuation and case, punctuation error rate),
plain ASR WER, ASR_LEADERBOARD (plain WER against further reference fields too), Hallucination
(characters per minute of audio) or EXACT_MATCH. The reward is 1.0 when the task type's rate is below
0.5. The edit distances grow with the model's output, so grading runs in the CPU pool with a deadline.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.envkit.pass_at_k_metrics import compute_pass_majority_metrics, highest_k_metrics
from nemo_gym.serving.cpu_pool import run_cpu_bound
from resources_servers.asr_with_pc.grading import (
    corpus_wer,
    exact_match_text,
    pc_tokens,
    score,
    standard_text,
)

TaskType = Literal["ASR-PC", "ASR", "Hallucination", "ASR_LEADERBOARD", "EXACT_MATCH"]
# The failure kind of an answer that no reference or duration makes gradable.
UNGRADABLE = "asr_with_pc:ungradable"
# The corpus-level and mean rates of compute_metrics, under their headline names in key_metrics.
RATE_FAMILIES = (("corpus_wer", "wer"), ("wer_c", "wer_c"), ("wer_pc", "wer_pc"), ("per", "per"))


class ASRWithPCConfig(BaseResourcesServerConfig):
    task_type: TaskType = Field(default="ASR-PC", description="the task type of rows that name none")
    normalization_mode: Literal["standard"] = Field(
        default="standard", description="Whisper's English normalizer; the only mode supported here"
    )


class ASRWithPCVerifyRequest(BaseVerifyRequest):
    """Extra fields are allowed: ASR_LEADERBOARD rows carry their further references (`text_tn`, ...)."""

    model_config = ConfigDict(extra="allow")

    expected_answer: str = ""
    sample_id: str | None = None
    split: str | None = None
    task_type: TaskType | None = None
    normalization_mode: Literal["standard"] | None = None
    audio_duration: float | None = None
    reference_fields: list[str] | None = None

    @model_validator(mode="after")
    def _reference_fields_are_strings_on_the_row(self) -> ASRWithPCVerifyRequest:
        extra = self.model_extra or {}
        for field in self.reference_fields or []:
            if not isinstance(extra.get(field), str):
                raise ValueError(f"reference_fields names {field!r}, which the row lacks or is not a string")
        return self


class ASRWithPCVerifyResponse(BaseVerifyResponse):
    """Also `wer_<suffix>` / `is_correct_<suffix>` for ASR_LEADERBOARD's further references."""

    model_config = ConfigDict(extra="allow")

    text: str = ""
    pred_text: str = ""
    wer: float = 0.0
    wer_c: float = 0.0
    wer_pc: float = 0.0
    per: float = 0.0
    is_correct: bool = False
    ref_pc_tok: str = ""
    hyp_pc_tok: str = ""
    ref_c: str = ""
    hyp_c: str = ""
    hallucination_rate: float | None = None
    char_rate: float | None = None
    bleu: float | None = None


def echoed_row(body: ASRWithPCVerifyRequest) -> dict[str, Any]:
    """The row as the answer repeats it: its fields and extras, less what the answer sets itself (a
    recorded rollout posted again carries its old scores) and the run's `_ng_` bookkeeping."""
    own = set(ASRWithPCVerifyResponse.model_fields) - set(ASRWithPCVerifyRequest.model_fields)
    return {
        key: value
        for key, value in body.model_dump().items()
        if key not in own and not key.startswith(("_ng_", "wer_", "is_correct_"))
    }


def ungradable_reason(task_type: str, reference: str, audio_duration: float | None) -> str | None:
    """Why an answer to this row cannot be graded, or None: no reference left to compare with (a rate
    over zero reference words is no measurement), or no audio length to rate a transcript against."""
    if task_type == "Hallucination":
        if audio_duration is None or audio_duration <= 0:
            return "Hallucination rows need a positive audio_duration"
        return None
    empty = {
        "ASR-PC": not pc_tokens(reference),
        "EXACT_MATCH": not exact_match_text(reference),
    }.get(task_type)
    if empty is None:  # ASR, ASR_LEADERBOARD
        empty = not standard_text(reference)
    return f"expected_answer has nothing to compare once normalized for {task_type}" if empty else None


def number(value: Any) -> float | None:
    """A rollout field as a number, or None when it is not one (aggregated rows are only loosely typed)."""
    return float(value) if isinstance(value, (int, float)) else None


def score_names(rollout: dict[str, Any]) -> dict[str, float]:
    """The per-rollout scores pass@k is computed on."""
    pred_text = rollout.get("pred_text")
    scores = {
        "accuracy": 1.0 if rollout.get("is_correct") is True else 0.0,
        "per": number(rollout.get("per")) or 0.0,
        "no_answer": 0.0 if isinstance(pred_text, str) and pred_text.strip() else 1.0,
    }
    if (hallucination_rate := number(rollout.get("hallucination_rate"))) is not None:
        scores["hallucination_rate"] = hallucination_rate
    return scores


def rate_metrics(tasks: list[list[dict[str, Any]]], k: int) -> dict[str, float]:
    """Over the first k rollouts of each task, in percent: the corpus WER of the normalized texts, the
    mean WER_C, WER_PC and PER, and a corpus WER per further reference (`wer_tn@k=1`)."""
    rollouts = [rollout for task in tasks for rollout in task[:k]]
    pairs = [
        (r["text"], r["pred_text"])
        for r in rollouts
        if isinstance(r.get("text"), str) and r["text"] and isinstance(r.get("pred_text"), str)
    ]
    metrics: dict[str, float] = {}
    if not pairs:
        return metrics
    metrics[f"corpus_wer@k={k}"] = 100.0 * corpus_wer([ref for ref, _ in pairs], [hyp for _, hyp in pairs])
    for name in ("wer_c", "wer_pc", "per"):
        values = [value for r in rollouts if (value := number(r.get(name))) is not None]
        if values:
            metrics[f"{name}@k={k}"] = 100.0 * sum(values) / len(values)
    suffixes = {
        key.removeprefix("wer_")
        for r in rollouts
        for key in r
        if key.startswith("wer_") and key not in ("wer_c", "wer_pc")
    }
    for suffix in sorted(suffixes):
        extra = [
            (r[f"text_{suffix}"], r["pred_text"])
            for r in rollouts
            if isinstance(r.get(f"text_{suffix}"), str) and isinstance(r.get("pred_text"), str)
        ]
        extra = [(standard_text(ref), standard_text(hyp) or "empty") for ref, hyp in extra]
        extra = [(ref, hyp) for ref, hyp in extra if ref]
        if extra:
            metrics[f"wer_{suffix}@k={k}"] = 100.0 * corpus_wer([r for r, _ in extra], [h for _, h in extra])
    return metrics


class ASRWithPCResourcesServer(SimpleResourcesServer):
    config: ASRWithPCConfig

    async def verify(self, body: ASRWithPCVerifyRequest) -> ASRWithPCVerifyResponse:
        """reward 1.0 when the task type's rate is below 0.5 (is_correct); masked when ungradable."""
        hypothesis = body.response.output_text.strip()
        reference = body.expected_answer.strip()
        task_type = body.task_type or self.config.task_type
        reason = ungradable_reason(task_type, reference, body.audio_duration)
        if reason is not None:
            return ASRWithPCVerifyResponse(
                **echoed_row(body),
                reward=0.0,
                mask_sample=True,
                failure_kind=UNGRADABLE,
                failure_reason=reason,
                pred_text=hypothesis,
            )
        extra = body.model_extra or {}
        more_references = (
            {field: extra[field] for field in body.reference_fields or []}
            if task_type == "ASR_LEADERBOARD"
            else {}
        )
        scores = await run_cpu_bound(
            score,
            task_type,
            reference,
            hypothesis,
            body.audio_duration,
            more_references,
            timeout_s=self.config.grading_timeout_s,
            on_timeout={"is_correct": False, "pred_text": hypothesis},
        )
        return ASRWithPCVerifyResponse(
            **echoed_row(body), reward=1.0 if scores["is_correct"] else 0.0, **scores
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """pass@k of `accuracy` (plus mean `per`, `no_answer`, `hallucination_rate`), then the rates by k."""
        metrics, _, _, max_k = compute_pass_majority_metrics(tasks, score_fn=score_names)
        for k in range(1, max_k + 1):
            metrics.update(rate_metrics(tasks, k))
        return metrics

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        """Token means, the highest-k pass@ entries, and the rates at the highest k under plain names."""
        key = {
            name: agent_metrics[name]
            for name in ("mean/input_tokens", "mean/output_tokens")
            if name in agent_metrics
        }
        key.update(highest_k_metrics(agent_metrics, "pass@1[avg-of-{k}]"))
        key.update(highest_k_metrics(agent_metrics, "pass@{k}"))
        ks = [int(name.rsplit("=", 1)[1]) for name in agent_metrics if name.startswith("corpus_wer@k=")]
        if not ks:
            return key
        top = max(ks)
        for family, headline in RATE_FAMILIES:
            if f"{family}@k={top}" in agent_metrics:
                key[headline] = agent_metrics[f"{family}@k={top}"]
        for name, value in agent_metrics.items():
            if (
                name.startswith("wer_")
                and name.endswith(f"@k={top}")
                and name[4:].split("@")[0] not in ("c", "pc")
            ):
                key[name.split("@")[0]] = value
        return key


if __name__ == "__main__":
    ASRWithPCResourcesServer.run_webserver()
