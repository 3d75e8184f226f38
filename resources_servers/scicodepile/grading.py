"""Reading a SciCodePile answer and the runner's verdict, outside the sandbox.

`extract_code` follows NeMo Gym's extractor (itself NeMo-Skills' `preprocess_code`) so that scores stay
comparable with NeMo Gym's scicodepile and bigcodebench servers, quirks included; it is a few `find`s,
linear in the text.
"""

from __future__ import annotations

import json
from typing import Any

THINK_CLOSE = "</think>"
PYTHON_FENCE = "```python"
FENCE = "```"


def extract_code(text: str) -> str:
    """The model's code: after the first `</think>` (if any), the content of the last ```` ```python ````
    block; without one, what follows the last ```` ``` ```` up to another (so an untagged block, whose
    last fence is its closing one, gives ""; NeMo Gym's quirk, kept); an opening fence that never closes
    gives ""; a text without any fence is taken whole. Surrounding whitespace is stripped."""
    text = text.replace("\r", "")
    if THINK_CLOSE in text:
        text = text.partition(THINK_CLOSE)[2]
    start, opener = text.rfind(PYTHON_FENCE), PYTHON_FENCE
    if start < 0:
        start, opener = text.rfind(FENCE), FENCE
    if start >= 0:
        rest = text[start + len(opener) :]
        end = rest.find(FENCE)
        text = rest[:end] if end >= 0 else ""
    return text.strip()


def read_verdict(stdout: str, token: str) -> dict[str, Any] | None:
    """The runner's last status line carrying `token` (`started` if the task never finished), or None if
    it wrote none. Lines without the token are not the runner's."""
    verdict = None
    for line in stdout.splitlines():
        try:
            parsed = json.loads(line)
        except ValueError:
            continue
        if (
            isinstance(parsed, dict)
            and parsed.get("token") == token
            and isinstance(parsed.get("status"), str)
        ):
            verdict = parsed
    return verdict


def encodable(value: Any) -> Any:
    """`value` with every string made encodable as UTF-8: an exception message can carry a lone surrogate
    (`raise ValueError('\\udcff')`), which would make the answer unserializable."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, dict):
        return {encodable(key): encodable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [encodable(item) for item in value]
    return value
