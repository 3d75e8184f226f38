"""Reading rollouts files into a replay index; a line that cannot be replayed stops the server with a
one-line error naming its file and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from nemo_gym.config_types import ConfigError
from nemo_gym.openai_utils import NeMoGymResponse
from nemo_gym.wire.validation_errors import first_problem
from responses_api_models.replay_model.index import Recording, ReplayIndex
from responses_api_models.replay_model.normalise import is_model_item, normalise_input, normalise_item

# The folder holding `responses_api_models/`: relative rollout paths are also looked up from there.
REPO_ROOT = Path(__file__).resolve().parents[2]
PREVIEW_CHARS = 60


class RolloutsFileError(ConfigError):
    """A rollouts file that cannot be used; the message names the file (and line) and is one line."""


def resolve_rollouts_path(raw: str) -> Path:
    """An absolute path as is; a relative one from the current directory, then from the repository root
    (the launcher starts servers in their own folder, but configs name files from the root)."""
    path = Path(raw).expanduser()
    candidates = [path] if path.is_absolute() else [Path.cwd() / path, REPO_ROOT / path]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise RolloutsFileError(
        f"rollouts file not found: {raw} (looked in {', '.join(str(c) for c in candidates)})"
    )


def recording_from_row(row: Any, source: str) -> Recording:
    if not isinstance(row, dict):
        raise RolloutsFileError(f"{source}: a rollout line must be a JSON object")
    params, response = row.get("responses_create_params"), row.get("response")
    if not isinstance(params, dict) or not isinstance(params.get("input"), str | list):
        raise RolloutsFileError(f"{source}: no `responses_create_params.input` (is this a rollouts file?)")
    if not isinstance(response, dict):
        raise RolloutsFileError(f"{source}: no recorded `response` (is this a rollouts file?)")
    try:
        NeMoGymResponse.model_validate(response)
    except ValidationError as error:
        raise RolloutsFileError(
            f"{source}: the recorded response is not a valid Response: {first_problem(error)}"
        ) from None
    instructions = params.get("instructions")
    input_items = normalise_input(params["input"], instructions if isinstance(instructions, str) else None)
    items = (*input_items, *(normalise_item(item) for item in response["output"]))
    model_positions = [
        index for index, item in enumerate(items) if index >= len(input_items) and is_model_item(item)
    ]
    user_texts = [item[2] for item in input_items if item[0] == "message" and item[1] == "user"]
    preview = " ".join((user_texts[-1] if user_texts else "").split())[:PREVIEW_CHARS]
    return Recording(
        source=source,
        preview=preview,
        items=items,
        input_len=len(input_items),
        response=response,
        last_model_end=model_positions[-1] + 1 if model_positions else len(input_items),
        metadata=params.get("metadata") if isinstance(params.get("metadata"), dict) else None,
    )


def side_recordings(row: Any, source: str) -> list[Recording]:
    """The other model calls a rollout recorded, each a request and its answer: a verify's judge calls
    (`judge_evaluations`, also inside a reset/step environment's `info`) and a simulated user's calls
    (`user_model_calls`). A replay plays them too, so a judged or simulated-user environment replays
    offline."""
    if not isinstance(row, dict):
        return []
    info = row.get("info")
    lists = {
        "judge_evaluations": row.get("judge_evaluations"),
        "info.judge_evaluations": info.get("judge_evaluations") if isinstance(info, dict) else None,
        "user_model_calls": row.get("user_model_calls"),
    }
    return [
        recording_from_row(call, f"{source} {field}[{number}]")
        for field, calls in lists.items()
        if isinstance(calls, list)
        for number, call in enumerate(calls)
    ]


def load_index(raw_paths: list[str]) -> ReplayIndex:
    """Read and index every rollout; the first problem stops the server with its file and line."""
    index = ReplayIndex()
    for raw in raw_paths:
        path = resolve_rollouts_path(raw)
        try:
            with path.open("rb") as lines:
                for line_number, line in enumerate(lines, start=1):
                    if not line.strip():
                        continue
                    source = f"{raw}:{line_number}"
                    try:
                        row = orjson.loads(line.rstrip())
                    except orjson.JSONDecodeError as error:
                        raise RolloutsFileError(
                            f"{source}: not valid JSON at column {error.pos + 1}: {error.msg}"
                        ) from None
                    index.add(recording_from_row(row, source))
                    for recording in side_recordings(row, source):
                        index.add(recording)
        except OSError as error:
            raise RolloutsFileError(f"cannot read rollouts file {raw}: {error.strerror or error}") from None
    if not index.recordings:
        raise RolloutsFileError(f"no rollouts in {', '.join(raw_paths)}")
    return index
