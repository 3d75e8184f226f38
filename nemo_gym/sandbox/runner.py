"""`run_sandboxed`: one program, run to completion or to its limits, off the event loop.

The program is a separate process the event loop only waits for (no thread, no CPU worker held); its
stdin, stdout and stderr are files in the throwaway staging dir, so a flood of output costs the server
nothing (the file-size limit stops it) and only the first `output_bytes` of each are read back.
"""

from __future__ import annotations

import asyncio
import os
import signal
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from nemo_gym.sandbox.isolation import (
    MIB,
    SANDBOX_ENV,
    SandboxUnavailableError,
    check_file_names,
    prepare_staging,
    python_command,
    resolve_isolation,
    uid_slot,
    wrapper_argv,
)
from nemo_gym.sandbox.models import LimitHit, SandboxLimits, SandboxResult
from nemo_gym.telemetry import tracing
from nemo_gym.telemetry.metrics import record_sandbox_run

KILL_WAIT_S = 5.0
UID_DRAIN_S = 2.0
UID_DRAIN_POLL_S = 0.01
SIGNAL_EXIT_BASE = 128
"""bwrap and sh report a program ended by signal n as exit status 128 + n."""
STDERR_TAIL_BYTES = 2048
MAIN_FILE = "main.py"


async def run_sandboxed(
    command: str | Sequence[str],
    *,
    stdin: str | bytes = b"",
    files: Mapping[str, str | bytes] | None = None,
    limits: SandboxLimits | None = None,
) -> SandboxResult:
    """Run Python source (a str, saved as main.py and run by the server's interpreter in isolated mode)
    or an argv inside the sandbox, whose work dir holds `files` (read-only). Raises
    SandboxUnavailableError when the configured isolation cannot work here."""
    with tracing.span("gym.sandbox.exec"):
        return await _run_sandboxed(command, stdin, files, limits or SandboxLimits())


async def _run_sandboxed(
    command: str | Sequence[str],
    stdin: str | bytes,
    files: Mapping[str, str | bytes] | None,
    limits: SandboxLimits,
) -> SandboxResult:
    try:
        isolation = resolve_isolation(limits.isolation)
    except SandboxUnavailableError:
        record_sandbox_run("unavailable")
        raise
    inputs = {name: _bytes(content) for name, content in (files or {}).items()}
    if isinstance(command, str):
        inputs[MAIN_FILE] = _bytes(command)
        argv = [*python_command(), MAIN_FILE]
    else:
        argv = list(command)
    check_file_names(list(inputs))
    with (
        tempfile.TemporaryDirectory(prefix="gym-sandbox-", dir=limits.scratch_dir) as scratch,
        uid_slot() as uid,
    ):
        staging = Path(scratch)
        work = prepare_staging(staging, inputs, uid)
        (staging / "stdin").write_bytes(_bytes(stdin))
        wrapper = wrapper_argv(isolation, staging, list(inputs), limits, uid)
        cwd = work if isolation == "none" else staging
        env = {**SANDBOX_ENV, "HOME": str(work)} if isolation == "none" else SANDBOX_ENV
        with (
            open(staging / "stdin", "rb") as stdin_file,
            open(staging / "stdout", "wb") as stdout_file,
            open(staging / "stderr", "wb") as stderr_file,
        ):
            started = time.monotonic()
            process = await asyncio.create_subprocess_exec(
                *wrapper,
                *argv,
                stdin=stdin_file,
                stdout=stdout_file,
                stderr=stderr_file,
                env=env,
                cwd=cwd,
                start_new_session=True,
            )
        try:
            killed = await _wait_or_kill(process, limits.wall_seconds)
        finally:
            await _kill(process)
            if uid is not None:
                await asyncio.shield(_drain_uid(uid))
        seconds = time.monotonic() - started
        result = _result(process.returncode, killed, staging, limits, seconds, isolation)
    record_sandbox_run(_outcome(result))
    return result


def _outcome(result: SandboxResult) -> str:
    """The run's outcome as `/metrics` counts it: the limit that stopped it, else how it ended."""
    if result.limit_hit is not None:
        return result.limit_hit
    if result.signal is not None:
        return "signal"
    return "ok" if result.exit_code == 0 else "exit_nonzero"


def _bytes(content: str | bytes) -> bytes:
    """UTF-8; a lone surrogate (JSON can carry one) is kept as its bytes rather than failing the run."""
    return content.encode(errors="surrogatepass") if isinstance(content, str) else content


async def _wait_or_kill(process: asyncio.subprocess.Process, wall_seconds: float) -> bool:
    """Whether the wall limit ran out (the process is then killed, with everything it started)."""
    try:
        await asyncio.wait_for(process.wait(), wall_seconds)
    except TimeoutError:
        return True
    return False


async def _kill(process: asyncio.subprocess.Process) -> None:
    """SIGKILL to the process group (bwrap and unshare then take their namespace down), then reap.

    Also runs when the caller is cancelled, so an abandoned request leaves nothing running."""
    if process.returncode is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    await asyncio.shield(asyncio.wait_for(process.wait(), KILL_WAIT_S))


async def _drain_uid(uid: int) -> None:
    """Hold the uid until the kernel has removed the last of its processes (a killed namespace takes a
    moment), so the next run that gets it starts with a process count of zero."""
    deadline = time.monotonic() + UID_DRAIN_S
    while _has_processes(uid) and time.monotonic() < deadline:
        await asyncio.sleep(UID_DRAIN_POLL_S)


def _has_processes(uid: int) -> bool:
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    return True
            except FileNotFoundError:
                continue
    return False


def _result(
    returncode: int | None, killed: bool, staging: Path, limits: SandboxLimits, seconds: float, isolation: str
) -> SandboxResult:
    exit_code, signal_number = _exit_status(returncode, isolation)
    stdout, stdout_size = _read_capped(staging / "stdout", limits.output_bytes)
    stderr, stderr_size = _read_capped(staging / "stderr", limits.output_bytes)
    limit_hit = _limit_hit(killed, signal_number, max(stdout_size, stderr_size), staging, limits)
    return SandboxResult(
        exit_code=exit_code,
        signal=signal_number,
        stdout=stdout,
        stderr=stderr,
        stdout_bytes=stdout_size,
        stderr_bytes=stderr_size,
        timed_out=limit_hit in ("wall_time", "cpu_time"),
        limit_hit=limit_hit,
        truncated=max(stdout_size, stderr_size) > limits.output_bytes,
        seconds=round(seconds, 3),
        isolation=isolation,
    )


def _exit_status(returncode: int | None, isolation: str) -> tuple[int | None, int | None]:
    """(exit code, signal): a negative return code is a signal to the process we started; from inside a
    namespace (bwrap, sh) a signal arrives as 128 + n."""
    if returncode is None or returncode < 0:
        return None, -(returncode or -signal.SIGKILL)
    if isolation != "none" and SIGNAL_EXIT_BASE < returncode <= SIGNAL_EXIT_BASE + signal.SIGRTMAX:
        return None, returncode - SIGNAL_EXIT_BASE
    return returncode, None


def _read_capped(path: Path, cap: int) -> tuple[str, int]:
    """The first `cap` bytes as text, and the full size."""
    with open(path, "rb") as stream:
        size = os.fstat(stream.fileno()).st_size
        return stream.read(cap).decode(errors="replace"), size


def _limit_hit(
    killed: bool, signal_number: int | None, largest_output: int, staging: Path, limits: SandboxLimits
) -> LimitHit | None:
    if killed:
        return "wall_time"
    if signal_number == signal.SIGXCPU:
        return "cpu_time"
    if signal_number == signal.SIGXFSZ or largest_output >= limits.file_size_mb * MIB:
        return "file_size"
    if b"MemoryError" in _tail(staging / "stderr"):
        return "memory"
    return None


def _tail(path: Path) -> bytes:
    with open(path, "rb") as stream:
        stream.seek(max(0, os.fstat(stream.fileno()).st_size - STDERR_TAIL_BYTES))
        return stream.read()
