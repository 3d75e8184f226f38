"""assaybench: rank the hit genes of a CRISPR screen described in plain text.

The reply's ranked gene list is scored against the screen's signed relevance vector (positive for hits,
zero for assayed non-hits, negative for hits in the opposite direction); the reward is adjusted nDCG@100,
0 for random-or-worse and 1 for the ideal ranking. A reply with no gene list earns 0 and says why. Scoring
runs off the event loop under `verify_deadline_s`; a score that cannot be had in time is masked, not 0.
"""

from __future__ import annotations

import asyncio
import math
import re
from typing import Any

from pydantic import ConfigDict, Field, field_validator, model_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseRunRequest,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.envkit.pass_at_k_metrics import (
    TOKEN_MEANS,
    compute_pass_majority_metrics,
    compute_subset_metrics,
    highest_k_metrics,
)
from nemo_gym.judge import last_assistant_text
from resources_servers.assaybench.ranking import THINK_BLOCK, extract_genes, ranking_metrics

METRIC_NAME = re.compile(r"(adjusted_ndcg|ndcg|precision|normalized_precision|fdr|recall)@(\d+)")
# The columns of the paper's tables, at its cutoff, rolled up over rollouts.
HEADLINE = ("adjusted_ndcg@100", "precision@100", "normalized_precision@100", "fdr@100")


class AssayBenchConfig(BaseResourcesServerConfig):
    k_values: list[int] = Field(default=[5, 10, 20, 50, 100], min_length=1)
    reward_metric: str = "adjusted_ndcg@100"
    # Upper-case symbols and drop `(alias)` notes before matching (NeMo Gym maps to HGNC; see README).
    use_gene_mapper: bool = True
    min_expected_genes: int = Field(default=0, ge=0)
    strip_think_blocks: bool = True
    # Bounds on one verify: characters of the reply read, genes kept, seconds for the scoring.
    max_reply_chars: int = Field(default=200_000, ge=1)
    max_predicted_genes: int = Field(default=1000, ge=1)
    verify_deadline_s: float = Field(default=30.0, gt=0)

    @field_validator("k_values")
    @classmethod
    def _positive(cls, value: list[int]) -> list[int]:
        if any(k < 1 for k in value):
            raise ValueError("every k must be at least 1")
        return value

    @model_validator(mode="after")
    def _reward_is_a_computed_metric(self) -> AssayBenchConfig:
        match = METRIC_NAME.fullmatch(self.reward_metric)
        if match is None or int(match.group(2)) not in self.k_values:
            raise ValueError(
                f"reward_metric {self.reward_metric!r} must be <metric>@<k> with k in k_values "
                "(metrics: adjusted_ndcg, ndcg, precision, normalized_precision, fdr, recall)"
            )
        return self


class AssayBenchRunRequest(BaseRunRequest):
    model_config = ConfigDict(extra="allow")

    verifier_metadata: dict[str, Any] | None = None
    relevance_genes: list[str] = Field(min_length=1)
    relevance_scores: list[float] = Field(min_length=1)
    dataset_name: str | None = None
    split: str | None = None
    question: str | None = None
    cleaned_phenotype: str | None = None
    screen_category: str | None = None
    author: str | None = None
    source_id: str | None = None
    num_genes: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _lift_verifier_metadata(cls, data: Any) -> Any:
        """NeMo Gym rows carry the screen flat or under `verifier_metadata`; a flat key wins."""
        if isinstance(data, dict) and isinstance(data.get("verifier_metadata"), dict):
            return {**data["verifier_metadata"], **data}
        return data

    @model_validator(mode="after")
    def _one_score_per_gene(self) -> AssayBenchRunRequest:
        if len(self.relevance_genes) != len(self.relevance_scores):
            raise ValueError("relevance_genes and relevance_scores must have the same length")
        if not all(math.isfinite(s) for s in self.relevance_scores):
            raise ValueError("relevance_scores must be finite numbers")
        return self


class AssayBenchVerifyRequest(AssayBenchRunRequest, BaseVerifyRequest):
    pass


class AssayBenchVerifyResponse(AssayBenchVerifyRequest, BaseVerifyResponse):
    predicted_genes: list[str] = []
    num_predicted: int = 0
    extraction_mode: str = "none"
    truncated: bool = False
    phenotype_group: str | None = None
    metrics: dict[str, float] = {}


def phenotype_slug(value: str | None) -> str | None:
    """`"Fitness / Viability"` -> `"fitness_viability"`: the per-phenotype metric prefix."""
    slug = re.sub(r"[^a-z0-9]+", "_", (value or "").lower()).strip("_")
    return slug or None


def was_truncated(response: Any) -> bool:
    details = response.incomplete_details
    return response.status == "incomplete" or getattr(details, "reason", None) == "max_output_tokens"


def rollout_scores(rollout: dict[str, Any]) -> dict[str, float]:
    metrics = rollout.get("metrics") or {}
    scores = {name: float(metrics[name]) for name in HEADLINE if name in metrics}
    scores["empty_prediction"] = float(not rollout.get("num_predicted"))
    scores["truncated"] = float(bool(rollout.get("truncated")))
    return scores


class AssayBenchResourcesServer(SimpleResourcesServer):
    config: AssayBenchConfig

    async def verify(self, body: AssayBenchVerifyRequest) -> AssayBenchVerifyResponse:
        """reward = `reward_metric` (adjusted nDCG@100) of the reply's ranked list."""
        text = last_assistant_text(body.response)[: self.config.max_reply_chars]
        if self.config.strip_think_blocks:
            text = THINK_BLOCK.sub("", text)
        genes, mode = extract_genes(text, self.config.min_expected_genes)
        genes = genes[: self.config.max_predicted_genes]
        echoed = {
            **body.model_dump(exclude={"reward"}),
            "predicted_genes": genes,
            "num_predicted": len(genes),
            "extraction_mode": mode,
            "truncated": was_truncated(body.response),
            "phenotype_group": phenotype_slug(body.cleaned_phenotype),
        }
        try:
            metrics = await asyncio.wait_for(
                asyncio.to_thread(
                    ranking_metrics,
                    genes,
                    body.relevance_genes,
                    body.relevance_scores,
                    self.config.k_values,
                    self.config.use_gene_mapper,
                ),
                self.config.verify_deadline_s,
            )
        except TimeoutError:
            reason = f"scoring took longer than verify_deadline_s={self.config.verify_deadline_s}"
            return AssayBenchVerifyResponse(
                **echoed, reward=0.0, mask_sample=True, failure_kind="timeout", failure_reason=reason
            )
        reason = None if genes else "no gene list could be read from the reply"
        return AssayBenchVerifyResponse(
            **echoed,
            reward=metrics[self.config.reward_metric] if self.config.reward_metric in metrics else 0.0,
            failure_reason=reason
            or (
                None
                if self.config.reward_metric in metrics
                else f"{self.config.reward_metric} needs at least k distinct predicted genes"
            ),
            metrics=metrics,
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """The headline metrics per rollout as pass@1[avg-of-k], overall and per phenotype group."""
        if not tasks:
            return {}
        metrics = compute_pass_majority_metrics(tasks, score_fn=rollout_scores)[0]
        metrics.update(compute_subset_metrics(tasks, "phenotype_group", score_fn=rollout_scores))
        return metrics

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        key = {name: agent_metrics[name] for name in TOKEN_MEANS if name in agent_metrics}
        key.update(highest_k_metrics(agent_metrics, "pass@1[avg-of-{k}]", score_names=HEADLINE))
        return key


if __name__ == "__main__":
    AssayBenchResourcesServer.run_webserver()
