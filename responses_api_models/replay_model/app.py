"""replay_model: a model server that answers from recorded rollouts instead of calling an LLM.

Each line of a rollouts JSONL file (what `gym eval run` writes) holds a task's `responses_create_params`
and the recorded `response`, whose `output` is the whole trajectory: model items (messages, function
calls, reasoning) interleaved with the items the environment added (tool outputs, user turns). Given a
request whose `input` is a recording's input followed by a prefix of that trajectory, the server answers
with the next model turn of the recording. This gives offline demos (no key), deterministic regression
tests of environments and re-verification of stored rollouts.

Items are compared in a normalised form (see `normalise_item`), so formatting that a tool, an agent or a
JSON serialiser may change (spacing of JSON, string vs list content, ids, statuses) does not matter.
All recordings are indexed at startup in a trie keyed by normalised items, so a lookup costs one dict
access per request item, whatever the number of recordings.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from fastapi import FastAPI, Request, Response
from pydantic import Field, PrivateAttr, ValidationError, field_validator

from nemo_gym.base_responses_api_model import BaseResponsesAPIModelConfig, SimpleResponsesAPIModel
from nemo_gym.config_types import ConfigError
from nemo_gym.errors import error_body
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming

logger = logging.getLogger("replay_model")

# The folder holding `responses_api_models/`: relative rollout paths are also looked up from there.
REPO_ROOT = Path(__file__).resolve().parents[2]
MAX_SHOWN_CHARS = 160
CONTEXT_BEFORE_DIFFERENCE = 40
PREVIEW_CHARS = 60

# A normalised item: a tuple of strings (and tuples of strings), hashable so it can key the index.
Norm = tuple[Any, ...]


# ---- normalisation ----------------------------------------------------------------------------------------


def canonical_text(value: Any) -> str:
    """JSON text in one spelling (sorted keys, no spaces), or stripped text when it is not JSON.

    Tool outputs and call arguments are JSON written by different serialisers; `{"a": 1}` from one tool
    build and `{"a":1}` from another are the same observation.
    """
    if not isinstance(value, str):
        return _canonical_json(value)
    try:
        parsed = json.loads(value)
    except ValueError:
        return value.strip()
    return _canonical_json(parsed)


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _part_texts(parts: Any) -> tuple[str, tuple[str, ...]]:
    """The text of content parts joined, plus the non-text parts (images, files) in canonical JSON."""
    if parts is None:
        return "", ()
    if isinstance(parts, str):
        return parts, ()
    texts: list[str] = []
    others: list[str] = []
    for part in parts:
        if isinstance(part, Mapping) and isinstance(part.get("text", part.get("refusal")), str):
            texts.append(part.get("text", part.get("refusal")))
        else:
            others.append(_canonical_json(part))
    return "".join(texts), tuple(others)


def normalise_item(item: Mapping[str, Any]) -> Norm:
    """The parts of an item that carry meaning; ids, statuses, call ids and annotations are ignored.

    A message is its role and text (a string content equals text parts with the same text, and `type`
    may be absent); a function call is its name and arguments parsed as JSON; a tool output is its output
    parsed as JSON when it is JSON, else its stripped text; reasoning is its summary and content texts.
    """
    kind = item.get("type") or "message"
    if kind == "message":
        text, others = _part_texts(item.get("content"))
        return ("message", item.get("role"), text, others)
    if kind == "function_call":
        return ("function_call", item.get("name"), canonical_text(item.get("arguments")))
    if kind == "function_call_output":
        output = item.get("output")
        return (
            "function_call_output",
            canonical_text(output if isinstance(output, str) else _part_texts(output)[0]),
        )
    if kind == "reasoning":
        summary = tuple(_part_texts([part])[0] for part in item.get("summary") or ())
        content = tuple(_part_texts([part])[0] for part in item.get("content") or ())
        return ("reasoning", summary, content)
    rest = {key: value for key, value in item.items() if key not in ("id", "status")}
    return (str(kind), _canonical_json(rest))


def normalise_input(value: str | list[Mapping[str, Any]], instructions: str | None = None) -> list[Norm]:
    """A request's `input` as normalised items; `instructions` count as a leading item of the task."""
    items = [{"role": "user", "content": value}] if isinstance(value, str) else value
    leading: list[Norm] = [("instructions", instructions)] if instructions else []
    return leading + [normalise_item(item) for item in items]


def is_model_item(norm: Norm) -> bool:
    """Items a model produces; every other item (tool output, user turn) comes from the environment."""
    return norm[0] in ("function_call", "reasoning") or (norm[0] == "message" and norm[1] == "assistant")


def describe(norm: Norm | None) -> tuple[str, str]:
    """A short label and a body for error messages, e.g. ("function_call get_weather", '{"city":"SF"}')."""
    if norm is None:
        return "end of input", ""
    kind = norm[0]
    if kind == "message":
        extra = f" +{len(norm[3])} non-text part(s)" if norm[3] else ""
        return f"message[{norm[1]}]{extra}", json.dumps(norm[2], ensure_ascii=False)
    if kind == "function_call":
        return f"function_call {norm[1]}", norm[2]
    if kind == "reasoning":
        return "reasoning", json.dumps(" ".join(norm[1] + norm[2]), ensure_ascii=False)
    if kind == "instructions":
        return "instructions", json.dumps(norm[1], ensure_ascii=False)
    return str(kind), str(norm[1])


def contrast(expected: Norm | None, got: Norm | None) -> tuple[str, str]:
    """Both items described and cut to a window starting just before their first difference."""
    (expected_label, expected_body), (got_label, got_body) = describe(expected), describe(got)
    cut = 0
    if expected_label == got_label:
        common = len(os.path.commonprefix([expected_body, got_body]))
        cut = max(0, common - CONTEXT_BEFORE_DIFFERENCE)
    return (
        f"{expected_label} {_clip(expected_body, cut)}".strip(),
        f"{got_label} {_clip(got_body, cut)}".strip(),
    )


def _clip(text: str, start: int) -> str:
    shown = ("…" + text[start:]) if start else text
    return shown if len(shown) <= MAX_SHOWN_CHARS else shown[: MAX_SHOWN_CHARS - 1] + "…"


# ---- recordings and their index ---------------------------------------------------------------------------


class RolloutsFileError(ConfigError):
    """A rollouts file that cannot be used; the message names the file (and line) and is one line."""


@dataclass(frozen=True)
class Recording:
    source: str  # "<file>:<line>", how messages name the task
    preview: str  # the start of the last user text, to recognise the task
    items: tuple[Norm, ...]  # normalised input followed by normalised output
    input_len: int
    response: dict[str, Any]  # the recorded response, raw, so answers reproduce it exactly
    last_model_end: int  # index just after the recording's last model item: the turn that carries usage

    def turn_number(self, depth: int) -> int:
        """Which model turn (1-based) a request with `depth` matching items asks for."""
        runs = sum(
            1
            for index in range(self.input_len, depth)
            if is_model_item(self.items[index])
            and (index == self.input_len or not is_model_item(self.items[index - 1]))
        )
        return runs + 1

    @property
    def label(self) -> str:
        return f"{self.source} ({self.preview!r})"


@dataclass(slots=True)
class _Node:
    children: dict[Norm, _Node] = field(default_factory=dict)
    recordings: list[int] = field(default_factory=list)  # indexes of the recordings through here, file order


@dataclass(frozen=True)
class Turn:
    recording: Recording
    start: int
    end: int


@dataclass(frozen=True)
class Miss:
    status: int
    error_type: str
    message: str
    cause: dict[str, Any]


class ReplayIndex:
    """A trie of normalised trajectories: the path of a request's items ends at the node whose first
    recording (in file order) continues with the turn to answer."""

    def __init__(self) -> None:
        self.recordings: list[Recording] = []
        self._root = _Node()

    def add(self, recording: Recording) -> None:
        number = len(self.recordings)
        self.recordings.append(recording)
        node = self._root
        node.recordings.append(number)
        for item in recording.items:
            node = node.children.setdefault(item, _Node())
            node.recordings.append(number)

    def lookup(self, items: list[Norm]) -> Turn | Miss:
        # Messages count request items as the caller sent them, without the `instructions` pseudo-item.
        leading = 1 if items and items[0][0] == "instructions" else 0
        node = self._root
        for depth, item in enumerate(items):
            child = node.children.get(item)
            if child is None:
                return self._diverged(node, depth, items, leading)
            node = child
        return self._next_turn(node, len(items), leading)

    def _tasks_at(self, node: _Node, depth: int) -> list[Recording]:
        """Recordings through `node` whose whole input lies within the first `depth` items."""
        return [self.recordings[n] for n in node.recordings if self.recordings[n].input_len <= depth]

    def _next_turn(self, node: _Node, depth: int, leading: int) -> Turn | Miss:
        tasks = self._tasks_at(node, depth)
        if not tasks:
            return self._unknown_task(node, depth, None, leading)
        ongoing = [recording for recording in tasks if depth < len(recording.items)]
        if not ongoing:
            return self._finished(tasks[0], depth, leading)
        recording = ongoing[0]
        if not is_model_item(recording.items[depth]):
            return self._mismatch(recording, depth, None, leading)
        end = depth
        while end < len(recording.items) and is_model_item(recording.items[end]):
            end += 1
        return Turn(recording, depth, end)

    def _diverged(self, node: _Node, depth: int, items: list[Norm], leading: int) -> Miss:
        tasks = self._tasks_at(node, depth)
        if not tasks:
            return self._unknown_task(node, depth, items[depth], leading)
        ongoing = [recording for recording in tasks if depth < len(recording.items)]
        if not ongoing:
            return self._finished(tasks[0], depth, leading)
        return self._mismatch(ongoing[0], depth, items[depth], leading)

    def _unknown_task(self, node: _Node, depth: int, got: Norm | None, leading: int) -> Miss:
        if depth == 0:
            # Nothing matched at all: no recording is closer than another.
            got_text = contrast(None, got)[1]
            message = (
                f"unknown task: no recording starts with {got_text}" if got else "unknown task: empty input"
            )
            cause = {"item_index": None if got and got[0] == "instructions" else 0, "got": got_text}
            return Miss(404, "unknown_task", message, cause)
        closest = self.recordings[node.recordings[0]]
        expected = closest.items[depth] if depth < len(closest.items) else None
        expected_text, got_text = contrast(expected, got)
        message = (
            f"unknown task: no recording has this input; the closest, {closest.label}, first differs at "
            f"input item {depth - leading}: expected {expected_text}, got {got_text}"
        )
        cause = {
            "closest_task": closest.source,
            "item_index": depth - leading,
            "expected": expected_text,
            "got": got_text,
        }
        return Miss(404, "unknown_task", message, cause)

    def _mismatch(self, recording: Recording, depth: int, got: Norm | None, leading: int) -> Miss:
        turn = recording.turn_number(depth)
        item_index = depth - leading
        expected_text, got_text = contrast(recording.items[depth], got)
        if got is None:
            difference = (
                f"the input ends before item {item_index}, which the recording has as {expected_text}"
            )
        else:
            difference = f"input item {item_index} differs: expected {expected_text}, got {got_text}"
        message = f"trajectory diverged from task {recording.label} before turn {turn}: {difference}"
        cause = {
            "task": recording.source,
            "turn": turn,
            "item_index": item_index,
            "expected": expected_text,
            "got": got_text,
        }
        return Miss(409, "trajectory_diverged", message, cause)

    def _finished(self, recording: Recording, depth: int, leading: int) -> Miss:
        turns = recording.turn_number(len(recording.items)) - 1
        message = (
            f"recording finished: task {recording.label} ended after {turns} model turn(s); the request's "
            f"first {depth - leading} input items already replay all of it, there is no next turn"
        )
        cause = {"task": recording.source, "turns": turns, "item_index": depth - leading}
        return Miss(409, "recording_finished", message, cause)


# ---- loading --------------------------------------------------------------------------------------------


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
        problem = error.errors()[0]
        raise RolloutsFileError(
            f"{source}: the recorded response is not a valid Response: "
            f"{'.'.join(map(str, problem['loc']))}: {problem['msg']}"
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
    )


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
        except OSError as error:
            raise RolloutsFileError(f"cannot read rollouts file {raw}: {error.strerror or error}") from None
    if not index.recordings:
        raise RolloutsFileError(f"no rollouts in {', '.join(raw_paths)}")
    return index


# ---- server -----------------------------------------------------------------------------------------------


class ReplayModelConfig(BaseResponsesAPIModelConfig):
    rollouts_jsonl_fpath: list[str] = Field(
        description="rollouts JSONL file(s); relative paths are tried from the current directory, "
        "then from the repository root"
    )

    @field_validator("rollouts_jsonl_fpath", mode="before")
    @classmethod
    def _one_path_is_a_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


class ReplayModel(SimpleResponsesAPIModel):
    config: ReplayModelConfig

    _index: ReplayIndex | None = PrivateAttr(default=None)

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        self._index = load_index(self.config.rollouts_jsonl_fpath)
        logger.info(
            "%s: %d recording(s) from %s",
            self.server_label,
            len(self._index.recordings),
            ", ".join(self.config.rollouts_jsonl_fpath),
        )
        return app

    @property
    def index(self) -> ReplayIndex:
        if self._index is None:
            self._index = load_index(self.config.rollouts_jsonl_fpath)
        return self._index

    async def responses(self, request: Request, body: NeMoGymResponseCreateParamsNonStreaming) -> Response:
        """The next recorded model turn (`model` is ignored); 404/409 with the differing item otherwise.

        Answers are sent as recorded (not re-serialised through the response model) so that the replayed
        items are byte-for-byte the stored ones.
        """
        request_input = body.model_dump(mode="json", exclude_unset=True)["input"]
        found = self.index.lookup(normalise_input(request_input, body.instructions))
        if isinstance(found, Miss):
            logger.warning("%s: %s", self.server_label, found.message)
            return self._error(found.status, found.error_type, found.message, found.cause)
        return Response(orjson.dumps(turn_response(found)), media_type="application/json")

    async def chat_completions(self, request: Request) -> Response:
        """Not replayed: recordings are Responses API trajectories, and a chat transcript loses the item
        boundaries (reasoning, call ids) the matching relies on. A 404, as for a path this server lacks:
        the request is fine, it went to the wrong route (a 5xx would look like a server fault)."""
        message = (
            "replay_model only replays Responses API recordings: POST /v1/responses instead "
            "(SimpleAgent and the other Gym agents already do)"
        )
        return self._error(404, "not_replayed", message)

    def _error(self, status: int, error_type: str, message: str, cause: Any = None) -> Response:
        body = error_body(error_type, status, message, self.server_label, cause)
        return Response(orjson.dumps(body), status_code=status, media_type="application/json")


def turn_response(turn: Turn) -> dict[str, Any]:
    """The recorded response cut down to one turn, with a fresh id.

    Only the turn that ends the recording carries the recorded usage (and any `incomplete_details`), so
    summing usage over a replayed rollout gives the recorded total, and an agent does not stop early.
    """
    recording = turn.recording
    recorded = recording.response
    offset = recording.input_len
    last = turn.end == recording.last_model_end
    answer = {
        **recorded,
        "id": f"resp_replay_{uuid.uuid4().hex}",
        "created_at": time.time(),
        "output": recorded["output"][turn.start - offset : turn.end - offset],
        "usage": recorded.get("usage") if last else None,
    }
    if not last:
        answer["status"] = "completed"
        answer["incomplete_details"] = None
    return answer


if __name__ == "__main__":
    ReplayModel.run_webserver()
