"""labbench2_vlm: scientific figure and table questions (figqa2, tableqa2) and protocol troubleshooting
(protocolqa2), the policy's free-text answer judged equivalent or not to the row's ideal answer.

The rows carry their figures as `input_image` parts of the prompt; a row whose picture does not decode is
refused with a 422 naming the part, so a broken row is never graded as if the policy had seen it. The judge
answers with an equivalence label; an answer without one, or a judgment that fails, is recorded in
`judge_failure`, never counted as a grade.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI
from pydantic import ConfigDict, PrivateAttr

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
from nemo_gym.openai_utils import NeMoGymResponseCreateParamsNonStreaming
from resources_servers.labbench2_vlm.grading import (
    PLAIN_FIELDS,
    PROTOCOL_FIELDS,
    Verdict,
    labbench_metrics,
    load_template,
    read_verdict,
)
from resources_servers.labbench2_vlm.prompt_media import require_readable_images

FOLDER = Path(__file__).resolve().parent
PROTOCOL_TAG_PREFIX = "protocolqa2"


class LabbenchVLMConfig(JudgedEnvConfig):
    judge_prompt_template_fpath: str = "prompt_templates/judge.txt"
    judge_prompt_template_protocol_fpath: str = "prompt_templates/judge_protocol.txt"
    judge_equal_label: str = "[[A=B]]"
    judge_not_equal_label: str = "[[A!=B]]"


class LabbenchVLMVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")

    verifier_metadata: dict[str, Any] | None = None


class LabbenchVLMVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    verifier_metadata: dict[str, Any] | None = None
    extracted_answer: str | None = None
    expected_answer: str | None = None
    verdict: Verdict | None = None
    verdict_label: str | None = None
    judge_output: str | None = None
    judge_evaluations: list[JudgeEvaluation] = []
    judge_failure: JudgeFailure | None = None


GRADING_FIELDS = set(LabbenchVLMVerifyResponse.model_fields) - set(LabbenchVLMVerifyRequest.model_fields)


def question_text(params: NeMoGymResponseCreateParamsNonStreaming) -> str:
    """The question: the last text part of the last user message (the figures come as image parts)."""
    messages = params.model_dump(mode="json").get("input")
    if isinstance(messages, str):
        return messages.strip()
    for message in reversed(messages or []):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content.strip()
        for part in reversed(content or []):
            if isinstance(part, dict) and part.get("type") == "input_text":
                return str(part.get("text") or "").strip()
    return ""


class LabbenchVLMResourcesServer(JudgedResourcesServer):
    config: LabbenchVLMConfig
    _plain_prompt: str = PrivateAttr()
    _protocol_prompt: str = PrivateAttr()

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        self._plain_prompt = load_template(
            FOLDER, self.config.judge_prompt_template_fpath, "judge_prompt_template_fpath", PLAIN_FIELDS
        )
        self._protocol_prompt = load_template(
            FOLDER,
            self.config.judge_prompt_template_protocol_fpath,
            "judge_prompt_template_protocol_fpath",
            PROTOCOL_FIELDS,
        )
        return app

    def _read_verdict(self, text: str) -> Verdict | None:
        return read_verdict(text, self.config.judge_equal_label, self.config.judge_not_equal_label)

    def _prompt_for(self, meta: dict[str, Any], question: str, ideal: str, answer: str) -> str:
        fields = {"question": question, "expected_answer": ideal, "generated_answer": answer}
        if str(meta.get("tag") or "").startswith(PROTOCOL_TAG_PREFIX):
            passage = meta.get("reference_passage") or meta.get("key_passage") or ""
            return self._protocol_prompt.format(**fields, reference_passage=str(passage))
        return self._plain_prompt.format(**fields)

    async def verify(self, body: LabbenchVLMVerifyRequest) -> LabbenchVLMVerifyResponse:
        """reward 1.0 iff the judge labels the answer equivalent to `verifier_metadata.ideal`; an empty
        answer is not equivalent without asking the judge."""
        require_readable_images(body.responses_create_params)
        meta = body.verifier_metadata or {}
        ideal = str(meta.get("ideal") or "")
        answer = last_assistant_text(body.response)
        graded = {
            **body.model_dump(exclude=GRADING_FIELDS | {"reward"}),
            "extracted_answer": answer or None,
            "expected_answer": ideal,
        }
        if not answer:
            return LabbenchVLMVerifyResponse(**graded, reward=0.0, verdict="not_equal")
        prompt = self._prompt_for(meta, question_text(body.responses_create_params), ideal, answer)
        labels = f"{self.config.judge_equal_label} or {self.config.judge_not_equal_label}"
        try:
            judgment = await self._judge.ask(prompt, self._read_verdict, missing=f"has no label ({labels})")
        except JudgeFailed as failed:
            return LabbenchVLMVerifyResponse(**graded, **self._judge.failure_fields(failed))
        judge_output = judgment.text
        verdict = judgment.verdict
        return LabbenchVLMVerifyResponse(
            **graded,
            reward=float(verdict == "equal"),
            verdict=verdict,
            verdict_label=self.config.judge_equal_label
            if verdict == "equal"
            else self.config.judge_not_equal_label,
            judge_output=judge_output,
            judge_evaluations=[judgment.evaluation],
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return labbench_metrics(tasks)


if __name__ == "__main__":
    LabbenchVLMResourcesServer.run_webserver()
