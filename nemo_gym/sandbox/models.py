"""The sandbox's settings (embeddable in an environment's config) and the outcome of one run."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Isolation = Literal["auto", "bwrap", "unshare", "none"]
LimitHit = Literal["wall_time", "cpu_time", "memory", "file_size"]


class SandboxLimits(BaseModel):
    """Resource limits and isolation of one sandboxed run. Time, memory, file size and process count are
    per run; memory is the address space of each process, so a run may use up to
    `max_processes` x `memory_mb` in the worst case."""

    model_config = ConfigDict(extra="forbid")

    isolation: Isolation = Field(
        default="auto",
        description="auto: bwrap, else unshare, else refuse; none runs the code unisolated (unsafe, opt-in)",
    )
    wall_seconds: float = Field(
        default=20.0, gt=0, description="killed (with everything it started) after this"
    )
    cpu_seconds: float = Field(default=10.0, gt=0, description="CPU time of each process, rounded up")
    memory_mb: int = Field(default=1024, ge=16, description="address space of each process")
    file_size_mb: int = Field(
        default=16, ge=1, description="largest file a process may write, stdout included"
    )
    max_processes: int = Field(default=16, ge=1, description="processes and threads at once")
    output_bytes: int = Field(default=65536, ge=0, description="stdout and stderr are each cut after this")
    scratch_mb: int = Field(default=64, ge=1, description="size of the work dir and of /tmp (each in memory)")
    scratch_dir: str | None = Field(
        default=None, description="where throwaway staging dirs go on the host; default: the system temp dir"
    )


class SandboxResult(BaseModel):
    """`exit_code` is None when a signal ended the program (`signal`); `timed_out` covers both the wall
    and the CPU limit; `truncated` says stdout or stderr was cut at `output_bytes`, and `stdout_bytes` /
    `stderr_bytes` how much the program wrote to each."""

    exit_code: int | None
    signal: int | None
    stdout: str
    stderr: str
    stdout_bytes: int
    stderr_bytes: int
    timed_out: bool
    limit_hit: LimitHit | None
    truncated: bool
    seconds: float
    isolation: Isolation

    def early_end(self, stderr_chars: int = 300) -> str | None:
        """Why the program stopped before its end (out of time, a signal, a non-zero exit with the tail of
        its stderr), or None when it ended normally: the words the code environments' failure details use."""
        if self.timed_out:
            return "timeout"
        if self.signal is not None:
            return f"killed by signal {self.signal}" + (
                f" ({self.limit_hit} limit)" if self.limit_hit else ""
            )
        if self.exit_code:
            return f"exit status {self.exit_code}: {self.stderr[-stderr_chars:]}"
        return None
