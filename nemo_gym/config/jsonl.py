"""JSONL files that survive crashes: whole-line appends, atomic rewrites, torn-tail repair, and a reader
whose errors name the file and line."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import orjson

from nemo_gym.config.errors import ConfigError

# Keys rollout collection stamps on its records.
TASK_INDEX_KEY = "_ng_task_index"
ROLLOUT_INDEX_KEY = "_ng_rollout_index"
FAILURE_CLASS_KEY = "_ng_failure_class"


def rollout_key(row: dict[str, Any], where: str = "a row") -> tuple[int, int]:
    """(task, rollout) of a row written by rollout collection; both indices must be integers."""
    indices = []
    for key in (TASK_INDEX_KEY, ROLLOUT_INDEX_KEY):
        value = row.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(
                f"{where}: {key} must be an integer, got {value!r}; use files written by rollout collection, "
                "which stamp both indices"
            )
        indices.append(value)
    return indices[0], indices[1]


class JsonlLine(NamedTuple):
    number: int
    offset: int
    raw: bytes
    row: dict[str, Any]


def iter_jsonl(path: Path, limit: int | None = None) -> Iterator[JsonlLine]:
    """Each non-blank line with its number and byte offset; a bad line is a ConfigError naming it."""
    count = offset = 0
    with path.open("rb") as lines:
        for number, raw in enumerate(lines, start=1):
            start, offset = offset, offset + len(raw)
            stripped = raw.strip()
            if not stripped:
                continue
            if limit and count >= limit:
                return
            count += 1
            yield JsonlLine(number, start, stripped, _parsed_row(path, number, stripped))


def row_at(lines: BinaryIO, number: int, offset: int) -> dict[str, Any]:
    """The row `iter_jsonl` reported as line `number` at byte `offset`, read again from the open file: a
    streaming reader keeps positions, not rows. Errors name the file and line as `iter_jsonl` does."""
    lines.seek(offset)
    return _parsed_row(Path(lines.name), number, lines.readline().strip())


def _parsed_row(path: Path, number: int, line: bytes) -> dict[str, Any]:
    """One parser for first reads and re-reads, so both reject the same lines with the same words."""
    try:
        row = orjson.loads(line)
    except orjson.JSONDecodeError as error:
        raise ConfigError(f"{path}:{number}: not valid JSON ({error}); fix or remove the line") from error
    if not isinstance(row, dict):
        raise ConfigError(f"{path}:{number}: each line must be a JSON object, got {type(row).__name__}")
    return row


def drop_torn_tail(path: Path) -> None:
    """Cut an unfinished last line (a process killed mid-write) so that every remaining line is whole."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb+") as file:
        size = file.seek(0, os.SEEK_END)
        file.seek(size - 1)
        if file.read(1) == b"\n":
            return
        position = size
        while position > 0:
            step = min(65536, position)
            file.seek(position - step)
            chunk = file.read(step)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                file.truncate(position - step + newline + 1)
                return
            position -= step
        file.truncate(0)


class LineAppender:
    """Appends whole JSON lines: one `write` per line on an O_APPEND descriptor, so lines never interleave
    and a crash leaves at most an unfinished last line (cut by `drop_torn_tail` on resume)."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def append(self, record: dict[str, Any]) -> None:
        data = memoryview(orjson.dumps(record) + b"\n")
        while data:
            written = os.write(self._fd, data)
            data = data[written:]

    def close(self) -> None:
        os.close(self._fd)


def write_atomically(path: Path, chunks: Iterable[bytes]) -> None:
    """Write a file so that readers (and a crash) see either the old content or the complete new one."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with temporary.open("wb") as file:
            for chunk in chunks:
                file.write(chunk)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
