"""nemo_gym.sandbox.models: what a run's result says about how it ended."""

from __future__ import annotations

import pytest

from nemo_gym.sandbox import SandboxResult


def _result(**fields: object) -> SandboxResult:
    defaults = {
        "exit_code": 0,
        "signal": None,
        "stdout": "",
        "stderr": "",
        "stdout_bytes": 0,
        "stderr_bytes": 0,
        "timed_out": False,
        "limit_hit": None,
        "truncated": False,
        "seconds": 0.1,
        "isolation": "bwrap",
    }
    return SandboxResult(**{**defaults, **fields})


@pytest.mark.parametrize(
    ("fields", "ended"),
    [
        ({}, None),
        ({"exit_code": None, "signal": 9, "timed_out": True, "limit_hit": "wall_time"}, "timeout"),
        ({"exit_code": None, "signal": 9, "limit_hit": "memory"}, "killed by signal 9 (memory limit)"),
        ({"exit_code": None, "signal": 11}, "killed by signal 11"),
        ({"exit_code": 1, "stderr": "x" * 400 + "Boom"}, "exit status 1: " + "x" * 296 + "Boom"),
    ],
)
def test_early_end_says_why_a_run_stopped_before_its_end(fields, ended):
    assert _result(**fields).early_end() == ended


def test_early_end_keeps_as_much_stderr_as_asked():
    assert _result(exit_code=2, stderr="abcdef").early_end(stderr_chars=3) == "exit status 2: def"
