"""One deployment of every shipped server, shared by the reliability tests of this folder, and the tally
of what each test file sent.

The tests that use it run on one xdist worker, so the machine starts the deployment (a hundred server
processes) once, not once per worker; and their timeout covers the test alone, since the deployment's
start is bounded by the launcher's own verdict (`LAUNCHER_VERDICT_S`), which a busy machine needs."""

from collections.abc import Iterator

import pytest

from tests.reliability.deployment import Server, Tally, every_shipped_server
from tests.upstream_script import ScriptedUpstream
from tests.vllm_script import VllmUpstream

TEST_TIMEOUT_S = 120


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the test ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "every_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("every_shipped_server"))
            item.add_marker(pytest.mark.timeout(TEST_TIMEOUT_S, func_only=True))


@pytest.fixture(scope="session")
def every_server(
    scripted_upstream: ScriptedUpstream,
    vllm_upstream: VllmUpstream,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, Server]]:
    """Session-scoped, so both test files pay for one `gym run` start."""
    workdir = tmp_path_factory.mktemp("every_shipped_server")
    with every_shipped_server(scripted_upstream, vllm_upstream, workdir) as servers:
        yield servers


@pytest.fixture(scope="module")
def tally(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tally]:
    """Counts the module's answers; printed and written as JSON (named after the module) at its end."""
    collected = Tally(request.module.__name__.rsplit(".", 1)[-1])
    yield collected
    collected.publish(tmp_path_factory.mktemp("reliability_stats"))
