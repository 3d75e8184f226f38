"""The project folder the launch tests run `gym` in (tests/launch_projects.py), and a temporary folder of
the launcher's own."""

from pathlib import Path

import pytest

from tests.launch_projects import COUNTER_APP, GRANDCHILD_APP, NOISY_APP, PEEKING_APP, SLEEPY_APP, SLOW_APP


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A project folder with its own server implementations, as a user's checkout would have."""
    sources = {
        "counter": COUNTER_APP,
        "sleepy": SLEEPY_APP,
        "noisy": NOISY_APP,
        "grandchild": GRANDCHILD_APP,
        "slow": SLOW_APP,
        "peeking": PEEKING_APP,
    }
    for implementation, source in sources.items():
        folder = tmp_path / "resources_servers" / implementation
        folder.mkdir(parents=True)
        (folder / "app.py").write_text(source)
    return tmp_path


@pytest.fixture
def private_tmp(tmp_path: Path) -> Path:
    """The launcher's temporary folder (TMPDIR), so a test sees every run folder it leaves behind."""
    folder = tmp_path / "private_tmp"
    folder.mkdir()
    return folder
