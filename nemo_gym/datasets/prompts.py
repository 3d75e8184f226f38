"""Prompt configs: a YAML pair of templates, `user` and optionally `system`, that builds a row's model input.

Keeping the prompt out of the data lets one dataset be tried with several prompts. Templates are filled
with `str.format_map(row)`: `{question}` takes the row's `question` field and `{{` / `}}` stand for literal
braces. A row that already carries a non-empty `responses_create_params.input` is refused: the prompt must
come from one place, and silently preferring one of the two would hide a data mistake.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson
import yaml
from pydantic import BaseModel, Field, ValidationError

from nemo_gym.config.cli_models import BaseNeMoGymCLIConfig
from nemo_gym.config.errors import ConfigError
from nemo_gym.config.jsonl import iter_jsonl, write_atomically
from nemo_gym.config.settings import locate_data_file

RUN_REQUEST_KEY = "responses_create_params"
PROMPT_CONFIG_KEY = "prompt_config"
PROMPT_CONFIG_USED_KEY = "prompt_config_used"


class PromptConfig(BaseModel):
    """The templates of one prompt YAML file."""

    user: str
    system: str | None = None


@lru_cache(maxsize=64)
def load_prompt_config(path: str) -> PromptConfig:
    """The prompt config at `path` (relative: the current directory first, then the install root).

    Cached, since every row of a dataset names the same file. A file that is not valid YAML or lacks a
    `user` template is a ConfigError naming the file.
    """
    located = locate_data_file(path, PROMPT_CONFIG_KEY)
    try:
        return PromptConfig.model_validate(yaml.safe_load(located.read_text()))
    except yaml.YAMLError as error:
        raise ConfigError(f"{PROMPT_CONFIG_KEY} {located}: not valid YAML ({error})") from error
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the file"
        raise ConfigError(
            f"{PROMPT_CONFIG_KEY} {located}: needs a `user` template string and optionally a `system` one "
            f"({where}: {first['msg']})"
        ) from error


def load_judge_prompt_file(folder: Path, path: str, placeholders: Sequence[str]) -> PromptConfig:
    """A judge's prompt config at `path`: in the server's `folder` when the file is there, else where
    `prompt_config` paths are found (the current directory, then the repository root). Its templates must
    fill with `placeholders` alone, so a broken prompt stops the server at start instead of failing every
    verify."""
    local = folder / path
    located = str(local) if not Path(path).is_absolute() and local.is_file() else path
    try:
        prompt = load_prompt_config(located)
    except ConfigError as error:
        raise ConfigError(f"judge_prompt_path: {error}") from None
    names = [f"{{{name}}}" for name in placeholders]
    allowed = f"{', '.join(names[:-1])} and {names[-1]}" if len(names) > 1 else names[0]
    for template in (prompt.system, prompt.user):
        try:
            (template or "").format_map(dict.fromkeys(placeholders, ""))
        except (KeyError, IndexError, ValueError) as error:
            raise ConfigError(
                f"judge_prompt_path: {located}: templates may use only {allowed} (literal braces doubled): "
                f"{error!r}"
            ) from None
    return prompt


def fill_prompt(prompt_config: PromptConfig, row: dict[str, Any]) -> list[dict[str, str]]:
    """The system message (when the config has one), then the user message, filled from `row`.

    A placeholder the row lacks is a KeyError naming it and the fields the row has, so a typo in either
    the template or the data is found at once.
    """
    templates = [("system", prompt_config.system), ("user", prompt_config.user)]
    try:
        return [
            {"role": role, "content": template.format_map(row)}
            for role, template in templates
            if template is not None
        ]
    except KeyError as error:
        raise KeyError(
            f"{PROMPT_CONFIG_KEY} needs the field {error} that the row lacks; the row has {list(row)}"
        ) from None


def has_prompt_input(row: dict[str, Any]) -> bool:
    """Whether the row brings its own model input, which a prompt config would overwrite."""
    params = row.get(RUN_REQUEST_KEY)
    return isinstance(params, dict) and bool(params.get("input"))


def validate_prompt_compatibility(rows: list[dict[str, Any]], prompt_config: PromptConfig) -> None:
    """Refuse rows that already have an input, listing all their indices in one ValueError."""
    clashing = [index for index, row in enumerate(rows) if has_prompt_input(row)]
    if clashing:
        raise ValueError(
            f"rows {clashing} already have {RUN_REQUEST_KEY}.input, and a {PROMPT_CONFIG_KEY} is given: "
            "the prompt comes from one of the two, so remove the other"
        )


def apply_prompt_to_row(row: dict[str, Any], prompt_config: PromptConfig) -> dict[str, Any]:
    """A copy of `row` whose `responses_create_params.input` is the filled prompt (other params kept)."""
    params = row.get(RUN_REQUEST_KEY)
    kept = dict(params) if isinstance(params, dict) else {}
    return {**row, RUN_REQUEST_KEY: {**kept, "input": fill_prompt(prompt_config, row)}}


def prompted_row(row: dict[str, Any], prompt_config: PromptConfig, where: str) -> dict[str, Any]:
    """`apply_prompt_to_row` for one row of a file read as a stream, a mistake being a ConfigError that
    names the row's place (`where`, as `file:line`), which is what a command prints."""
    if has_prompt_input(row):
        raise ConfigError(
            f"{where}: the row already has {RUN_REQUEST_KEY}.input; with {PROMPT_CONFIG_KEY} the "
            "prompt comes from the templates, so remove one of the two"
        )
    try:
        return apply_prompt_to_row(row, prompt_config)
    except KeyError as error:
        raise ConfigError(f"{where}: {error.args[0]}") from None


def materialize_prompts(input_jsonl: str, prompt_config: str, output_jsonl: str) -> None:
    """Write `output_jsonl`: every row of `input_jsonl` with its prompt applied and the resolved path of
    the prompt config in `prompt_config_used`.

    All rows are checked before anything is written, and the file is replaced atomically, so a mistake or
    a crash never leaves a partial output behind.
    """
    templates = load_prompt_config(prompt_config)
    used = str(locate_data_file(prompt_config, PROMPT_CONFIG_KEY))
    rows = [line.row for line in iter_jsonl(locate_data_file(input_jsonl, "input_jsonl_fpath"))]
    validate_prompt_compatibility(rows, templates)
    output = Path(output_jsonl)
    output.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        orjson.dumps({**apply_prompt_to_row(row, templates), PROMPT_CONFIG_USED_KEY: used}) + b"\n"
        for row in rows
    ]
    write_atomically(output, lines)


class MaterializePromptsConfig(BaseNeMoGymCLIConfig):
    """Apply a prompt config to a JSONL dataset, writing rows whose `responses_create_params.input` is set.

    Example: `+input_jsonl_fpath=data/raw.jsonl +prompt_config=prompts/qa.yaml +output_jsonl_fpath=out.jsonl`
    """

    input_jsonl_fpath: str = Field(description="rows without responses_create_params.input")
    prompt_config: str = Field(description="the prompt YAML (`user`, optionally `system`) to apply")
    output_jsonl_fpath: str = Field(description="where the rows with their prompt are written")
