"""AA-LCR's pieces that need no server: the two judge protocols (prompt shape and verdict format), the
dataset versions each one belongs to, the judge prompts and the metrics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import yaml

from nemo_gym.config_types import ConfigError
from nemo_gym.envkit.pass_at_k_metrics import compute_pass_majority_metrics, compute_subset_metrics

JudgeProtocol = Literal["legacy_v1_0", "official_v1_1"]
Verdict = Literal["CORRECT", "INCORRECT"]
VERDICTS: tuple[Verdict, ...] = ("CORRECT", "INCORRECT")
Band = Literal["<80k", "80k-100k", "100k-110k", "110k-128k", "128k+"]
# The per-band reward field each context-length band mirrors its reward into.
BAND_FIELDS: dict[str, str] = {
    "<80k": "reward_lt_80k",
    "80k-100k": "reward_80k_100k",
    "100k-110k": "reward_100k_110k",
    "110k-128k": "reward_110k_128k",
    "128k+": "reward_128k_plus",
}
# Each protocol grades rows of one AA-LCR release: (aa_lcr_version, Hugging Face dataset commit).
PROTOCOL_DATASETS: dict[str, tuple[str, str]] = {
    "legacy_v1_0": ("1.0.0", "bdae010bbce259820c0e34c1d7cce210d966fb75"),
    "official_v1_1": ("1.1", "9a77ef56b717057ade24ceab4d273712a0b4f19e"),
}
DEFAULT_PROMPTS: dict[str, str] = {
    "legacy_v1_0": "prompts/legacy_v1_0.yaml",
    "official_v1_1": "prompts/official_v1_1.yaml",
}
PLACEHOLDERS = {"question": "", "official_answer": "", "candidate_answer": ""}
WRAPPING = "*_`\"'.!: \t\n"


def parse_verdict(judge_text: str, protocol: str) -> Verdict | str:
    """The judge's verdict, or what is wrong with its answer (a string that is not a verdict).

    legacy_v1_0: the answer is the word CORRECT or INCORRECT alone (markdown, quotes and a final full stop
    around it ignored). official_v1_1: the answer is a JSON object whose only key `verdict` is one of them.
    """
    text = judge_text.strip()
    if protocol == "legacy_v1_0":
        word = text.strip(WRAPPING)
        return word if word in VERDICTS else f"the judge's answer is not CORRECT or INCORRECT: {text[:100]!r}"
    try:
        document = json.loads(text)
    except ValueError:
        return f"the judge's answer is not JSON: {text[:100]!r}"
    if not isinstance(document, dict) or set(document) != {"verdict"}:
        return f"the judge's JSON must hold exactly one key, `verdict`: {text[:100]!r}"
    verdict = document["verdict"]
    return verdict if verdict in VERDICTS else f"the judge's verdict is not CORRECT or INCORRECT: {verdict!r}"


def checked_template(template: Any, where: str) -> str:
    """`template` if it is a prompt using only {question}, {official_answer} and {candidate_answer}; else a
    ConfigError naming `where`, so a broken prompt stops the server instead of failing every verify."""
    try:
        template.format(**PLACEHOLDERS)
    except (AttributeError, KeyError, IndexError, ValueError) as error:
        raise ConfigError(
            f"{where} must be a prompt using only the placeholders {{question}}, {{official_answer}} and "
            f"{{candidate_answer}} (literal braces doubled): {error!r}"
        ) from None
    return template


def load_prompts(folder: Path, path: str) -> tuple[str | None, str]:
    """(system, user) prompts of the YAML file at `path` (relative to `folder`): `user` is required,
    `system` optional; both may use the placeholders."""
    full_path = Path(path) if Path(path).is_absolute() else folder / path
    try:
        document = yaml.safe_load(full_path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(f"judge_prompt_path: cannot read {full_path} ({error.strerror})") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"judge_prompt_path: {full_path} is not YAML: {error}") from None
    if not isinstance(document, dict) or "user" not in document:
        raise ConfigError(f"judge_prompt_path: {full_path} must be YAML with a `user` prompt")
    where = f"judge_prompt_path ({full_path})"
    system = document.get("system")
    return (
        None if system is None else checked_template(system, where),
        checked_template(document["user"], where),
    )


def aalcr_metrics(tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """pass@k and pass@1[avg-of-k] of the reward (`accuracy`) over the judged rollouts (failed judgments
    left out), overall and per context-length band (`<band>/pass@1[avg-of-k]/accuracy`), in percent."""
    judged = [task for task in ([r for r in run if r.get("judge_failure") is None] for run in tasks) if task]
    metrics, *_ = compute_pass_majority_metrics(judged)
    return {**metrics, **compute_subset_metrics(judged, "input_tokens_band")}
