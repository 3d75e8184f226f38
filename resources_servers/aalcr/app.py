"""aalcr: AA-LCR long-context reasoning questions, graded CORRECT/INCORRECT by an LLM judge.

Each task hands the policy a set of long documents and a question that needs reasoning across them. The
judge decides whether the candidate answer agrees with the official answer: CORRECT earns 1.0, INCORRECT
0.0. Two judge protocols exist, one per AA-LCR release (`judge_protocol`): `legacy_v1_0` (a one-word
verdict) and `official_v1_1` (a system prompt with grading notes and a JSON verdict); a row prepared for
the other release is refused. The reward is mirrored into the field of the row's context-length band
(`reward_lt_80k` ... `reward_128k_plus`). An empty answer earns 0.0 without a judge call
(`invalid_model_response`); a judgment that fails, or a verdict that cannot be read, is reported in
`judge_failure`, never scored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException
from pydantic import ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from nemo_gym.base_resources_server import (
    BaseVerifyRequest,
    BaseVerifyResponse,
)
from nemo_gym.envkit.judged_env import JudgedEnvConfig, JudgedResourcesServer
from nemo_gym.judge import (
    JudgeEvaluation,
    JudgeFailed,
    JudgeFailure,
    last_assistant_text,
)
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from resources_servers.aalcr.aalcr_grading import (
    BAND_FIELDS,
    DEFAULT_PROMPTS,
    PROTOCOL_DATASETS,
    VERDICTS,
    Band,
    JudgeProtocol,
    Verdict,
    aalcr_metrics,
    load_prompts,
    parse_verdict,
)

FOLDER = Path(__file__).resolve().parent


class AalcrConfig(JudgedEnvConfig):
    judge_protocol: JudgeProtocol = "legacy_v1_0"
    # NeMo Gym's key: request fields laid over `judge_responses_create_params` (not `input`).
    judge_responses_create_params_overrides: dict[str, Any] = {}
    # A YAML file with `user` (and optionally `system`) prompts; null = the shipped one of the protocol.
    judge_prompt_path: str | None = None

    @field_validator("judge_responses_create_params_overrides")
    @classmethod
    def _overrides_are_request_fields(cls, value: dict[str, Any]) -> dict[str, Any]:
        if "input" in value:
            raise ValueError("must not set `input`: the judge prompt is built from the row")
        try:
            NeMoGymResponseCreateParamsNonStreaming.model_validate({**value, "input": []})
        except ValidationError as error:
            raise ValueError(f"not valid Responses API request fields: {error}") from None
        return value


class AalcrVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")

    document_category: str
    document_set_id: str
    question_id: int
    question: str
    answer: str
    data_source_filenames: str
    data_source_urls: str
    input_tokens: int
    input_tokens_band: Band
    aa_lcr_version: str = PROTOCOL_DATASETS["legacy_v1_0"][0]
    aa_lcr_dataset_revision: str = Field(
        default=PROTOCOL_DATASETS["legacy_v1_0"][1], pattern=r"^[0-9a-f]{40}$"
    )
    aa_lcr_judge_protocol: JudgeProtocol = "legacy_v1_0"


class AalcrVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    extracted_answer: str | None = None
    verdict: Verdict | None = None
    judge_output: str | None = None
    judge_evaluations: list[JudgeEvaluation] = []
    invalid_model_response: bool = False
    invalid_judge_response: bool | None = None
    reward_lt_80k: float | None = None
    reward_80k_100k: float | None = None
    reward_100k_110k: float | None = None
    reward_110k_128k: float | None = None
    reward_128k_plus: float | None = None
    judge_failure: JudgeFailure | None = None


GRADING_FIELDS = set(AalcrVerifyResponse.model_fields) - set(BaseVerifyRequest.model_fields)


class AalcrResourcesServer(JudgedResourcesServer):
    config: AalcrConfig
    _system: str | None = PrivateAttr()
    _user: str = PrivateAttr()

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        path = self.config.judge_prompt_path or DEFAULT_PROMPTS[self.config.judge_protocol]
        self._system, self._user = load_prompts(FOLDER, path)
        return app

    def _unreadable(self, response: NeMoGymResponse) -> str | None:
        verdict = parse_verdict(last_assistant_text(response), self.config.judge_protocol)
        return None if verdict in VERDICTS else verdict

    def _judge_params(
        self, body: AalcrVerifyRequest, candidate: str
    ) -> NeMoGymResponseCreateParamsNonStreaming:
        values = {"question": body.question, "official_answer": body.answer, "candidate_answer": candidate}
        messages = [{"role": "user", "content": self._user.format(**values)}]
        if self._system is not None:
            messages.insert(0, {"role": "system", "content": self._system.format(**values)})
        params = self._judge.params_for(messages).model_dump(mode="json", exclude_unset=True)
        overrides = self.config.judge_responses_create_params_overrides
        return NeMoGymResponseCreateParamsNonStreaming.model_validate({**params, **overrides})

    def _check_protocol(self, body: AalcrVerifyRequest) -> None:
        protocol = self.config.judge_protocol
        expected = PROTOCOL_DATASETS[protocol]
        row = (body.aa_lcr_judge_protocol, body.aa_lcr_version, body.aa_lcr_dataset_revision)
        if row != (protocol, *expected):
            raise HTTPException(
                status_code=422,
                detail=f"the row was prepared for {row[0]} (AA-LCR {row[1]}, dataset {row[2]}) but this server "
                f"judges with {protocol} (AA-LCR {expected[0]}, dataset {expected[1]}): set judge_protocol "
                "to match the data",
            )

    async def verify(self, body: AalcrVerifyRequest) -> AalcrVerifyResponse:
        """The last assistant message, judged against `answer` under the configured protocol."""
        self._check_protocol(body)
        band_field = BAND_FIELDS[body.input_tokens_band]
        candidate = last_assistant_text(body.response).strip()
        graded = {
            **body.model_dump(exclude=GRADING_FIELDS | {"reward"}),
            "extracted_answer": candidate or None,
        }
        if not candidate:
            return AalcrVerifyResponse(**graded, reward=0.0, invalid_model_response=True, **{band_field: 0.0})
        params = self._judge_params(body, candidate)
        try:
            judgment = await self._judge.ask(params, unusable=self._unreadable)
        except JudgeFailed as failed:
            return AalcrVerifyResponse(
                **graded,
                **self._judge.failure_fields(failed),
                invalid_judge_response=failed.failure.kind == "bad_response",
            )
        judge_output = judgment.text
        # `_unreadable` turned anything but a verdict into a judge failure.
        verdict: Verdict = (
            "CORRECT" if parse_verdict(judge_output, self.config.judge_protocol) == "CORRECT" else "INCORRECT"
        )
        reward = float(verdict == "CORRECT")
        return AalcrVerifyResponse(
            **graded,
            reward=reward,
            verdict=verdict,
            judge_output=judge_output,
            judge_evaluations=[judgment.evaluation],
            invalid_judge_response=False,
            **{band_field: reward},
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return aalcr_metrics(tasks)


if __name__ == "__main__":
    AalcrResourcesServer.run_webserver()
