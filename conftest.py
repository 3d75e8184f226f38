"""Makes the shared fixtures (tests/shared_fixtures.py) available to the tests of every server folder, and
fails a test session that leaves a process behind.

Every process a test starts inherits a session marker in its environment, however deep it sits in the
process tree (a server's pool workers, a launcher's servers); once every fixture is torn down, a process
still carrying the marker was leaked by some test.
"""

import multiprocessing.resource_tracker
import os
import time
import uuid
from pathlib import Path

import pytest

from tests.helpers import process_alive

pytest_plugins = ["tests.shared_fixtures"]
# A NeMo Gym user's project, whose folder tests run under its own settings (tests/test_nemo_gym_style_folder.py).
collect_ignore = ["tests/fixtures/nemo_gym_style"]

SESSION_MARKER_ENV = "NEMO_GYM_TEST_SESSION"
LEFTOVER_GRACE_S = 5.0
"""How long processes stopped by the last teardowns get to finish exiting before they count as leaked."""
LEFTOVER_POLL_S = 0.1


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the test ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`-n 2 --dist loadgroup`) the tests of a file that share module fixtures stay on
    one worker, so those fixtures start their servers once; the reliability suite shares one deployment,
    so it is one group; any other test goes wherever a worker is free."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        if item.path.parent.name == "reliability":
            group = "reliability"
        elif uses_shared_fixtures(item):
            group = str(item.path)
        else:
            group = item.nodeid
        item.add_marker(pytest.mark.xdist_group(group))


def uses_shared_fixtures(item: pytest.Item) -> bool:
    """Whether a fixture of the test lives for its module (or class): worth keeping its tests together."""
    definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    return any(defs and defs[-1].scope in ("module", "package", "class") for defs in definitions.values())


def pytest_sessionstart(session: pytest.Session) -> None:
    if "PYTEST_XDIST_WORKER" not in os.environ:  # xdist workers keep the marker of the session they serve
        os.environ[SESSION_MARKER_ENV] = uuid.uuid4().hex


@pytest.hookimpl(trylast=True)  # after pytest's own sessionfinish has torn the session fixtures down
def pytest_sessionfinish(session: pytest.Session) -> None:
    if not Path("/proc/self/environ").exists() or "PYTEST_XDIST_WORKER" in os.environ:
        return
    marker = f"{SESSION_MARKER_ENV}={os.environ[SESSION_MARKER_ENV]}".encode()
    deadline = time.monotonic() + LEFTOVER_GRACE_S
    while (leftovers := leaked_processes(marker)) and time.monotonic() < deadline:
        time.sleep(LEFTOVER_POLL_S)
    if not leftovers:
        return
    lines = [f"  {pid}: {command}" for pid, command in sorted(leftovers.items())]
    print(f"\nError: the test session left {len(leftovers)} process(es) running:", *lines, sep="\n")
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def leaked_processes(marker: bytes) -> dict[int, str]:
    """pid -> command line of each live process started with `marker` in its environment, except this
    process's own lineage and its multiprocessing resource tracker (a helper that ends with it)."""
    spared = {os.getpid(), *ancestors(), multiprocessing.resource_tracker._resource_tracker._pid}
    uid = os.getuid()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in spared:
            continue
        try:
            if entry.stat().st_uid != uid or marker not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # it exited meanwhile
            continue
        if process_alive(int(entry.name)):
            found[int(entry.name)] = command.strip()
    return found


def ancestors() -> list[int]:
    """The pids from this process's parent up to the first process (or the first that has exited)."""
    lineage = []
    pid = os.getppid()
    while pid > 0:
        lineage.append(pid)
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            break
        pid = int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))
    return lineage
