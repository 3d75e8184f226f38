"""inverse_if: counter-intuitive instructions (deliberate errors, odd formats, flawed premises) graded per
rubric criterion by an LLM judge with the task's own judge prompt.

Each criterion is one judge call: the task's `judge_prompt_template` (else the config's default) filled with
the prompt, the model's answer (thinking removed), the reference response and the criterion, under the
task's `judge_system_prompt` (else the default). The judge answers with JSON `{"result": "PASS"|"FAIL",
"explanation": ...}`. Criterion scores (1/0) make the reward by `aggregation_mode` (default: the mean). The
calls, the per-item records and the not-computable rule come from multichallenge's `rubric_grading`: a
criterion without a verdict leaves the reward not computable, marked by `judge_failure`.
"""

from __future__ import annotations

import json
import re
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
)

PLACEHOLDERS = {"prompt": "", "model_response": "", "standard_response": "", "criteria": ""}
FENCED_JSON = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)
RESULT_OBJECT = re.compile(r"\{[^{}]*\"result\"[^{}]*\}", re.IGNORECASE)


def check_template(template: str | None) -> str | None:
    if template is not None:
        try:
            template.format(**PLACEHOLDERS)
        except (KeyError, IndexError, ValueError) as error:
            raise ValueError(
                "the judge prompt template may use only {prompt}, {model_response}, {standard_response} and "
                f"{{criteria}} (literal braces doubled): {error!r}"
            ) from None
    return template


class InverseIFConfig(JudgedEnvConfig):
    aggregation_mode: AggregationMode = AggregationMode.MEAN
    parallel_evaluation: bool = True
    # Used for tasks without their own judge prompt / system prompt.
    default_judge_prompt_template: str
    default_judge_system_prompt: str

    @field_validator("default_judge_prompt_template")
    @classmethod
    def _fills(cls, template: str) -> str | None:
        return check_template(template)


class Criterion(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str | int | None = None
    criteria: str = Field(min_length=1)


class InverseIFVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")

    uuid: str | int | None = None
    task_id: int | str | None = None
    prompt: str | None = None
    rubric: list[Criterion] = []
    reference_response: str | None = None
    judge_prompt_template: str | None = None
    judge_system_prompt: str | None = None
    metadata: dict[str, Any] | None = None

    @field_validator("judge_prompt_template")
    @classmethod
    def _fills(cls, template: str | None) -> str | None:
        return check_template(template)

    @model_validator(mode="after")
    def _has_a_rubric(self) -> InverseIFVerifyRequest:
        self.rubric = rubric_or_metadata(self.rubric, self.metadata, Criterion, "criterion")
        return self


class RubricEvaluation(ItemVerdict):
    criterion_id: str | int | None
    criteria: str
    explanation: str | None = None


class InverseIFVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    generated_response: str
    rubric_evaluations: list[RubricEvaluation]
    aggregation_mode: str
    num_passed: int
    num_total: int
    judge_evaluations: list[JudgeEvaluation] = []
    judge_failure: JudgeFailure | None = None


GRADING_FIELDS = (set(InverseIFVerifyResponse.model_fields) - set(BaseVerifyRequest.model_fields)) | {
    "reward",
    "rubric",
}


def read_result(text: str) -> tuple[str, str | None] | None:
    """(PASS or FAIL, explanation) from the judge's JSON (fenced or bare, the last one counts), else from a
    last line that is just the word; None when neither is there."""
    candidates = [*FENCED_JSON.findall(text), *(m.group(0) for m in RESULT_OBJECT.finditer(text))]
    for candidate in reversed(candidates):
        try:
            parsed = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        result = parsed.get("result") if isinstance(parsed, dict) else None
        if isinstance(result, str) and result.strip().upper() in ("PASS", "FAIL"):
            explanation = parsed.get("explanation")
            return result.strip().upper(), explanation if isinstance(explanation, str) else None
    word = last_line_word(text, ("PASS", "FAIL"))
    return None if word is None else (word, None)


class InverseIFServer(JudgedResourcesServer):
    config: InverseIFConfig

    def item_call(self, body: InverseIFVerifyRequest, criterion: Criterion, answer: str) -> ItemCall:
        template = body.judge_prompt_template or self.config.default_judge_prompt_template
        system = body.judge_system_prompt or self.config.default_judge_system_prompt
        prompt = template.format(
            prompt=body.prompt or "",
            model_response=answer,
            standard_response=body.reference_response or "",
            criteria=criterion.criteria,
        )
        params = self._judge.params_for(
            [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
        )

        def read(text: str) -> tuple[str, float] | None:
            found = read_result(text)
            return None if found is None else (found[0], float(found[0] == "PASS"))

        return ItemCall(params, read, 'JSON {"result": "PASS" or "FAIL"}')

    async def verify(self, body: InverseIFVerifyRequest) -> InverseIFVerifyResponse:
        """One judge call per criterion; reward = the aggregate of the criterion scores, when all have one."""
        answer = answer_text(body.response)
        calls = [self.item_call(body, criterion, answer) for criterion in body.rubric]
        result = await judge_rubric(self._judge, calls, self.config.parallel_evaluation)
        items = []
        for criterion, verdict in zip(body.rubric, result.items, strict=True):
            explanation = read_result(verdict.judge_output)[1] if verdict.judge_output is not None else None
            items.append(
                RubricEvaluation(
                    **verdict.model_dump(),
                    criterion_id=criterion.id,
                    criteria=criterion.criteria,
                    explanation=explanation,
                )
            )
        cfg = self.config
        return InverseIFVerifyResponse(
            **body.model_dump(exclude=GRADING_FIELDS),
            rubric=[criterion.model_dump(exclude_unset=True) for criterion in body.rubric],
            generated_response=answer,
            rubric_evaluations=items,
            **rubric_grade(result, [1.0] * len(items), cfg.aggregation_mode, cfg.judge_failure_reward),
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """Overall and per taxonomy axis (`metadata.l1_taxonomy`), plus the judge failures."""
        return rubric_metrics(tasks, metadata_axis("l1_taxonomy"))


if __name__ == "__main__":
    InverseIFServer.run_webserver()
