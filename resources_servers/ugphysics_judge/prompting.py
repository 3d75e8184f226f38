"""Reading the UGPhysics judge's prompt file, checked when the server starts."""

from __future__ import annotations

from pathlib import Path

from nemo_gym.config_types import ConfigError
from nemo_gym.prompt import PromptConfig, load_prompt_config

PLACEHOLDERS = {"problem": "", "solution": "", "expected_answer": "", "generation": ""}


def load_judge_prompt(folder: Path, path: str) -> PromptConfig:
    """The prompt config at `path`, looked up in `folder` first, then where `prompt_config` paths are found
    (the current directory, then the repository root). Its templates may use only the four placeholders,
    so a broken prompt stops the server at startup rather than failing every verify."""
    local = folder / path
    located = str(local) if not Path(path).is_absolute() and local.is_file() else path
    try:
        prompt = load_prompt_config(located)
    except ConfigError as error:
        raise ConfigError(f"judge_prompt_path: {error}") from None
    for template in (prompt.system, prompt.user):
        try:
            (template or "").format_map(PLACEHOLDERS)
        except (KeyError, IndexError, ValueError) as error:
            raise ConfigError(
                f"judge_prompt_path: {located}: templates may use only {{problem}}, {{solution}}, "
                f"{{expected_answer}} and {{generation}} (literal braces doubled): {error!r}"
            ) from None
    return prompt
