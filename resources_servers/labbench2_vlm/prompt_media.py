"""Checks of the pictures a row hands the policy: every `input_image` data URL in the prompt must decode.

A row whose figure is truncated or not an image would be graded as if the policy had seen it; refusing it
with a 422 that points at the item makes the broken row visible instead of a silent low score.
"""

from __future__ import annotations

import base64
import binascii
import io
from typing import Any

from fastapi.exceptions import RequestValidationError
from PIL import Image, UnidentifiedImageError

from nemo_gym.openai_utils import NeMoGymResponseCreateParamsNonStreaming

DATA_URL_PREFIX = "data:"


def image_problem(url: str) -> str | None:
    """What is wrong with one `image_url`, or None. Remote URLs are left to the policy's server."""
    if not url.startswith(DATA_URL_PREFIX):
        return None if url.startswith(("http://", "https://")) else "not a data: or http(s) URL"
    header, _, payload = url.partition(",")
    if not header.startswith("data:image/") or not header.endswith(";base64"):
        return f"a data URL must be data:image/<format>;base64,...: got {header[:60]!r}"
    try:
        raw = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return "its base64 payload does not decode"
    try:
        with Image.open(io.BytesIO(raw)) as picture:
            picture.verify()
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
        return f"its bytes are not a readable image ({type(error).__name__})"
    return None


def image_problems(params: NeMoGymResponseCreateParamsNonStreaming) -> list[dict[str, Any]]:
    """One 422-style problem per unreadable `input_image` item of the prompt, located by message and part."""
    dumped = params.model_dump(mode="json")
    messages = dumped.get("input")
    problems: list[dict[str, Any]] = []
    if not isinstance(messages, list):
        return problems
    for m, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for p, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "input_image":
                continue
            url = part.get("image_url")
            if not isinstance(url, str) or not url:
                if part.get("file_id"):
                    continue
                problem = "an input_image needs an image_url (or a file_id)"
            else:
                problem = image_problem(url)
            if problem is not None:
                problems.append(
                    {
                        "loc": ("body", "responses_create_params", "input", m, "content", p, "image_url"),
                        "msg": f"unreadable image: {problem}",
                        "type": "value_error",
                    }
                )
    return problems


def require_readable_images(params: NeMoGymResponseCreateParamsNonStreaming) -> None:
    """Raise the standard 422 naming every unreadable image of the prompt."""
    problems = image_problems(params)
    if problems:
        raise RequestValidationError(problems)
