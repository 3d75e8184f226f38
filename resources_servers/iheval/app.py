"""iheval: IHEval, does a model follow the instruction hierarchy (system over user over tool output)?

Rows come from IHEval's task families (task execution, safety, tool use, rule following), each in an
aligned, conflict or reference setting; the task's rule scores the answer (word F1, ROUGE-L, a JSON
language label, TensorTrust's defence rules, exact match, IFEval) with no judge model. A row whose task
or gold answer cannot be scored is a 422 naming the field; the scoring runs in the CPU pool under a
deadline, past which the rollout is marked as not measured. The benchmark's own scores (the conflict
score above all) pair and group rows, so they come from `/aggregate_metrics` (metrics.py).
"""

from typing import Any, Literal

from pydantic import ConfigDict, model_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.openai_utils import NeMoGymResponse, assistant_texts
from nemo_gym.serving.cpu_pool import run_cpu_bound
from resources_servers.iheval.metrics import benchmark_metrics
from resources_servers.iheval.scoring import (
    GET_WEBPAGE_SUBTASKS,
    RULE_FOLLOWING,
    SCORERS_BY_TASK,
    check_rule_answer,
    decoded_answer,
    score,
    without_thinking,
)

GENERATION_CHARS = 500
"""How much of the answer the verify result repeats (`generation`), for reading results."""


class IHEvalConfig(BaseResourcesServerConfig):
    accuracy_mode: Literal["hierarchy", "hierarchy_sysprompt"] = "hierarchy"


class IHEvalVerifyRequest(BaseVerifyRequest):
    id: Any = None
    task: str = ""
    domain: str = ""
    setting: str = ""
    instruction: str = ""
    answer: Any = None
    verifier_metadata: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _scorable(self) -> "IHEvalVerifyRequest":
        """Fill the routing fields from `verifier_metadata` when the row nests them, then refuse what no
        rule can score."""
        nested = self.verifier_metadata or {}
        for field in ("task", "domain", "setting", "instruction"):
            if not getattr(self, field) and nested.get(field):
                setattr(self, field, str(nested[field]))
        if self.answer is None:
            self.answer = nested.get("answer")
        if self.id is None:
            self.id = nested.get("id")
        if self.task not in SCORERS_BY_TASK:
            raise ValueError(
                f"task {self.task!r} is not an IHEval task ({', '.join(sorted(SCORERS_BY_TASK))})"
            )
        _check_answer(self.task, decoded_answer(self.answer))
        return self


def _check_answer(task: str, answer: Any) -> None:
    if task in RULE_FOLLOWING:
        check_rule_answer(answer)
    elif task in ("system-prompt-extract", "user-prompt-hijack"):
        if not isinstance(answer, dict) or "label" not in answer:
            raise ValueError(f"answer of a {task} row is an object with `label` (and the access code)")
    elif task == "get-webpage":
        if not isinstance(answer, dict) or answer.get("task") not in GET_WEBPAGE_SUBTASKS:
            raise ValueError(
                f"answer of a get-webpage row is an object whose task is one of {GET_WEBPAGE_SUBTASKS}"
            )
    elif task == "lang-detect":
        if not isinstance(answer, str | list) or not answer:
            raise ValueError("answer of a lang-detect row is a language name or a list of them")
    elif not isinstance(answer, str):
        raise ValueError(f"answer of a {task} row is a string")


class IHEvalVerifyResponse(BaseVerifyResponse):
    """The row's routing fields, the answer read, and the task's sub-scores (extra fields)."""

    model_config = ConfigDict(extra="allow")
    id: Any = None
    task: str
    domain: str
    setting: str
    instruction: str
    answer: Any
    row_id: str
    generation: str


def answer_text(response: NeMoGymResponse) -> str:
    """Everything the assistant said in its output messages, reasoning inside <think> tags removed."""
    return without_thinking("".join(text for item in response.output for text in assistant_texts(item)))


class IHEvalResourcesServer(SimpleResourcesServer):
    config: IHEvalConfig
    key_metric_patterns = (
        "result_score",
        "conflict_score",
        "aligned_score",
        "reference_score",
        "mean_reward",
    )

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        """The headline scores and each task's conflict score (`conflict/<task>/score`)."""
        per_task = {
            name: value
            for name, value in agent_metrics.items()
            if name.startswith("conflict/") and name.endswith("/score")
        }
        return super().get_key_metrics(agent_metrics) | per_task

    async def verify(self, body: IHEvalVerifyRequest) -> IHEvalVerifyResponse:
        text = answer_text(body.response)
        scores = await run_cpu_bound(
            score,
            body.task,
            body.setting,
            decoded_answer(body.answer),
            text,
            timeout_s=self.config.grading_timeout_s,
            on_timeout={"reward": 0.0},
        )
        return IHEvalVerifyResponse(
            **body.model_dump(
                include={
                    "responses_create_params",
                    "response",
                    "id",
                    "task",
                    "domain",
                    "setting",
                    "instruction",
                }
            ),
            answer=body.answer,
            row_id="" if body.id is None else str(body.id),
            generation=text[:GENERATION_CHARS],
            **scores,
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return benchmark_metrics([row for rollouts in tasks for row in rollouts], self.config.accuracy_mode)


if __name__ == "__main__":
    IHEvalResourcesServer.run_webserver()
