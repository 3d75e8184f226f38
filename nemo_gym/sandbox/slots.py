"""A server's sandbox, set up once: the isolation checked when the server starts, a bound on the runs at
once, and each run with the configured limits but its own time budget.

Every environment that runs model-written code did these three steps itself; doing them here keeps the
refusal to start unprotected and the concurrency bound from being forgotten by the next one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from nemo_gym.sandbox.isolation import python_command, resolve_isolation
from nemo_gym.sandbox.models import SandboxLimits, SandboxResult
from nemo_gym.sandbox.runner import run_sandboxed


class SandboxSlots:
    """`limits` as an environment's config gives them and at most `size` sandboxes running at once.

    Built in a server's `model_post_init`: it raises SandboxUnavailableError there, so a server refuses to
    start rather than run code unprotected."""

    def __init__(self, limits: SandboxLimits, size: int) -> None:
        resolve_isolation(limits.isolation)
        self.limits = limits
        self._slots = asyncio.Semaphore(size)

    def limits_for(self, seconds: float | None = None, **updates: Any) -> SandboxLimits:
        """The configured limits, with wall and CPU time both `seconds` when given, and `updates` on top."""
        if seconds is not None:
            updates = {"wall_seconds": seconds, "cpu_seconds": seconds, **updates}
        return self.limits.model_copy(update=updates) if updates else self.limits

    async def run(
        self,
        command: str | Sequence[str],
        *,
        stdin: str | bytes = b"",
        files: Mapping[str, str | bytes] | None = None,
        limits: SandboxLimits | None = None,
    ) -> SandboxResult:
        """`run_sandboxed` once a slot is free, with the configured limits unless `limits` are given."""
        async with self._slots:
            return await run_sandboxed(command, stdin=stdin, files=files, limits=limits or self.limits)

    async def run_python(
        self,
        script: str,
        *,
        files: Mapping[str, str | bytes],
        stdin: str | bytes = b"",
        seconds: float | None = None,
        **updates: Any,
    ) -> SandboxResult:
        """The server's Python on `script`, one of `files`; `seconds` and `updates` as in `limits_for`."""
        return await self.run(
            [*python_command(), script], stdin=stdin, files=files, limits=self.limits_for(seconds, **updates)
        )
