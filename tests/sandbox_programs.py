"""What the sandbox tests share: the isolations to run under (skipping one this machine cannot run), and
programs recognised by a random marker in their command line: every process a fork bomb makes carries it,
so "no process left" is checked exactly, whatever else runs on the machine."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from nemo_gym.sandbox import SandboxLimits, python_command
from nemo_gym.sandbox.isolation import probe

ISOLATED = ["bwrap", "unshare"]
ALL_MODES = [*ISOLATED, "none"]


def limits(isolation: str, **overrides: object) -> SandboxLimits:
    if (problem := probe(isolation)) is not None:
        pytest.skip(f"{isolation} cannot run here: {problem}")
    return SandboxLimits(isolation=isolation, **overrides)


def processes_with(marker: str) -> int:
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                count += marker.encode() in Path(entry.path, "cmdline").read_bytes()
            except OSError:
                continue
    return count


def marked(code: str) -> tuple[str, list[str]]:
    """A marker and an argv running `code` that carries it (inherited by every fork)."""
    marker = f"gym-sandbox-test-{uuid.uuid4().hex}"
    return marker, [*python_command(), "-c", f"# {marker}\n{code}"]
