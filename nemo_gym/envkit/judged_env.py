"""What environments grading with an LLM judge share around `nemo_gym.envkit.judge`: their config, the judge asked
with a filled prompt and read by a parser, what a failed judgment puts in the verify answer, the checks and
headline metrics, and the resources server built on them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from fastapi import FastAPI
from pydantic import PrivateAttr

from nemo_gym.config.server_refs import ModelServerRef
from nemo_gym.envkit.judge import (
    JUDGE_FAILURE_RATE_KEY,
    Judge,
    JudgeConfig,
    JudgeEvaluation,
    JudgeFailed,
    JudgeFailure,
    Unusable,
    judge_failure_metrics,
    last_assistant_text,
)
from nemo_gym.envkit.pass_at_k_metrics import TOKEN_MEANS, pass_at_k_key_metrics
from nemo_gym.serving.resources_server import BaseResourcesServerConfig, SimpleResourcesServer
from nemo_gym.serving.servers import SimpleServer
from nemo_gym.wire.responses import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming, assistant_texts

T = TypeVar("T")


class JudgedEnvConfig(JudgeConfig, BaseResourcesServerConfig):
    """The config of a resources server that always grades with a judge: the flat `judge_*` keys, with
    `judge_model_server` required (a missing one is refused when the config is read, not at first verify)."""

    judge_model_server: ModelServerRef


def unusable_unless(parse: Callable[[str], object | None], missing: str, from_end: bool = False) -> Unusable:
    """An `unusable` check for `Judge.ask`: the judge's answer (its last assistant text) is refused when
    `parse` reads None from it, with the message "the judge's answer <missing>: <its first 100 chars>"
    (its last 100 with `from_end`, for judges that reason first and give the verdict last)."""

    def unusable(response: NeMoGymResponse) -> str | None:
        text = last_assistant_text(response)
        if parse(text) is None:
            shown = text[-100:] if from_end else text[:100]
            return f"the judge's answer {missing}: {shown!r}"
        return None

    return unusable


def first_label(text: str, labels: Sequence[str]) -> str | None:
    """Whichever of `labels` comes first in `text` (of two starting at the same place, the one that sorts
    first); None when it carries none of them."""
    positions = [(text.find(label), label) for label in labels if label in text]
    return min(positions)[1] if positions else None


def final_item_text(response: NeMoGymResponse) -> str:
    """The last text of the final output item; "" when that item is not a message (a judge that ends on
    reasoning or a tool call gave no verdict)."""
    texts = assistant_texts(response.output[-1]) if response.output else []
    return texts[-1] if texts else ""


def prompt_messages(prompt: str, system: str | None = None) -> list[dict[str, str]]:
    """A filled prompt as the judge's input: one user message, after the system message when there is one."""
    user = {"role": "user", "content": prompt}
    return [{"role": "system", "content": system}, user] if system else [user]


@dataclass(frozen=True)
class Judgment(Generic[T]):
    """One judge call: the record the verify answer keeps, the judge's answer text and what `read` made of it."""

    evaluation: JudgeEvaluation
    text: str
    verdict: T


class PromptJudge:
    """An environment's judge, asked with a filled prompt and read by a parser.

    `ask` raises `JudgeFailed` when no usable judgment can be had; `failure_fields` turns that into the
    verify answer's `reward` (`judge_failure_reward`) and `judge_failure`, so a broken judge never reads as
    a wrong answer."""

    def __init__(self, config: JudgeConfig, judge: Judge) -> None:
        self.config, self.judge = config, judge

    @classmethod
    def of(
        cls, server: SimpleServer, config: JudgeConfig | None = None, owner: str | None = None
    ) -> PromptJudge:
        """The judge a server's config (or `config`) names, logging as the server (or `owner`)."""
        config = config if config is not None else server.config
        return cls(config, Judge(config, server.server_client, owner or server.config.name))

    def params_for(
        self, prompt: str | Sequence[Mapping[str, Any]], system: str | None = None
    ) -> NeMoGymResponseCreateParamsNonStreaming:
        """The request `ask` would send for `prompt`, for an environment that adds to it first."""
        return self.judge.params_for(
            prompt_messages(prompt, system) if isinstance(prompt, str) else list(prompt)
        )

    async def ask(
        self,
        prompt: str | Sequence[Mapping[str, Any]] | NeMoGymResponseCreateParamsNonStreaming,
        read: Callable[[str], T] | None = None,
        *,
        system: str | None = None,
        missing: str | None = None,
        unusable: Unusable | None = None,
    ) -> Judgment[T | None]:
        """Ask with `prompt`: a filled template (a user message, after `system`), the messages themselves, or
        the whole request when the environment builds it.
        With `missing`, an answer `read` makes None of is unusable ("the judge's answer <missing>: ..."),
        as is one `unusable` refuses; the verdict is `read(text)`, or None without `read`."""
        if missing is not None:
            if read is None or unusable is not None:
                raise ValueError("`missing` needs `read` and no `unusable` of its own")
            unusable = unusable_unless(read, missing)
        params = prompt
        if not isinstance(params, NeMoGymResponseCreateParamsNonStreaming):
            params = self.params_for(params, system)
        response = await self.judge.ask(params, unusable)
        text = last_assistant_text(response)
        evaluation = JudgeEvaluation(responses_create_params=params, response=response)
        return Judgment(evaluation, text, read(text) if read is not None else None)

    def failure_fields(self, failed: JudgeFailed | JudgeFailure) -> dict[str, Any]:
        """The verify answer's fields for a judgment that could not be had (or could not be used)."""
        failure = failed.failure if isinstance(failed, JudgeFailed) else failed
        return {"reward": self.config.judge_failure_reward, "judge_failure": failure}


def judged_key_metrics(
    agent_metrics: Mapping[str, Any], best_of: Sequence[str] = ("pass@{k}",)
) -> dict[str, Any]:
    """The headline metrics of a judged environment: the token means and `judge_failure_rate`, then the
    highest-k pass@1[avg-of-k] entries and those of the `best_of` families (pass@k by default)."""
    return pass_at_k_key_metrics(
        agent_metrics, leading=(*TOKEN_MEANS, JUDGE_FAILURE_RATE_KEY), best_of=best_of
    )


class JudgedResourcesServer(SimpleResourcesServer):
    """A resources server that grades with the judge its config names (a `JudgedEnvConfig`).

    The judge is built when the server starts (`self._judge`, a `PromptJudge`); `/aggregate_metrics` adds
    `judge_failure_rate` and `judge_failures/<kind>` to the environment's own `compute_metrics`, and the
    headline is `judged_key_metrics` over the `key_metric_best_of` families."""

    config: JudgedEnvConfig
    key_metric_best_of: ClassVar[tuple[str, ...]] = ("pass@{k}",)
    _judge: PromptJudge = PrivateAttr()

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        self._judge = PromptJudge.of(self)
        return app

    def kit_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return judge_failure_metrics(tasks)

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        return judged_key_metrics(agent_metrics, self.key_metric_best_of)
