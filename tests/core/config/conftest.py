"""The scratch project (tests/config_pipeline.py) the config tests read their settings from."""

from pathlib import Path

import pytest

from tests.config_pipeline import scratch_project


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """The current directory of a parse, beside the folder that plays the install root."""
    return scratch_project(tmp_path)
