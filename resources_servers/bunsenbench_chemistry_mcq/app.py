"""bunsenbench_chemistry_mcq: BunsenBench chemistry multiple choice, rewarded 1.0 when the chosen option is the gold one.

Rows are mcqa-style (`options` as letter-to-text maps, or `choices` as a list) with the gold letter in
`expected_answer`; the prompt lists the options in `<choices>` and asks for the chosen text inside
`<choice></choice>`. grading.py reads the choice (a tag, a box, an `Answer:` line, a phrase, or the text
itself) and sorts every rollout into one error mode, so a score can be explained: a wrong answer, a
refusal, a truncated generation, a `<choice>` matching no option, or an ignored format. Metrics are
pass@k / majority@k overall and per source and BCT field/subfield, plus the error-mode shares.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

from pydantic import ConfigDict, Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.envkit.multiple_choice import choice_reward, option_letter
from nemo_gym.envkit.pass_at_k_metrics import (
    PER_SAMPLE_AGGREGATE_KEY,
    PassAtK,
    compute_pass_majority_metrics,
)
from nemo_gym.serving.cpu_pool import run_cpu_bound
from nemo_gym.text.extraction import option_pairs
from nemo_gym.wire.responses import NeMoGymResponse
from resources_servers.bunsenbench_chemistry_mcq.grading import ERROR_MODES, Options, gold_letter, grade_text

MAX_CHOICES = 26
GROUP_FIELDS = ("source", "bct_field", "bct_subfield")


class BunsenChemConfig(BaseResourcesServerConfig):
    grading_timeout_s: float = Field(
        default=5.0, gt=0, description="deadline of reading one answer; past it the sample is masked"
    )


class BunsenChemVerifyRequest(BaseVerifyRequest):
    # Undeclared row fields are dropped, as NeMo Gym does for this benchmark.
    model_config = ConfigDict(extra="ignore")

    options: list[dict[str, str | None]] = Field(default_factory=list)
    choices: list[str | dict[str, Any]] | None = None
    expected_answer: str
    uuid: str | None = None
    bunsen_id: str | None = None
    source: str | None = None
    bct_field: str | None = None
    bct_subfield: str | None = None
    metadata: dict[str, Any] | None = None
    # mcqa fields some rows carry; this benchmark's own extraction rules apply whatever they say.
    grading_mode: str | None = None
    template_metadata: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _gold_is_an_option(self) -> BunsenChemVerifyRequest:
        if gold_letter(self.expected_answer, self.option_pairs()) is None:
            reason = f"expected_answer {self.expected_answer!r} is neither a letter nor the text of an option"
            error = PydanticCustomError("unknown_gold_answer", "{reason}", {"reason": reason})
            raise ValidationError.from_exception_data(
                type(self).__name__,
                [InitErrorDetails(type=error, loc=("expected_answer",), input=self.expected_answer)],
            )
        return self

    def option_pairs(self) -> tuple[tuple[str, str], ...]:
        """(letter, text) of the options; from `choices` (letters by position unless given) when the row
        has no `options`."""
        if self.options:
            return option_pairs(self.options)
        pairs: list[tuple[str, str]] = []
        for index, choice in enumerate((self.choices or [])[:MAX_CHOICES]):
            letter: Any = option_letter(index)
            if isinstance(choice, dict):
                letter = next(
                    (choice[key] for key in ("letter", "label", "key", "id") if choice.get(key)), letter
                )
                choice = next(
                    (choice[key] for key in ("text", "content", "value", "choice") if choice.get(key)), None
                )
            if isinstance(letter, str) and len(letter.strip()) == 1 and isinstance(choice, str):
                pairs.append((letter.strip().upper(), choice))
        return tuple(pairs)

    def field_or_metadata(self, name: str) -> Any:
        value = getattr(self, name)
        return value if value is not None else (self.metadata or {}).get(name)


class BunsenChemVerifyResponse(BaseVerifyResponse):
    options: list[dict[str, str | None]] = Field(default_factory=list)
    choices: list[str | dict[str, Any]] | None = None
    expected_answer: str = Field(description="the gold letter")
    extracted_answer: str | None = Field(description="the letter read from the response; None when none")
    no_answer: bool
    error_mode: str = Field(description="one of " + ", ".join(ERROR_MODES))
    uuid: str | None = None
    bunsen_id: str | None = None
    source: str | None = None
    bct_field: str | None = None
    bct_subfield: str | None = None
    metadata: dict[str, Any] | None = None
    grading_mode: str | None = None
    template_metadata: dict[str, Any] | None = None


def response_flags(response: NeMoGymResponse) -> tuple[bool, bool]:
    """(the model sent a refusal part, the generation was cut short)."""
    refused = any(
        getattr(part, "type", None) == "refusal"
        for item in response.output
        for part in (
            getattr(item, "content", None) if isinstance(getattr(item, "content", None), list) else []
        )
    )
    reason = response.incomplete_details.reason if response.incomplete_details is not None else None
    truncated = (
        response.status == "incomplete"
        or reason == "max_output_tokens"
        or any(getattr(item, "status", None) == "incomplete" for item in response.output)
    )
    return refused, truncated


class BunsenChemResourcesServer(SimpleResourcesServer):
    config: BunsenChemConfig
    pass_at_k = PassAtK(answer_key="extracted_answer")
    key_metric_patterns = (
        "mean/reward",
        "pass@1[avg-of-{k}]/accuracy",
        "pass@1[avg-of-{k}]/no_answer",
        "pass@{k}/accuracy",
        "majority@{k}/accuracy",
        "pass@1/accuracy",
        "pass@1/no_answer",
        *(f"error_modes/{mode}" for mode in ERROR_MODES),
    )

    async def verify(self, body: BunsenChemVerifyRequest) -> BunsenChemVerifyResponse:
        """Read the choice in the CPU pool (tag patterns scan the whole response; past the deadline the
        sample has no answer and is masked), then settle the error mode."""
        options: Options = body.option_pairs()
        gold = gold_letter(body.expected_answer, options) or ""
        predicted, text_mode = await run_cpu_bound(
            grade_text,
            body.response.output_text,
            options,
            gold,
            timeout_s=self.config.grading_timeout_s,
            on_timeout=(None, "format_violation"),
        )
        refused, truncated = response_flags(body.response)
        if predicted is not None:
            error_mode = text_mode
        elif refused:
            error_mode = "refusal"
        elif truncated:
            error_mode = "early_termination"
        else:
            error_mode = text_mode
        echoed = body.model_dump(exclude={"expected_answer", *GROUP_FIELDS, "bunsen_id"})
        return BunsenChemVerifyResponse(
            **echoed,
            reward=choice_reward(gold, predicted),
            expected_answer=gold,
            extracted_answer=predicted,
            no_answer=predicted is None,
            error_mode=error_mode,
            bunsen_id=body.field_or_metadata("bunsen_id"),
            **{name: body.field_or_metadata(name) for name in GROUP_FIELDS},
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        metrics = super().compute_metrics(tasks)
        for field in ("source", "bct_field"):
            metrics.update(
                grouped_metrics(tasks, f"by_{field}", lambda task, field=field: _segment_of(task, field))
            )
        metrics.update(grouped_metrics(tasks, "by_bct_subfield", _subfield_of))
        metrics.update(error_mode_metrics(tasks))
        return metrics


def metric_segment(value: Any) -> str:
    """A group value as a stable piece of a metric name (`/` doubled to `__`, odd characters to `_`)."""
    segment = re.sub(r"\s+", "_", str(value).strip()).replace("/", "__")
    return re.sub(r"[^A-Za-z0-9_.:+-]+", "_", segment).strip("_") or "unknown"


def _first(task: list[dict[str, Any]], field: str) -> Any:
    return next((rollout[field] for rollout in task if rollout.get(field)), None)


def _segment_of(task: list[dict[str, Any]], field: str) -> str | None:
    value = _first(task, field)
    return metric_segment(value) if value else None


def _subfield_of(task: list[dict[str, Any]]) -> str | None:
    field, subfield = _first(task, "bct_field"), _first(task, "bct_subfield")
    return f"{metric_segment(field)}/{metric_segment(subfield)}" if field and subfield else None


def grouped_metrics(
    tasks: list[list[dict[str, Any]]], prefix: str, group_of: Callable[[list[dict[str, Any]]], str | None]
) -> dict[str, Any]:
    """pass@k / majority@k of each group of tasks, as `<prefix>/<group>/<metric>`."""
    groups: dict[str, list[list[dict[str, Any]]]] = defaultdict(list)
    for task in tasks:
        if (group := group_of(task)) is not None:
            groups[group].append(task)
    return {
        f"{prefix}/{group}/{name}": value
        for group, group_tasks in groups.items()
        for name, value in compute_pass_majority_metrics(group_tasks, answer_key="extracted_answer")[
            0
        ].items()
        if name != PER_SAMPLE_AGGREGATE_KEY
    }


def error_mode_metrics(tasks: list[list[dict[str, Any]]]) -> dict[str, float]:
    """Each error mode's share of all rollouts in percent (`error_modes/<mode>`) and count (`/count`)."""
    modes = Counter(_error_mode_of(rollout) for task in tasks for rollout in task)
    total = sum(modes.values())
    metrics: dict[str, float] = {}
    for mode in dict.fromkeys([*ERROR_MODES, *modes]):
        metrics[f"error_modes/{mode}/count"] = float(modes[mode])
        metrics[f"error_modes/{mode}"] = 100.0 * modes[mode] / total if total else 0.0
    return metrics


def _error_mode_of(rollout: dict[str, Any]) -> str:
    """The recorded mode; for rollouts recorded without one, the best guess from reward and answer."""
    if rollout.get("error_mode"):
        return str(rollout["error_mode"])
    if rollout.get("reward"):
        return "correct"
    return "wrong_answer" if rollout.get("extracted_answer") is not None else "format_violation"


if __name__ == "__main__":
    BunsenChemResourcesServer.run_webserver()
