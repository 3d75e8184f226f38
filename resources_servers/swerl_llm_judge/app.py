"""swerl_llm_judge: the policy judges candidate patches; rewarded 1.0 when it picks the right one.

Despite the name no judge model is called: the policy is the judge. The prompt shows an issue and
several candidate fixes labelled A, B, C, ...; the reply names its choice in `<solution>...</solution>`
(grading.py reads it leniently or strictly, per row), and the reward is 1.0 when that letter is one of
the row's gold letters.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import ValidationInfo, field_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    ReverifyMode,
    SimpleResourcesServer,
)
from nemo_gym.envkit.pass_at_k_metrics import PassAtK
from nemo_gym.wire.responses import assistant_texts
from resources_servers.swerl_llm_judge.grading import lenient_choice, option_letters, strict_choice


class SWEJudgeConfig(BaseResourcesServerConfig):
    # The name of the dataset the instance serves, as NeMo Gym's config carries it; informational only.
    dataset_name: str | None = None
    # Grading reads only the stored reply, so a stored rollout can be verified again.
    REVERIFY_MODE: ClassVar[ReverifyMode] = ReverifyMode.STATELESS


class SWEJudgeVerifyRequest(BaseVerifyRequest):
    options: list[dict[str, str]] | None = None
    expected_answer: str | list[str]
    grading_mode: Literal["lenient", "strict"] = "lenient"
    instance_id: str | None = None
    dataset_name: str | None = None
    dataset_split: str | None = None
    metadata: dict[str, Any] | None = None

    @field_validator("options")
    @classmethod
    def _each_option_is_one_letter(cls, options: list[dict[str, str]] | None) -> list[dict[str, str]] | None:
        for option in options or ():
            if len(option) != 1 or not all(len(key) == 1 and key.isalpha() for key in option):
                raise ValueError('each option must be a one-key object naming it by a letter: {"A": "..."}')
        return options

    @field_validator("expected_answer")
    @classmethod
    def _gold_letters_among_the_options(cls, gold: str | list[str], info: ValidationInfo) -> str | list[str]:
        letters = [gold] if isinstance(gold, str) else gold
        normalized = [letter.strip().upper() for letter in letters]
        if not normalized or not all(len(letter) == 1 and letter.isalpha() for letter in normalized):
            raise ValueError("expected_answer must be a letter (or a list of letters), e.g. 'B'")
        allowed = option_letters(info.data.get("options"))
        if allowed and not set(normalized) <= allowed:
            raise ValueError(f"expected_answer {gold!r} names no option; the options are {sorted(allowed)}")
        unique = list(dict.fromkeys(normalized))
        return unique[0] if len(unique) == 1 else unique


class SWEJudgeVerifyResponse(SWEJudgeVerifyRequest, BaseVerifyResponse):
    extracted_answer: str | None


class SWEJudgeResourcesServer(SimpleResourcesServer):
    config: SWEJudgeConfig
    pass_at_k = PassAtK(answer_key="extracted_answer")
    key_metric_patterns = (
        "mean/reward",
        "pass@1[avg-of-{k}]/*",
        "pass@{k}/accuracy",
        "majority@{k}/accuracy",
    )

    async def verify(self, body: SWEJudgeVerifyRequest) -> SWEJudgeVerifyResponse:
        text = "\n".join(text for item in body.response.output for text in assistant_texts(item)).strip()
        read = lenient_choice if body.grading_mode == "lenient" else strict_choice
        choice = read(text, option_letters(body.options))
        golds = [body.expected_answer] if isinstance(body.expected_answer, str) else body.expected_answer
        return SWEJudgeVerifyResponse(
            **body.model_dump(),
            reward=1.0 if choice is not None and choice in golds else 0.0,
            extracted_answer=choice,
        )


if __name__ == "__main__":
    SWEJudgeResourcesServer.run_webserver()
