"""The suite's grouping under pytest-xdist holds: the tests of a file that share a module fixture run on one
worker, so the fixture (in the real suite: servers, a whole deployment) starts once, not once per worker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO_ROOT

SHARED_FIXTURE_FILE = """
import os
import pytest

@pytest.fixture(scope="module")
def started():
    with open(os.environ["STARTS_FILE"], "a") as starts:
        starts.write(os.environ.get("PYTEST_XDIST_WORKER", "main") + "\\n")

@pytest.mark.parametrize("index", range(12))
def test_uses_the_module_fixture(index, started):
    pass
"""


def test_a_module_fixture_starts_once_across_two_workers(tmp_path: Path) -> None:
    (tmp_path / "test_shared.py").write_text(SHARED_FIXTURE_FILE)
    starts = tmp_path / "starts.txt"
    environment = {**os.environ, "STARTS_FILE": str(starts), "PYTHONPATH": str(REPO_ROOT)}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest"]
    command += [
        "-o",
        "asyncio_mode=auto",
        "-n",
        "2",
        "--dist",
        "loadgroup",
        "--rootdir",
        str(tmp_path),
        str(tmp_path),
    ]
    finished = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert len(starts.read_text().split()) == 1, f"started on {starts.read_text().split()}"
