"""A server's child process as the launcher sees it: started in a process group of its own, its output
read line by line, its exit and its stop.

Output is read in chunks, so no line, however long, can stall the reader, and the exit is learnt from the
process itself, not from the end of its output (a helper the child started may hold the pipe open).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

KILL_WAIT_S = 5.0
OUTPUT_DRAIN_S = 1.0
# Lines of a child's output kept for the message that reports its failure.
RECENT_LINES_KEPT = 20
MAX_LINE_BYTES = 16 * 1024


class LineSplitter:
    """Cuts a byte stream into text lines. A line longer than `limit` bytes is cut there and marked,
    and the rest of it is dropped, so a single huge line costs neither memory nor the reader's life."""

    def __init__(self, limit: int = MAX_LINE_BYTES) -> None:
        self._limit = limit
        self._pending = bytearray()
        self._dropping = False

    def feed(self, data: bytes) -> list[str]:
        lines: list[str] = []
        start = 0
        while (end := data.find(b"\n", start)) != -1:
            lines += self._take(data[start:end], line_ends=True)
            start = end + 1
        lines += self._take(data[start:], line_ends=False)
        return lines

    def flush(self) -> list[str]:
        """The unterminated last line, when the stream ends."""
        return self._take(b"", line_ends=True) if self._pending else []

    def _take(self, piece: bytes, line_ends: bool) -> list[str]:
        if self._dropping:
            self._dropping = not line_ends
            return []
        self._pending += piece
        if len(self._pending) > self._limit:
            head = _decoded(self._pending[: self._limit])
            self._pending.clear()
            self._dropping = not line_ends
            return [f"{head} [line truncated: longer than {self._limit} bytes]"]
        if not line_ends:
            return []
        line = _decoded(self._pending)
        self._pending.clear()
        return [line]


def _decoded(raw: bytes | bytearray) -> str:
    return bytes(raw).decode("utf-8", errors="replace").rstrip("\r")


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class _ChildProtocol(asyncio.SubprocessProtocol):
    """Receives a child's output as it arrives and learns of its exit from the process itself: the output
    pipe can outlive the child (a helper it started may hold it open), so its end proves nothing."""

    def __init__(self, on_line: Callable[[str], None]) -> None:
        loop = asyncio.get_running_loop()
        self.exited: asyncio.Future[None] = loop.create_future()
        self.output_closed: asyncio.Future[None] = loop.create_future()
        self._lines = LineSplitter()
        self._on_line = on_line

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self._deliver(self._lines.feed(data))

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._deliver(self._lines.flush())
        _resolve(self.output_closed)

    def process_exited(self) -> None:
        _resolve(self.exited)

    def _deliver(self, lines: list[str]) -> None:
        for line in lines:
            # Whatever goes wrong with one line (a closed stdout, say), the pipe must keep being drained.
            with contextlib.suppress(Exception):
                self._on_line(line)


@dataclass
class ChildProcess:
    """A server process started by the launcher, in a session (and process group) of its own."""

    transport: asyncio.SubprocessTransport
    protocol: _ChildProtocol

    @property
    def pid(self) -> int:
        return self.transport.get_pid()

    @property
    def returncode(self) -> int | None:
        return self.transport.get_returncode()

    async def wait(self) -> int | None:
        """Return once the process has exited, whether or not its output pipe is closed."""
        await asyncio.shield(self.protocol.exited)
        return self.returncode

    async def exits_within(self, timeout_s: float) -> bool:
        return await _done_within(self.protocol.exited, timeout_s)

    async def output_ends_within(self, timeout_s: float) -> bool:
        return await _done_within(self.protocol.output_closed, timeout_s)

    def signal_group(self, signum: int) -> None:
        """Signal the child's whole process group (a server's own helpers go too)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signum)

    def close(self) -> None:
        """Release the pipe (a helper still holding its other end no longer matters)."""
        self.transport.close()


async def _done_within(future: asyncio.Future[None], timeout_s: float) -> bool:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(future), timeout_s)
    return future.done()


async def start_child(
    args: list[str], cwd: Path, env: dict[str, str], pass_fds: list[int], on_line: Callable[[str], None]
) -> ChildProcess:
    """Run `python <args>` in `cwd`, stdout and stderr merged and handed to `on_line` line by line."""
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.subprocess_exec(
        lambda: _ChildProtocol(on_line),
        sys.executable,
        *args,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        pass_fds=pass_fds,
        start_new_session=True,
    )
    return ChildProcess(transport, protocol)


async def all_exit_within(children: list[ChildProcess], timeout_s: float) -> bool:
    results = await asyncio.gather(*(child.exits_within(timeout_s) for child in children))
    return all(results)
