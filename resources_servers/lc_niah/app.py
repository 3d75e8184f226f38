"""lc_niah: long-context graph needles (GraphWalks-style), rewarded for the right nodes found without
copying the prompt into the reasoning.

`answer_score` is the F1 of the `Final Answer: [...]` node list against `expected_answer`. The model's
reasoning (the summaries of its reasoning items) is compared with the input text by one overlap signal
(`overlap_metric_rule`: difflib ratio, shared 16-gram share, or longest common stretch), and
`overlap_grading_rule` combines the two: the answer score alone, scaled by 1 − overlap (default), or
less the overlap. The overlap compares against the whole long prompt, so it runs in the CPU pool with a
deadline; an overlap past it is masked.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.serving.cpu_pool import run_cpu_bound
from resources_servers.lc_niah.grading import combined_reward, node_f1, parse_node_list, reasoning_overlap

OverlapMetricRule = Literal["seq_match", "ngram16", "lcs"]
OverlapGradingRule = Literal["base", "multiply", "minus"]


class LCNIAHConfig(BaseResourcesServerConfig):
    overlap_metric_rule: OverlapMetricRule = Field(
        default="ngram16", description="which overlap of reasoning and input becomes reasoning_overlap"
    )
    overlap_grading_rule: OverlapGradingRule = Field(
        default="multiply", description="how answer_score and reasoning_overlap combine into the reward"
    )


def expected_nodes(expected_answer: str) -> set[str]:
    """The node set of a row's `expected_answer`, a JSON list of node names."""
    try:
        nodes = json.loads(expected_answer)
    except (ValueError, RecursionError):
        nodes = None
    if not isinstance(nodes, list) or not all(isinstance(node, str) for node in nodes):
        raise ValueError('expected_answer must be a JSON list of node names, e.g. \'["a1", "b2"]\'')
    return set(nodes)


class LCNIAHVerifyRequest(BaseVerifyRequest):
    """Extra task fields (`question`, `source`, ...) are allowed and echoed, as NeMo Gym's rows carry them."""

    model_config = ConfigDict(extra="allow")

    expected_answer: str
    n_tokens: int | None = None
    problem_type: str | None = None
    question: str | None = None
    source: str | None = None

    @field_validator("expected_answer")
    @classmethod
    def _a_json_list_of_nodes(cls, expected_answer: str) -> str:
        expected_nodes(expected_answer)
        return expected_answer


class LCNIAHVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    answer_score: float
    reasoning_overlap: float


def reasoning_text(body: LCNIAHVerifyRequest) -> str:
    """The summary texts of every reasoning item of the response, joined."""
    return "".join(
        part.text for item in body.response.output if item.type == "reasoning" for part in item.summary
    )


def _text_of(part: Any) -> str:
    text = part.get("text") if isinstance(part, dict) else getattr(part, "text", None)
    return text if isinstance(text, str) else ""


def input_text(body: LCNIAHVerifyRequest) -> str:
    """The text of the prompt: a plain-string input, or every message's string content or text parts,
    one message or part per line."""
    raw = body.responses_create_params.input
    if isinstance(raw, str):
        return raw
    pieces: list[str] = []
    for item in raw:
        content = item.get("content") if isinstance(item, dict) else getattr(item, "content", None)
        if isinstance(content, str):
            pieces.append(content)
        elif isinstance(content, list):
            pieces.extend(text for part in content if (text := _text_of(part)))
    return "\n".join(pieces)


def echoed_row(body: LCNIAHVerifyRequest) -> dict[str, Any]:
    """The row as the answer repeats it, less what the answer sets itself (a recorded rollout posted
    again carries its old scores) and the run's `_ng_` bookkeeping."""
    own = set(LCNIAHVerifyResponse.model_fields) - set(LCNIAHVerifyRequest.model_fields)
    return {
        key: value
        for key, value in body.model_dump().items()
        if key not in own and not key.startswith("_ng_")
    }


class LCNIAHResourcesServer(SimpleResourcesServer):
    config: LCNIAHConfig

    async def verify(self, body: LCNIAHVerifyRequest) -> LCNIAHVerifyResponse:
        """reward = the grading rule applied to answer_score (node F1, 0 when unreadable) and the overlap."""
        predicted = parse_node_list(body.response.output_text)
        answer_score = (
            0.0 if predicted is None else node_f1(set(predicted), expected_nodes(body.expected_answer))
        )
        overlap = await run_cpu_bound(
            reasoning_overlap,
            self.config.overlap_metric_rule,
            reasoning_text(body),
            input_text(body),
            timeout_s=self.config.grading_timeout_s,
            on_timeout=None,
        )
        if overlap is None:
            return LCNIAHVerifyResponse(
                **echoed_row(body), reward=0.0, answer_score=answer_score, reasoning_overlap=0.0
            )
        reward = combined_reward(self.config.overlap_grading_rule, answer_score, overlap)
        return LCNIAHVerifyResponse(
            **echoed_row(body), reward=reward, answer_score=answer_score, reasoning_overlap=overlap
        )


if __name__ == "__main__":
    LCNIAHResourcesServer.run_webserver()
