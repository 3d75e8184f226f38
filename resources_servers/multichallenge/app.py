"""multichallenge: the last turn of a multi-turn conversation graded against a rubric of yes/no questions.

Each rubric item is one judge call: the conversation, the model's final answer (thinking removed), the
item's question and the answer that passes (`pass_criteria`, YES or NO). The judge ends with the YES or NO
label; an item passes when its verdict equals `pass_criteria`. The item scores make the reward by
`aggregation_mode` (default: the mean, i.e. the fraction of items passed). An item whose verdict cannot be
had (a judge failure, or an answer without a label) leaves the reward not computable: the answer carries
`judge_failure` (and `judge_failure_reward`), and every item's own record says which one lacks a verdict.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from nemo_gym.base_resources_server import (
    BaseVerifyRequest,
    BaseVerifyResponse,
)
from nemo_gym.envkit.judged_env import JudgedEnvConfig, JudgedResourcesServer
from nemo_gym.judge import (
    JudgeEvaluation,
    JudgeFailure,
)
from resources_servers.multichallenge.rubric_grading import (
    AggregationMode,
    ItemCall,
    ItemVerdict,
    answer_text,
    judge_rubric,
    last_line_word,
    metadata_axis,
    rubric_grade,
    rubric_metrics,
    rubric_or_metadata,
    transcript,
)

PLACEHOLDERS = {"context": "", "response": "", "question": "", "pass_criteria": ""}


class MultiChallengeConfig(JudgedEnvConfig):
    aggregation_mode: AggregationMode = AggregationMode.MEAN
    parallel_evaluation: bool = True
    # Placeholders {context}, {response}, {question}, {pass_criteria}; literal braces doubled.
    judge_prompt_template: str
    judge_system_message: str | None = None
    yes_label: str = Field(default="[[YES]]", min_length=1)
    no_label: str = Field(default="[[NO]]", min_length=1)

    @field_validator("judge_prompt_template")
    @classmethod
    def _fills(cls, template: str) -> str:
        try:
            template.format(**PLACEHOLDERS)
        except (KeyError, IndexError, ValueError) as error:
            raise ValueError(
                "judge_prompt_template may use only {context}, {response}, {question} and {pass_criteria} "
                f"(literal braces doubled): {error!r}"
            ) from None
        return template


class RubricItem(BaseModel):
    model_config = ConfigDict(extra="allow")

    question: str = Field(min_length=1)
    pass_criteria: str = "YES"
    weight: float = Field(default=1.0, ge=0, allow_inf_nan=False)


class MultiChallengeVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")

    uuid: str | int | None = None
    task_id: int | str | None = None
    rubric: list[RubricItem] = []
    context: str | None = None
    metadata: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _has_a_rubric(self) -> MultiChallengeVerifyRequest:
        self.rubric = rubric_or_metadata(self.rubric, self.metadata, RubricItem, "rubric item")
        return self


class RubricEvaluation(ItemVerdict):
    question: str
    pass_criteria: str
    weight: float


class MultiChallengeVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    context: str
    generated_response: str
    rubric_evaluations: list[RubricEvaluation]
    aggregation_mode: str
    num_passed: int
    num_total: int
    judge_evaluations: list[JudgeEvaluation] = []
    judge_failure: JudgeFailure | None = None


GRADING_FIELDS = (set(MultiChallengeVerifyResponse.model_fields) - set(BaseVerifyRequest.model_fields)) | {
    "reward",
    "rubric",
}


def read_labels(text: str, yes_label: str, no_label: str) -> str | None:
    """YES or NO: the label written last, else a last line that is just the word; None otherwise."""
    yes_at, no_at = text.rfind(yes_label), text.rfind(no_label)
    if yes_at >= 0 or no_at >= 0:
        return "YES" if yes_at > no_at else "NO"
    return last_line_word(text, ("YES", "NO"))


def item_score(verdict: str, pass_criteria: str) -> float:
    """1.0 when the verdict is the passing answer (a criterion other than YES/NO passes on YES)."""
    wanted = pass_criteria.strip().upper()
    return float(verdict == (wanted if wanted in ("YES", "NO") else "YES"))


class MultiChallengeServer(JudgedResourcesServer):
    config: MultiChallengeConfig

    def item_call(self, item: RubricItem, context: str, answer: str) -> ItemCall:
        cfg = self.config
        prompt = cfg.judge_prompt_template.format(
            context=context, response=answer, question=item.question, pass_criteria=item.pass_criteria
        )
        params = self._judge.params_for(prompt, cfg.judge_system_message)

        def read(text: str) -> tuple[str, float] | None:
            verdict = read_labels(text, cfg.yes_label, cfg.no_label)
            return None if verdict is None else (verdict, item_score(verdict, item.pass_criteria))

        return ItemCall(params, read, f"{cfg.yes_label} or {cfg.no_label}")

    async def verify(self, body: MultiChallengeVerifyRequest) -> MultiChallengeVerifyResponse:
        """One judge call per rubric item; reward = the aggregate of the item scores, when all have one."""
        answer = answer_text(body.response)
        context = body.context or transcript(body.responses_create_params.input or [])
        calls = [self.item_call(item, context, answer) for item in body.rubric]
        result = await judge_rubric(self._judge, calls, self.config.parallel_evaluation)
        items = [
            RubricEvaluation(
                **verdict.model_dump(),
                question=item.question,
                pass_criteria=item.pass_criteria,
                weight=item.weight,
            )
            for item, verdict in zip(body.rubric, result.items, strict=True)
        ]
        weights = [item.weight for item in body.rubric]
        cfg = self.config
        return MultiChallengeVerifyResponse(
            **body.model_dump(exclude=GRADING_FIELDS),
            rubric=[item.model_dump(exclude_unset=True) for item in body.rubric],  # as the row gave it
            context=context,
            generated_response=answer,
            rubric_evaluations=items,
            **rubric_grade(result, weights, cfg.aggregation_mode, cfg.judge_failure_reward),
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """Overall and per challenge axis (`metadata.challenge`), plus the judge failures."""
        return rubric_metrics(tasks, metadata_axis("challenge"))


if __name__ == "__main__":
    MultiChallengeServer.run_webserver()
