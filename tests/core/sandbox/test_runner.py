"""nemo_gym.sandbox.runner: a run ends at its limits (memory and output also under `isolation: none`),
leaves no process when cancelled, and keeps the server's event loop free meanwhile."""

from __future__ import annotations

import asyncio
import signal
import statistics
import time
from collections.abc import Iterator

import aiohttp
import pytest

from nemo_gym.sandbox import SandboxLimits, SandboxUnavailableError, python_command, run_sandboxed
from nemo_gym.sandbox.isolation import probe
from nemo_gym.testing import StartedServer, run_resources_server
from tests.sandbox_programs import ALL_MODES, ISOLATED, limits, marked, processes_with


async def test_a_cancelled_run_leaves_no_process():
    marker, argv = marked("while True:\n    pass")
    run = asyncio.ensure_future(run_sandboxed(argv, limits=limits("bwrap", wall_seconds=30)))
    deadline = time.monotonic() + 10
    while processes_with(marker) < 3 and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert processes_with(marker) == 3, "the program is running"
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert processes_with(marker) == 0


@pytest.mark.parametrize("isolation", ISOLATED)
async def test_an_endless_loop_is_stopped_at_the_cpu_limit(isolation):
    result = await run_sandboxed(
        "while True:\n    pass", limits=limits(isolation, cpu_seconds=1, wall_seconds=30)
    )
    assert (result.timed_out, result.limit_hit, result.signal) == (True, "cpu_time", signal.SIGXCPU)
    assert result.exit_code is None


async def test_a_sleeping_program_is_stopped_at_the_wall_limit():
    result = await run_sandboxed("import time\ntime.sleep(60)", limits=limits("bwrap", wall_seconds=1))
    assert (result.timed_out, result.limit_hit) == (True, "wall_time")
    assert result.seconds >= 1  # it ran until the limit, and was stopped there rather than after its minute


@pytest.mark.parametrize("isolation", ALL_MODES)
async def test_a_2_gb_allocation_fails_with_memory_error(isolation):
    code = "block = bytearray(100 * 2**20)\nprint('100 MB ok', flush=True)\nhuge = bytearray(2 * 2**30)"
    result = await run_sandboxed(code, limits=limits(isolation, memory_mb=512))
    assert result.stdout == "100 MB ok\n"
    assert (result.exit_code, result.limit_hit) == (1, "memory")
    assert result.stderr.rstrip().endswith("MemoryError")


@pytest.mark.parametrize("isolation", ALL_MODES)
async def test_a_huge_stdout_is_capped(isolation):
    code = "import sys\nsys.stdout.write('y' * 10_000_000)\nsys.stderr.write('done')"
    result = await run_sandboxed(code, limits=limits(isolation, output_bytes=1000))
    assert (result.exit_code, result.truncated) == (0, True)
    assert (result.stdout, result.stdout_bytes) == ("y" * 1000, 10_000_000)
    assert result.stderr == "done"


@pytest.fixture(scope="module")
def code_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp("sandbox_server")
    sandbox = {"cpu_seconds": 1, "wall_seconds": 15}
    with run_resources_server("math_with_code", workdir, domain="math", sandbox=sandbox) as started:
        yield started


async def test_the_server_answers_quickly_while_four_sandboxed_loops_run(code_server):
    async with aiohttp.ClientSession() as client:

        async def endless() -> dict:
            body = {"code": "while True:\n    pass"}
            async with client.post(code_server.url + "/execute_python", json=body) as response:
                return await response.json()

        async def liveness() -> float:
            started = time.perf_counter()
            async with client.get(code_server.url + "/") as response:
                assert response.status == 200
            return time.perf_counter() - started

        await liveness()
        loops = [asyncio.ensure_future(endless()) for _ in range(4)]
        latencies = []
        while not all(loop.done() for loop in loops):
            latencies.append(await liveness())
            await asyncio.sleep(0.05)  # pacing of the probe, not synchronisation
        answers = await asyncio.gather(*loops)
    assert [answer["timed_out"] for answer in answers] == [True] * 4
    print(
        f"\nGET / during 4 loops: {len(latencies)} probes, median {statistics.median(latencies) * 1000:.1f} ms"
    )
    assert len(latencies) >= 10, "the server kept answering GET / while the four loops ran"


@pytest.mark.parametrize("isolation", ISOLATED)
async def test_stdin_and_the_input_files_reach_the_program(isolation):
    code = "import sys\nprint(sys.stdin.read(), open('data.txt').read())"
    result = await run_sandboxed(code, stdin="hi", files={"data.txt": b"bytes"}, limits=limits(isolation))
    assert (result.stdout, result.exit_code, result.limit_hit, result.truncated) == (
        "hi bytes\n",
        0,
        None,
        False,
    )
    assert result.isolation == isolation


async def test_an_argv_runs_as_given_and_its_exit_code_is_kept():
    result = await run_sandboxed([*python_command(), "-c", "raise SystemExit(7)"], limits=limits("bwrap"))
    assert (result.exit_code, result.signal, result.limit_hit, result.timed_out) == (7, None, None, False)


@pytest.mark.parametrize("isolation", ISOLATED)
async def test_a_program_killed_by_a_signal_reports_the_signal(isolation):
    code = "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)"
    result = await run_sandboxed(code, limits=limits(isolation))
    assert (result.exit_code, result.signal, result.limit_hit) == (None, signal.SIGSEGV, None)


async def test_a_lone_surrogate_in_stdin_is_passed_on_as_its_bytes():
    """JSON can carry a lone surrogate; the run must not fail encoding it."""
    text = "a\udcffb"
    result = await run_sandboxed(
        "import sys\nprint(sys.stdin.buffer.read().hex())", stdin=text, limits=limits("bwrap")
    )
    assert result.stdout.strip() == text.encode(errors="surrogatepass").hex()


async def test_an_isolation_that_cannot_run_here_raises_before_anything_runs():
    if probe("none") is None:
        pytest.skip("isolation none can run here")
    with pytest.raises(SandboxUnavailableError, match="isolation none cannot run the server's Python here"):
        await run_sandboxed("print(1)", limits=SandboxLimits(isolation="none"))
