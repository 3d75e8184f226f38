"""Prompt configs: YAML `{system?, user}` templates that turn a raw data row into a model input.

The templates are filled with `str.format_map(row)`, so `{question}` takes the row's `question` field.
A row that already carries `responses_create_params.input` is refused: with a prompt config the prompt
comes from the templates, and silently preferring one of the two would hide a data mistake.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from nemo_gym.config_types import ConfigError
from nemo_gym.global_config import locate_data_file

RUN_REQUEST_KEY = "responses_create_params"


@dataclass
class PromptTemplates:
    user: str
    system: str | None = None

    @classmethod
    def load(cls, path_text: str) -> PromptTemplates:
        path = locate_data_file(path_text, "prompt_config")
        try:
            raw = yaml.safe_load(path.read_text())
        except yaml.YAMLError as error:
            raise ConfigError(f"prompt_config {path}: not valid YAML ({error})") from error
        if not isinstance(raw, dict) or not isinstance(raw.get("user"), str):
            raise ConfigError(
                f"prompt_config {path}: needs a `user` template string (and optionally `system`)"
            )
        system = raw.get("system")
        if system is not None and not isinstance(system, str):
            raise ConfigError(f"prompt_config {path}: `system` must be a template string")
        return cls(user=raw["user"], system=system)

    def apply(self, row: dict[str, Any], where: str) -> dict[str, Any]:
        """`row` with `responses_create_params.input` built from the templates."""
        params = dict(row.get(RUN_REQUEST_KEY) or {})
        if "input" in params:
            raise ConfigError(
                f"{where}: the row already has {RUN_REQUEST_KEY}.input; with prompt_config the "
                "prompt comes from the templates, so remove one of the two"
            )
        return {**row, RUN_REQUEST_KEY: {**params, "input": self._messages(row, where)}}

    def _messages(self, row: dict[str, Any], where: str) -> list[dict[str, str]]:
        messages = [("system", self.system), ("user", self.user)]
        try:
            return [
                {"role": role, "content": template.format_map(row)} for role, template in messages if template
            ]
        except KeyError as error:
            raise ConfigError(f"{where}: prompt_config needs the field {error} that the row lacks") from error
