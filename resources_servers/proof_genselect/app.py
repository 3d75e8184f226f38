"""proof_genselect: the model compares candidate proofs and names the best as `<best_solution>N</best_solution>`.

The reward is 1.0 when the selected candidate is one of those judged correct. Reading the selection is a
linear string scan, so it runs inline; any answer that does not select exactly one valid candidate
scores 0.0 with `extracted_answer: null` and a named `parse_error`.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import ConfigDict, Field, model_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.envkit.pass_at_k_metrics import PassAtK
from resources_servers.proof_genselect.grading import select

CANDIDATE_FIELD = re.compile(r"proof_\d+")
Index = Annotated[int, Field(ge=1)]
Indices = Index | Annotated[list[Index], Field(min_length=1)]


class ProofGenSelectConfig(BaseResourcesServerConfig):
    assert_think_end: bool = Field(
        default=False, description="an answer without `</think>` (reasoning not closed) selects nothing"
    )


def index_set(indices: Indices | None) -> frozenset[int] | None:
    if indices is None:
        return None
    return frozenset([indices] if isinstance(indices, int) else indices)


class ProofGenSelectVerifyRequest(BaseVerifyRequest):
    """The candidates live in the prompt (and usually in `proof_1`, `proof_2`, ... fields, kept and echoed)."""

    model_config = ConfigDict(extra="allow")

    problem: str | None = None
    correct_index: Indices | None = None
    expected_answer: Indices | None = None
    num_solutions: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _consistent_answer_key(self) -> ProofGenSelectVerifyRequest:
        given = {index_set(self.correct_index), index_set(self.expected_answer)} - {None}
        if not given:
            raise ValueError("the row needs correct_index or expected_answer: the index(es) judged correct")
        if len(given) > 1:
            raise ValueError("correct_index and expected_answer name different candidates")
        count = self.candidate_count()
        if count is not None and max(self.correct_indices()) > count:
            raise ValueError(f"a correct index is above the number of candidates ({count})")
        return self

    def correct_indices(self) -> frozenset[int]:
        return index_set(self.correct_index) or index_set(self.expected_answer) or frozenset()

    def candidate_count(self) -> int | None:
        """`num_solutions`, else the number of `proof_<n>` fields; None when neither says."""
        if self.num_solutions is not None:
            return self.num_solutions
        return sum(1 for key in self.model_extra or {} if CANDIDATE_FIELD.fullmatch(key)) or None


class ProofGenSelectVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    extracted_answer: int | None
    parse_error: str | None
    correct_indices: list[int]


class ProofGenSelectResourcesServer(SimpleResourcesServer):
    config: ProofGenSelectConfig
    # pass@k, pass@1[avg-of-k] and majority@k (voting on the selected index), plus the no-answer rate.
    pass_at_k = PassAtK(answer_key="extracted_answer")
    key_metric_patterns = (
        "mean/reward",
        "pass@1[avg-of-{k}]/*",
        "pass@{k}/accuracy",
        "majority@{k}/accuracy",
    )

    async def verify(self, body: ProofGenSelectVerifyRequest) -> ProofGenSelectVerifyResponse:
        correct = body.correct_indices()
        selection = select(body.response.output_text, body.candidate_count(), self.config.assert_think_end)
        row = body.model_dump(exclude={"reward", "extracted_answer", "parse_error", "correct_indices"})
        return ProofGenSelectVerifyResponse(
            **row,
            reward=1.0 if selection.index in correct else 0.0,
            extracted_answer=selection.index,
            parse_error=selection.parse_error,
            correct_indices=sorted(correct),
        )


if __name__ == "__main__":
    ProofGenSelectResourcesServer.run_webserver()
