"""The symbolic check as the server runs it: in the CPU worker pool, so sympy never stalls the event loop, a
bounded number at once, and within a deadline past which the answer scores 0.0."""

from __future__ import annotations

import asyncio
import logging

from nemo_gym.serving.cpu_pool import run_cpu_bound
from resources_servers.math_with_judge.grading import Grade, grade

logger = logging.getLogger("math_with_judge")


class LibraryGrader:
    def __init__(self, timeout_s: float, max_concurrency: int) -> None:
        self.timeout_s = timeout_s
        self._slots = asyncio.Semaphore(max_concurrency)

    async def grade(self, expected_answer: str, generated: str) -> Grade:
        async with self._slots:
            timed_out = Grade(0.0, None, timed_out=True)
            result = await run_cpu_bound(
                grade, expected_answer, generated, timeout_s=self.timeout_s, on_timeout=timed_out
            )
        if result.timed_out:
            logger.warning("math-verify gave up after %.1f s; the answer scores 0.0", self.timeout_s)
        return result
