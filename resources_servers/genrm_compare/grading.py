"""Pure pieces of genrm_compare: which pairs to compare, reading a GenRM verdict, and turning the verdicts
of a cohort into one reward per member."""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from nemo_gym.config_types import ConfigError

TIE_RANKING = 3.5  # rankings run 1 (response_1 far better) .. 6 (response_2 far better)
_FENCED = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


def comparison_pairs(strategy: str, size: int) -> list[tuple[int, int]]:
    """`circular`: each member against the next, wrapping round (size pairs); `all_pairs`: every unordered
    pair once. A cohort of one has nothing to compare."""
    if size < 2:
        return []
    if strategy == "all_pairs":
        return list(itertools.combinations(range(size), 2))
    return [(index, (index + 1) % size) for index in range(size)]


@dataclass(frozen=True)
class Verdict:
    score_1: float
    score_2: float
    ranking: float


def _objects(text: str) -> list[str]:
    """Balanced `{...}` spans of `text`, outermost only, in order (braces inside strings ignored)."""
    spans, depth, start, in_string, escaped = [], 0, 0, False, False
    for position, char in enumerate(text):
        if in_string:
            escaped = not escaped and char == "\\"
            if char == '"' and not escaped:
                in_string = False
            continue
        if char == '"' and depth:
            in_string = True
        elif char == "{":
            start = position if depth == 0 else start
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth == 0:
                spans.append(text[start : position + 1])
    return spans


def parse_verdict(text: str, default_score: float, default_ranking: float) -> Verdict | None:
    """The verdict in a GenRM answer: the first fenced JSON object with a score or ranking key, else the last
    such object anywhere. A missing key takes its default; None when no object carries any of them."""
    candidates = [span for block in _FENCED.findall(text) for span in _objects(block)][:1]
    candidates += list(reversed(_objects(text)))
    for span in candidates:
        try:
            found = json.loads(span)
        except json.JSONDecodeError:
            continue
        if isinstance(found, dict) and isinstance(found.get("overall"), dict):
            found = found["overall"]
        if not isinstance(found, dict) or not {"score_1", "score_2", "ranking"} & found.keys():
            continue
        try:
            return Verdict(
                float(found.get("score_1", default_score)),
                float(found.get("score_2", default_score)),
                float(found.get("ranking", default_ranking)),
            )
        except (TypeError, ValueError):
            continue
    return None


def simple_tiebreaker(
    size: int, verdicts: list[tuple[int, int, Verdict]], default_score: float
) -> tuple[list[float], float]:
    """Each member's mean score over the comparisons it took part in; equal scores are split by the
    ranking's distance from the tie point. Also the share of comparisons that needed the tie-break."""
    totals, counts, ties = [0.0] * size, [0] * size, 0
    for first, second, verdict in verdicts:
        score_1, score_2 = verdict.score_1, verdict.score_2
        if score_1 == score_2:
            ties += 1
            shift = TIE_RANKING - verdict.ranking
            score_1, score_2 = score_1 + shift, score_2 - shift
        totals[first] += score_1
        totals[second] += score_2
        counts[first] += 1
        counts[second] += 1
    rewards = [totals[i] / counts[i] if counts[i] else default_score for i in range(size)]
    return rewards, ties / len(verdicts) if verdicts else 0.0


def load_prompt(folder: Path, path: str) -> str:
    """The `user` template of the YAML prompt file, checked to fill with its three placeholders."""
    full_path = Path(path) if Path(path).is_absolute() else folder / path
    try:
        prompt = yaml.safe_load(full_path.read_text(encoding="utf-8"))["user"]
        prompt.format(conversation="", response_1="", response_2="")
    except OSError as error:
        raise ConfigError(f"comparison_prompt_path: cannot read {full_path} ({error.strerror})") from None
    except (yaml.YAMLError, TypeError, KeyError, IndexError, ValueError, AttributeError) as error:
        raise ConfigError(
            f"comparison_prompt_path: {full_path} must be YAML with a `user` prompt using only "
            f"{{conversation}}, {{response_1}} and {{response_2}} (literal braces doubled): {error!r}"
        ) from None
    return prompt
