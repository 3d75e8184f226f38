"""graphwalks: OpenAI's GraphWalks long-context graph tasks, rewarded by the F1 of the node sets.

A row gives a directed graph as an edge list and asks for the parents of a node or the nodes at exactly
some BFS depth; `expected_answer` is the JSON list of the right nodes. The model must end with a line
`Final Answer: [a, b, ...]`; without it the answer is a parse failure worth 0. Reading the answer is
linear in the text (grading.py), so it runs inline.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import field_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.envkit.pass_at_k_metrics import PassAtK, pass_at_k_key_metrics
from resources_servers.graphwalks.grading import f1_score, parse_final_answer

SUBSET_KEY = "problem_type"


def expected_nodes(expected_answer: str) -> set[str]:
    """The node set a row's `expected_answer` (a JSON list of node names) holds."""
    try:
        nodes = json.loads(expected_answer)
    except (ValueError, RecursionError):
        nodes = None
    if not isinstance(nodes, list) or not all(isinstance(node, str) for node in nodes):
        raise ValueError('expected_answer must be a JSON list of node names, e.g. \'["a1", "b2"]\'')
    return set(nodes)


class GraphWalksVerifyRequest(BaseVerifyRequest):
    expected_answer: str
    problem_type: str
    n_tokens: int | None = None
    prompt_chars: int | None = None

    @field_validator("expected_answer")
    @classmethod
    def _a_json_list_of_nodes(cls, expected_answer: str) -> str:
        expected_nodes(expected_answer)
        return expected_answer


class GraphWalksVerifyResponse(GraphWalksVerifyRequest, BaseVerifyResponse):
    f1: float
    parse_failed: bool
    predicted_nodes: list[str]


class GraphWalksResourcesServer(SimpleResourcesServer):
    config: BaseResourcesServerConfig
    # pass@k over all tasks and per problem type (`problem_type=bfs/pass@1/accuracy`, ...). F1 is
    # continuous, so pass@k is the best of the first k unless every score is 0 or 1.
    pass_at_k = PassAtK(subset_key=SUBSET_KEY, key_in_prefix=True)

    async def verify(self, body: GraphWalksVerifyRequest) -> GraphWalksVerifyResponse:
        """reward = f1 of the predicted and expected node sets; 0 when the answer line cannot be read."""
        predicted = parse_final_answer(body.response.output_text)
        f1 = 0.0 if predicted is None else f1_score(set(predicted), expected_nodes(body.expected_answer))
        return GraphWalksVerifyResponse(
            **body.model_dump(),
            reward=f1,
            f1=f1,
            parse_failed=predicted is None,
            predicted_nodes=predicted or [],
        )

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        return pass_at_k_key_metrics(agent_metrics)


if __name__ == "__main__":
    GraphWalksResourcesServer.run_webserver()
