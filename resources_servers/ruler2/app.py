"""ruler2: RULER v2 long-context tasks (needles among distractors, QA over many documents, multiple choice).

`eval_type: ruler2` rows list reference strings (`expected_answer`); each scores
max(substring match, 1 − word error rate) against the answer, ignoring case, and the `match_type`
combines them: mean (`all`), mean over the last paragraph (`2steps`), or best once quoted documents are
dropped (`part`). `eval_type: multichoice` rows hold one option letter, read from the answer's last
`\\boxed{}` (or an answer line). The WER is an edit distance whose size the caller sets, so the soft
match runs in the CPU pool with a deadline.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import model_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.envkit.pass_at_k_metrics import PassAtK, pass_at_k_key_metrics
from nemo_gym.serving.cpu_pool import run_cpu_bound
from resources_servers.ruler2.grading import option_letter, parsed_prediction, string_match

SUBSET_KEY = "task"
SUITE_PREFIX = "ruler2_suite_avg/"
# The 12 tasks of the suite; their mean is reported only when a run covers all of them.
RULER2_TASKS = tuple(
    f"{family}_{level}"
    for family in ("mk_niah", "mv_niah", "qa")
    for level in ("basic", "easy", "medium", "hard")
)


class Ruler2Config(BaseResourcesServerConfig):
    """Only base settings: `grading_timeout_s` bounds one soft-match grading (past it: masked)."""


class Ruler2VerifyRequest(BaseVerifyRequest):
    expected_answer: list[str] | str
    eval_type: Literal["ruler2", "multichoice"] = "ruler2"
    match_type: Literal["all", "part", "2steps"] = "all"
    task: str | None = None
    length: int | None = None

    @model_validator(mode="after")
    def _gradable_expected_answer(self) -> Ruler2VerifyRequest:
        if self.eval_type == "ruler2" and self.expected_answer == []:
            raise ValueError("expected_answer: a ruler2 row needs at least one reference string")
        if self.eval_type == "multichoice" and isinstance(self.expected_answer, list):
            if len(self.expected_answer) != 1:
                raise ValueError("expected_answer: a multichoice row holds one option letter")
        return self

    def references(self) -> list[str]:
        return [self.expected_answer] if isinstance(self.expected_answer, str) else self.expected_answer

    def gold_letter(self) -> str:
        return self.references()[0].strip().upper()


class Ruler2VerifyResponse(Ruler2VerifyRequest, BaseVerifyResponse):
    predicted_answer: str
    extracted_answer: str | None


def suite_means(metrics: dict[str, Any]) -> dict[str, float]:
    """`ruler2_suite_avg/<metric>`: the plain mean over the 12 tasks of each per-task metric, for the
    metrics every one of the 12 tasks has."""
    by_metric: dict[str, dict[str, float]] = {}
    for name, value in metrics.items():
        task, _, metric = name.partition("/")
        if task in RULER2_TASKS and metric and isinstance(value, (int, float)):
            by_metric.setdefault(metric, {})[task] = value
    return {
        SUITE_PREFIX + metric: sum(values.values()) / len(RULER2_TASKS)
        for metric, values in by_metric.items()
        if len(values) == len(RULER2_TASKS)
    }


class Ruler2ResourcesServer(SimpleResourcesServer):
    config: Ruler2Config
    # pass@k with accuracy = reward, overall and per task (`qa_easy/pass@1/accuracy`, ...). The soft
    # match is continuous, so pass@k is the best of the first k unless every score is 0 or 1.
    pass_at_k = PassAtK(subset_key=SUBSET_KEY)

    async def verify(self, body: Ruler2VerifyRequest) -> Ruler2VerifyResponse:
        """reward = the soft match combined by match type, or 1.0/0.0 for the option letter."""
        text = body.response.output_text
        extracted = None
        if body.eval_type == "multichoice":
            extracted = option_letter(text)
            reward = 1.0 if extracted is not None and extracted == body.gold_letter() else 0.0
        else:
            reward = await run_cpu_bound(
                string_match,
                body.match_type,
                text,
                body.references(),
                timeout_s=self.config.grading_timeout_s,
                on_timeout=0.0,
            )
        return Ruler2VerifyResponse(
            **body.model_dump(),
            reward=reward,
            predicted_answer=parsed_prediction(text),
            extracted_answer=extracted,
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        metrics = super().compute_metrics(tasks)
        return {**metrics, **suite_means(metrics)}

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        key = pass_at_k_key_metrics(agent_metrics, best_of=("pass@{k}",))
        key.update({name: value for name, value in agent_metrics.items() if name.startswith(SUITE_PREFIX)})
        return key


if __name__ == "__main__":
    Ruler2ResourcesServer.run_webserver()
