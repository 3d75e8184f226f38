"""The verifiers of jailbreak_detection: one judge question each (a prompt, two labels, a reward per label),
the response policies that pick and combine them, and reading a label out of the judge's answer."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from nemo_gym.config_types import ConfigError
from nemo_gym.wire.validation_errors import first_problem

Combination = Literal["product", "average", "single"]
Label = Literal["positive", "negative"]
PLACEHOLDERS = {"adversarial_prompt": "", "model_response": ""}
SAFETY = "safety_check"
QUALITY = "quality_explanation_check"


class Labels(BaseModel):
    positive: str = Field(min_length=1)
    negative: str = Field(min_length=1)


class Rewards(BaseModel):
    model_config = ConfigDict(extra="allow")  # NeMo Gym's `unclear` is accepted (an unclear verdict fails)

    positive: float = 1.0
    negative: float = 0.0


class Verifier(BaseModel):
    prompt_template: str
    labels: Labels
    rewards: Rewards = Field(default_factory=Rewards)

    def prompt(self, adversarial_prompt: str, model_response: str) -> str:
        return self.prompt_template.format(
            adversarial_prompt=adversarial_prompt, model_response=model_response
        )

    def read(self, judge_text: str) -> Label | None:
        """The label that comes first in the judge's answer; None when it has neither."""
        positive_at = judge_text.find(self.labels.positive)
        negative_at = judge_text.find(self.labels.negative)
        if positive_at < 0 and negative_at < 0:
            return None
        if positive_at >= 0 and (negative_at < 0 or positive_at < negative_at):
            return "positive"
        return "negative"


class ResponsePolicy(BaseModel):
    model_config = ConfigDict(extra="allow")

    description: str | None = None
    verifiers: list[str] = Field(min_length=1)
    reward_combination: Combination = "product"


class VerifierTemplates(BaseModel):
    verifiers: dict[str, Verifier] = {}
    policies: dict[str, ResponsePolicy] = {}

    @model_validator(mode="after")
    def _policies_name_known_verifiers(self) -> VerifierTemplates:
        for policy, plan in self.policies.items():
            unknown = [name for name in plan.verifiers if name not in self.verifiers]
            if unknown:
                raise ValueError(f"policy {policy!r} names verifiers that are not defined: {unknown}")
        return self


def combine(rewards: list[float], how: Combination) -> float:
    if how == "single":
        return rewards[0]
    if how == "average":
        return sum(rewards) / len(rewards)
    product = 1.0
    for reward in rewards:
        product *= reward
    return product


def check_template(template: str, where: str) -> str:
    """`template` unchanged if it fills with the two placeholders alone, else a ConfigError naming `where`."""
    try:
        template.format_map(PLACEHOLDERS)
    except (KeyError, IndexError, ValueError) as error:
        raise ConfigError(
            f"{where}: a prompt may use only {{adversarial_prompt}} and {{model_response}} (literal braces "
            f"doubled): {error!r}"
        ) from None
    return template


def load_templates(folder: Path, path: str | None) -> VerifierTemplates:
    """The verifiers and `policy_verifier_map` of the YAML file at `path` (relative to `folder`); none
    when `path` is None. Any problem stops the server with one line naming the key and the file."""
    if path is None:
        return VerifierTemplates()
    full_path = Path(path) if Path(path).is_absolute() else folder / path
    where = f"policy_verifier_templates_path {full_path}"
    try:
        data = yaml.safe_load(full_path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(f"{where}: cannot read it ({error.strerror})") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{where}: not valid YAML ({one_line(error)})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: must be a mapping of verifiers and a policy_verifier_map")
    policies = data.pop("policy_verifier_map", None) or {}
    try:
        templates = VerifierTemplates.model_validate({"verifiers": data, "policies": policies})
    except ValidationError as error:
        raise ConfigError(f"{where}: {first_problem(error)}") from None
    for name, verifier in templates.verifiers.items():
        check_template(verifier.prompt_template, f"{where}: {name}")
    return templates


def one_line(error: Exception) -> str:
    return " ".join(str(error).split())
