"""Reading the IMO ProofBench judge's prompt file, checked when the server starts."""

from __future__ import annotations

from pathlib import Path

from nemo_gym.prompt import PromptConfig, load_judge_prompt_file

PLACEHOLDERS = ("problem", "reference_solution", "rubric", "predicted_answer")


def load_judge_prompt(folder: Path, path: str) -> PromptConfig:
    """The prompt config at `path` (in `folder` first), its templates using only the placeholders."""
    return load_judge_prompt_file(folder, path, PLACEHOLDERS)
