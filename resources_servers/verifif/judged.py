"""VerifIF's judge validators (style, linguistic and situational instructions) and the judge's verdict.

Each judge instruction names the arguments a row must give; the judge is shown the instruction's name, a
one-line description written here, the row's arguments and the response, and ends its answer with
[[YES]] or [[NO]]. An answer with neither marker is unusable (a `bad_response` judge failure).
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

JUDGE_INSTRUCTIONS: dict[str, tuple[tuple[str, ...], str]] = {
    "stylistic:tone_formality": (("tone_level",), "the response keeps the requested level of formality"),
    "stylistic:emotional_tone": (("emotion_type",), "the response conveys the requested emotion"),
    "stylistic:politeness": (("politeness_degree",), "the response is as polite as requested"),
    "stylistic:descriptive_level": (("description_degree",), "the response is as descriptive as requested"),
    "stylistic:literary_style": (("style_type",), "the response is written in the requested literary style"),
    "stylistic:sentence_tone_consistency": (("tone_type",), "every sentence keeps the requested tone"),
    "stylistic:voice": (("voice_type",), "the response uses the requested grammatical voice"),
    "stylistic:figurative_language": (
        ("figure_type", "relation", "num_occurrences"),
        "the response uses the figure of speech the requested number of times",
    ),
    "stylistic:tone_transition": (
        ("from_tone", "to_tone", "transition_position"),
        "the tone moves from one tone to the other at the requested point",
    ),
    "stylistic:emotive_adjectives": (
        ("relation", "num_adjectives"),
        "the response uses the requested number of emotionally charged adjectives",
    ),
    "stylistic:sensory_detail": (
        ("sense_type", "relation", "num_details"),
        "the response gives the requested number of details appealing to the sense",
    ),
    "stylistic:rhythm_pattern": (("rhythm_type",), "the sentences follow the requested rhythm"),
    "linguistic:pragmatic_context": (("context_type",), "the wording fits the requested pragmatic context"),
    "linguistic:speech_act": (("act_type",), "the response performs the requested speech act"),
    "linguistic:syntactic_pattern": (("pattern_type",), "the sentences use the requested syntactic pattern"),
    "linguistic:grammatical_mood": (("mood_type",), "the response is in the requested grammatical mood"),
    "linguistic:morphological_form": (("form_type",), "the response uses the requested word forms"),
    "linguistic:phonological_pattern": (("phonology_type",), "the wording shows the requested sound pattern"),
    "linguistic:sound_symbolism": (
        ("relation", "num_symbolisms"),
        "the response uses the requested number of sound-symbolic words (onomatopoeia and the like)",
    ),
    "situation:role_based": (("role_type",), "the response speaks from the requested role"),
    "situation:task_specific": (("task_type",), "the response does the requested kind of task"),
    "situation:audience_alignment": (("audience_type",), "the response suits the requested audience"),
    "situation:contextual_scenario": (("scenario_type",), "the response fits the requested scenario"),
    "situation:perspective": (
        ("perspective_type",),
        "the response keeps the requested narrative perspective",
    ),
    "situation:emotional_alignment": (
        ("emotion_type",),
        "the response matches the requested emotional state",
    ),
    "situation:cultural_context": (
        ("culture_type", "adaptation_level"),
        "the response is adapted to the culture to the requested degree",
    ),
    "situation:temporal_context": (("time_frame",), "the response is set in the requested time frame"),
    "situation:environment_setting": (("environment_type",), "the response fits the requested setting"),
}

VERDICT = re.compile(r"\[\[(YES|NO)\]\]")
THINKING = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.DOTALL)
OPEN_THINKING = re.compile(r"^.*?</think(?:ing)?>", re.DOTALL)


def visible_text(text: str) -> str:
    """The text without reasoning blocks (also one whose opening tag was part of the prompt)."""
    return OPEN_THINKING.sub("", THINKING.sub("", text)).strip()


def parse_verdict(judge_text: str) -> bool | None:
    """The judge's last [[YES]]/[[NO]] marker outside reasoning blocks, None without one."""
    markers = VERDICT.findall(visible_text(judge_text))
    return markers[-1] == "YES" if markers else None


def load_prompts(folder: Path, relative: str) -> dict[str, str]:
    """The `instruction` and `question` templates of the prompt file (relative to the folder)."""
    path = Path(relative) if Path(relative).is_absolute() else folder / relative
    prompts = yaml.safe_load(path.read_text(encoding="utf-8"))
    missing = {"instruction", "question"} - set(prompts if isinstance(prompts, dict) else {})
    if missing:
        raise ValueError(f"{path}: no {sorted(missing)} prompt")
    return {key: str(prompts[key]) for key in ("instruction", "question")}
