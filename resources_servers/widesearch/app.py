"""widesearch: broad information-gathering tasks answered with a Markdown table, graded cell by cell.

The policy's table is read (the first ```markdown block, else the last run of `| ... |` lines), its column
names normalized and, when they differ from the required ones, mapped onto them by the judge. Rows are
matched to the gold rows by the key (`unique_columns`) values, which the judge also maps onto the gold
spellings when the column is compared by exact match or by judge. Each other cell of a matched row is
scored by its column's rules (`exact_match`, `number_near`, `date_near`, `url_match`, after `norm_str` /
`extract_number` / `norm_date`) or by the judge (`llm_judge`, one call per column for all matched rows).
Row- and item-level precision, recall and F1 follow; the reward (`score`) is 1 only for a perfect table.
No table, or a table that cannot be read or lacks the required columns, scores 0 with the reason in
`evaluation_message`; a judge answer that cannot be read, or a judgment that fails, is `judge_failure`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, PrivateAttr, model_validator

from nemo_gym.base_resources_server import (
    BaseVerifyRequest,
    BaseVerifyResponse,
)
from nemo_gym.envkit.judged_env import (
    JudgedEnvConfig,
    JudgedResourcesServer,
    unusable_unless,
)
from nemo_gym.judge import (
    JudgeEvaluation,
    JudgeFailed,
    JudgeFailure,
    last_assistant_text,
)
from nemo_gym.openai_utils import NeMoGymResponse
from nemo_gym.prompt import PromptConfig, fill_prompt, load_judge_prompt_file
from resources_servers.widesearch.widesearch_grading import (
    ZERO,
    TableScores,
    UnparsableTable,
    extract_table,
    judge_json,
    norm_column,
    parse_date,
    preprocess,
    rule_score,
    table_scores,
    widesearch_metrics,
)

FOLDER = Path(__file__).resolve().parent
ALIGNMENT_PLACEHOLDERS = ("response", "reference")
COLUMN_PLACEHOLDERS = ("criterion", "response")


class WideSearchConfig(JudgedEnvConfig):
    # YAML files with a `user` (and optionally `system`) template; point them at the official prompts.
    judge_alignment_prompt_path: str = "prompts/alignment.yaml"
    judge_column_prompt_path: str = "prompts/column_judge.yaml"


class ColumnPipeline(BaseModel):
    model_config = ConfigDict(extra="allow")

    preprocess: list[Literal["norm_str", "extract_number", "norm_date"]] = []
    metric: list[Literal["exact_match", "url_match", "number_near", "date_near", "llm_judge"]] = []
    criterion: Any = None


class Evaluation(BaseModel):
    model_config = ConfigDict(extra="allow")

    required: list[str]
    unique_columns: list[str]
    eval_pipeline: dict[str, ColumnPipeline]

    @model_validator(mode="after")
    def _columns_agree(self) -> Evaluation:
        if not self.required or not self.unique_columns:
            raise ValueError("`required` and `unique_columns` must name columns")
        if stray := [column for column in self.unique_columns if column not in self.required]:
            raise ValueError(f"`unique_columns` {stray} are not in `required`")
        keys = set(self.unique_columns)
        if missing := [c for c in self.required if c not in keys and c not in self.eval_pipeline]:
            raise ValueError(f"`eval_pipeline` has no entry for the scored columns {missing}")
        return self


class WideSearchVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")

    instance_id: str
    query: str
    evaluation: Evaluation
    gold_answer: list[dict[str, Any]]
    language: str


class WideSearchVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    score: float = 0.0
    precision_by_row: float = 0.0
    recall_by_row: float = 0.0
    f1_by_row: float = 0.0
    precision_by_item: float = 0.0
    recall_by_item: float = 0.0
    f1_by_item: float = 0.0
    evaluation_message: str = ""
    judge_evaluations: list[JudgeEvaluation] = []
    judge_failure: JudgeFailure | None = None


GRADING_FIELDS = set(WideSearchVerifyResponse.model_fields) - set(BaseVerifyRequest.model_fields)


not_json = unusable_unless(judge_json, "has no JSON object")


class Grading:
    """One verify's judge calls, recorded in order (a replay plays them back)."""

    def __init__(self, server: WideSearchResourcesServer) -> None:
        self.server = server
        self.evaluations: list[JudgeEvaluation] = []

    async def ask(self, prompt: PromptConfig, fields: dict[str, str], check: Any) -> dict[str, Any]:
        judge = self.server._judge
        judgment = await judge.ask(fill_prompt(prompt, fields), judge_json, unusable=check)
        self.evaluations.append(judgment.evaluation)
        return judgment.verdict or {}

    async def align(self, values: list[str], references: list[str]) -> dict[str, str]:
        """The judge's mapping of the policy's spellings onto the reference ones (no call when every value
        already is one)."""
        if not values or not references or set(values) <= set(references):
            return {}
        fields = {
            "response": json.dumps(values, ensure_ascii=False),
            "reference": json.dumps(references, ensure_ascii=False),
        }
        mapping = await self.ask(self.server._alignment_prompt, fields, not_json)
        return {str(key): str(value) for key, value in mapping.items() if isinstance(value, str)}

    async def judge_cells(self, pairs: list[tuple[str, str]], criterion: str) -> list[float]:
        """One call for a column: {"idx_<i>": 1 or 0} for every (response, target) pair."""
        keys = [f"idx_{index}" for index in range(len(pairs))]
        cells = {key: {"response": got, "target": want} for key, (got, want) in zip(keys, pairs, strict=True)}

        def incomplete(response: NeMoGymResponse) -> str | None:
            if problem := not_json(response):
                return problem
            decisions = judge_json(last_assistant_text(response)) or {}
            if missing := [key for key in keys if decisions.get(key) not in (0, 1)]:
                return f"the judge gave no 0/1 decision for {missing[:5]}"
            return None

        fields = {"criterion": criterion, "response": json.dumps(cells, ensure_ascii=False)}
        decisions = await self.ask(self.server._column_prompt, fields, incomplete)
        return [float(decisions[key] == 1) for key in keys]


class WideSearchResourcesServer(JudgedResourcesServer):
    config: WideSearchConfig
    _alignment_prompt: PromptConfig = PrivateAttr()
    _column_prompt: PromptConfig = PrivateAttr()

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        config = self.config
        self._alignment_prompt = load_judge_prompt_file(
            FOLDER, config.judge_alignment_prompt_path, ALIGNMENT_PLACEHOLDERS
        )
        self._column_prompt = load_judge_prompt_file(
            FOLDER, config.judge_column_prompt_path, COLUMN_PLACEHOLDERS
        )
        parse_date("2020-01-01")  # loads dateparser's language data now, not in the first verify
        return app

    async def verify(self, body: WideSearchVerifyRequest) -> WideSearchVerifyResponse:
        """reward = 1.0 for a table whose row and item precision, recall and F1 are all 1, else 0.0."""
        graded = body.model_dump(exclude=GRADING_FIELDS | {"reward"})
        grading = Grading(self)
        try:
            scores, message = await self._grade(body, grading)
        except JudgeFailed as failed:
            return WideSearchVerifyResponse(
                **graded,
                **self._judge.failure_fields(failed),
                evaluation_message="the judgment failed",
                judge_evaluations=grading.evaluations,
            )
        return WideSearchVerifyResponse(
            **graded,
            reward=scores.score,
            **vars(scores),
            evaluation_message=message,
            judge_evaluations=grading.evaluations,
        )

    async def _grade(self, body: WideSearchVerifyRequest, grading: Grading) -> tuple[TableScores, str]:
        evaluation = body.evaluation
        required, keys = evaluation.required, evaluation.unique_columns
        try:
            extracted = extract_table(body.response.output_text)
        except UnparsableTable as problem:
            return ZERO, f"the response's table cannot be read: {problem}"
        if extracted is None:
            return ZERO, "the response contains no Markdown table"
        columns, table = extracted
        if set(columns) != set(required):
            renames = await grading.align(columns, required)
            columns = [renames.get(column, column) for column in columns]
            table = [{renames.get(name, name): value for name, value in row.items()} for row in table]
        if set(columns) != set(required) or len(set(columns)) != len(columns):
            return ZERO, f"the table's columns {columns} are not the required {required}"
        gold = [
            {norm_column(str(name)): str(value) for name, value in row.items()} for row in body.gold_answer
        ]
        if missing := [column for column in required if any(column not in row for row in gold)]:
            return ZERO, f"the gold answer lacks the required columns {missing}"
        predicted = [{column: row[column] for column in required} for row in table]
        gold = [{column: row[column] for column in required} for row in gold]

        for column in keys:
            pipeline = evaluation.eval_pipeline.get(column)
            if pipeline and {"exact_match", "llm_judge"} & set(pipeline.metric):
                mapping = await grading.align([r[column] for r in predicted], [r[column] for r in gold])
                for row in predicted:
                    row[column] = mapping.get(row[column], row[column])
        for column, pipeline in evaluation.eval_pipeline.items():
            if column not in required:
                continue
            for step in pipeline.preprocess:
                for row in (*predicted, *gold):
                    row[column] = preprocess(row[column], step)

        predicted_rows, gold_rows = first_per_key(predicted, keys), first_per_key(gold, keys)
        matched = [key for key in gold_rows if key in predicted_rows]
        cells = {key: dict.fromkeys(keys, 1.0) for key in matched}
        for column in [column for column in required if column not in keys]:
            pipeline = evaluation.eval_pipeline[column]
            pairs = [(predicted_rows[key][column], gold_rows[key][column]) for key in matched]
            column_scores = [1.0] * len(pairs)
            for metric in pipeline.metric:
                if metric == "llm_judge":
                    metric_scores = (
                        await grading.judge_cells(pairs, str(pipeline.criterion or "")) if pairs else []
                    )
                else:
                    metric_scores = [rule_score(got, want, metric, pipeline.criterion) for got, want in pairs]
                column_scores = [min(a, b) for a, b in zip(column_scores, metric_scores, strict=True)]
            for key, value in zip(matched, column_scores, strict=True):
                cells[key][column] = value
        scores = table_scores(
            [list(row.values()) for row in cells.values()], len(predicted_rows), len(gold_rows), len(required)
        )
        message = (
            "every row and item matches"
            if scores.score == 1.0
            else "the table is incomplete or has mismatches"
        )
        return scores, message

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return widesearch_metrics(tasks)


def first_per_key(rows: list[dict[str, str]], keys: list[str]) -> dict[tuple[str, ...], dict[str, str]]:
    """The rows by their key values, the first of any duplicates kept."""
    by_key: dict[tuple[str, ...], dict[str, str]] = {}
    for row in rows:
        by_key.setdefault(tuple(row[column] for column in keys), row)
    return by_key


if __name__ == "__main__":
    WideSearchResourcesServer.run_webserver()
