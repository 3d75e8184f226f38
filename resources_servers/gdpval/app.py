"""gdpval: an LLM judge scores a rollout's deliverable files (docx, pptx, xlsx, text) against the task's rubric.

The deliverable is the folder named by the row's `deliverables_dir` (relative paths start at
`deliverables_root`); a row without one is graded on the reply's text, as NeMo Gym does. The files' text
is extracted within size limits and a deadline, then the judge scores every rubric criterion 0/1 and
returns an overall score in [0, 1], which is the reward. A missing or unreadable deliverable earns 0 with
the reason, without asking the judge; a judgment that fails, or a judge answer without usable scores, is
reported in `judge_failure`, never counted as a grade. Pairwise (ELO) comparison mode is not ported.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI, HTTPException
from pydantic import ConfigDict, Field, PrivateAttr, field_validator

from nemo_gym.base_resources_server import (
    BaseVerifyRequest,
    BaseVerifyResponse,
)
from nemo_gym.envkit.judged_env import JudgedEnvConfig, JudgedResourcesServer
from nemo_gym.envkit.pass_at_k_metrics import (
    TOKEN_MEANS,
    compute_pass_majority_metrics,
    pass_at_k_key_metrics,
)
from nemo_gym.global_config import install_root
from nemo_gym.judge import (
    JUDGE_FAILURE_RATE_KEY,
    JudgeEvaluation,
    JudgeFailed,
    JudgeFailure,
    last_assistant_text,
)
from nemo_gym.openai_utils import NeMoGymResponse
from resources_servers.gdpval.deliverables import Limits, read_deliverable
from resources_servers.gdpval.rubric import load_prompt, read_scores, rubric_items, rubric_text

FOLDER = Path(__file__).resolve().parent
DeliverableStatus = Literal["read", "from_reply", "missing", "unreadable", "empty", "timeout"]


class GDPValConfig(JudgedEnvConfig):
    reward_mode: Literal["rubric", "comparison"] = "rubric"
    rubric_scoring_mode: Literal["binary", "structured"] = "binary"
    reference_deliverables_dir: str | None = None
    reference_models: dict[str, Any] = {}
    judge_prompt_template_fpath: str = "prompts/judge_prompt.txt"
    # Where a relative `deliverables_dir` starts (null: the Gym checkout).
    deliverables_root: str | None = None
    # Bounds on reading one deliverable folder.
    max_deliverable_files: int = Field(default=20, ge=1)
    max_deliverable_file_bytes: int = Field(default=20_000_000, ge=1)
    max_unpacked_bytes: int = Field(default=100_000_000, ge=1)
    max_deliverable_chars: int = Field(default=60_000, ge=1)
    extract_deadline_s: float = Field(default=30.0, gt=0)

    @field_validator("reward_mode")
    @classmethod
    def _rubric_only(cls, value: str) -> str:
        if value != "rubric":
            raise ValueError("not supported here: pairwise comparison (ELO) mode is not ported; use rubric")
        return value

    @field_validator("rubric_scoring_mode")
    @classmethod
    def _binary_only(cls, value: str) -> str:
        if value != "binary":
            raise ValueError("not supported here: only the binary (0/1 per criterion) scoring is ported")
        return value


class GDPValVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")

    task_id: str
    sector: str | None = None
    occupation: str | None = None
    prompt: str | None = None
    rubric_json: Any = None
    rubric_pretty: str | None = None
    reference_file_urls: list[str] | None = None
    deliverables_dir: str | None = None


class GDPValVerifyResponse(GDPValVerifyRequest, BaseVerifyResponse):
    verify_mode: Literal["rubric"] = "rubric"
    deliverable_status: DeliverableStatus = "read"
    deliverable_files: list[str] = []
    deliverable_errors: list[str] = []
    deliverable_truncated: bool = False
    judge_response: dict[str, Any] | None = None
    invalid_judge_response: bool | None = None
    judge_output: str | None = None
    judge_evaluations: list[JudgeEvaluation] = []
    judge_failure: JudgeFailure | None = None


GRADING_FIELDS = set(GDPValVerifyResponse.model_fields) - set(GDPValVerifyRequest.model_fields)


def without_scores(response: NeMoGymResponse) -> str | None:
    scores = read_scores(last_assistant_text(response))
    return scores if isinstance(scores, str) else None


class GDPValResourcesServer(JudgedResourcesServer):
    config: GDPValConfig
    _prompt: str = PrivateAttr()

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        self._prompt = load_prompt(FOLDER, self.config.judge_prompt_template_fpath)
        return app

    def _limits(self) -> Limits:
        return Limits(
            max_files=self.config.max_deliverable_files,
            max_file_bytes=self.config.max_deliverable_file_bytes,
            max_unpacked_bytes=self.config.max_unpacked_bytes,
            max_chars=self.config.max_deliverable_chars,
        )

    def _folder(self, deliverables_dir: str) -> Path:
        path = Path(deliverables_dir)
        root = Path(self.config.deliverables_root) if self.config.deliverables_root else install_root()
        return path if path.is_absolute() else root / path

    async def verify(self, body: GDPValVerifyRequest) -> GDPValVerifyResponse:
        """reward = the judge's overall rubric score of the deliverable, in [0, 1]."""
        rubric = rubric_text(body.rubric_json, body.rubric_pretty)
        if rubric is None:
            # A row without a rubric cannot be graded: say so to the caller, not with a reward.
            raise HTTPException(
                status_code=422, detail="rubric_json / rubric_pretty: the row has no rubric criteria"
            )
        base = body.model_dump(exclude=GRADING_FIELDS | {"reward"})

        def ungraded(status: DeliverableStatus, reason: str, **extra: Any) -> GDPValVerifyResponse:
            return GDPValVerifyResponse(
                **base, reward=0.0, deliverable_status=status, failure_reason=reason, **extra
            )

        if body.deliverables_dir:
            folder = self._folder(body.deliverables_dir)
            if not folder.is_dir():
                return ungraded("missing", f"deliverables_dir {body.deliverables_dir!r} is not a folder")
            try:
                found = await asyncio.wait_for(
                    asyncio.to_thread(read_deliverable, folder, self._limits()),
                    self.config.extract_deadline_s,
                )
            except TimeoutError:
                reason = f"reading the deliverable took longer than extract_deadline_s={self.config.extract_deadline_s}"
                return GDPValVerifyResponse(
                    **base,
                    reward=0.0,
                    deliverable_status="timeout",
                    mask_sample=True,
                    failure_kind="timeout",
                    failure_reason=reason,
                )
            files = {"deliverable_files": found.files, "deliverable_errors": found.errors}
            if not found.files:
                return ungraded("empty", "the deliverables folder holds no file", **files)
            if not found.text.strip():
                reason = "no deliverable file could be read: " + "; ".join(found.errors or ["all empty"])
                return ungraded("unreadable", reason[:500], **files)
            deliverable, status = found.text, "read"
            files["deliverable_truncated"] = found.truncated
        else:
            deliverable, status, files = last_assistant_text(body.response), "from_reply", {}
            if not deliverable.strip():
                return ungraded("empty", "no deliverables_dir and no reply text to grade")
            deliverable = deliverable[: self.config.max_deliverable_chars]

        prompt = self._prompt.format(task_prompt=body.prompt or "", rubric=rubric, deliverable=deliverable)
        try:
            judgment = await self._judge.ask(prompt, read_scores, unusable=without_scores)
        except JudgeFailed as failed:
            return GDPValVerifyResponse(
                **base,
                **files,
                **self._judge.failure_fields(failed),
                deliverable_status=status,
                invalid_judge_response=True,
            )
        judge_output = judgment.text
        overall, criteria = judgment.verdict  # a tuple: `without_scores` checked it
        items = rubric_items(body.rubric_json) or []
        return GDPValVerifyResponse(
            **base,
            **files,
            reward=overall,
            deliverable_status=status,
            judge_response={
                "overall_score": overall,
                "criteria_scores": criteria,
                "criteria_met": int(sum(criteria)),
                "num_rubric_items": len(items) or None,
            },
            invalid_judge_response=False,
            judge_output=judge_output,
            judge_evaluations=[judgment.evaluation],
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """pass@k of the rubric score over the judged rollouts (a failed judgment has no score), and how
        many deliverables could not be read."""
        judged = [[r for r in task if not r.get("judge_failure")] for task in tasks]
        judged = [task for task in judged if task]
        metrics = compute_pass_majority_metrics(
            judged, score_fn=lambda r: {"rubric_score": float(r["reward"])}
        )[0]
        rollouts = [r for task in tasks for r in task]
        unread = sum(
            r.get("deliverable_status") in ("missing", "unreadable", "empty", "timeout") for r in rollouts
        )
        metrics["deliverable_unread_rate"] = unread / len(rollouts) if rollouts else 0.0
        return metrics

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        return pass_at_k_key_metrics(
            agent_metrics,
            leading=(*TOKEN_MEANS, JUDGE_FAILURE_RATE_KEY, "deliverable_unread_rate"),
            best_of=("pass@{k}",),
        )


if __name__ == "__main__":
    GDPValResourcesServer.run_webserver()
