"""nemo_gym.sandbox: untrusted programs are contained. Each containment test runs under bubblewrap and
under the unshare fallback (forced by config); the limits also under `isolation: none`.

Processes are recognised by a random marker in their command line: every process a fork bomb makes
carries it, so "no process left" is checked exactly, whatever else runs on the machine.
"""

from __future__ import annotations

import asyncio
import os
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from nemo_gym.sandbox import (
    SandboxLimits,
    SandboxResult,
    SandboxSlots,
    SandboxUnavailableError,
    python_command,
    resolve_isolation,
    run_sandboxed,
)
from nemo_gym.sandbox import slots as sandbox_slots
from nemo_gym.sandbox.isolation import probe
from nemo_gym.testing import StartedServer, run_resources_server

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


def test_auto_finds_real_isolation_here():
    assert resolve_isolation("auto") in ISOLATED


# ---- containment (bwrap and the unshare fallback) --------------------------------------------------------


@pytest.mark.parametrize("isolation", ISOLATED)
async def test_a_fork_bomb_is_capped_and_ends_with_the_sandbox(isolation):
    """Every process forks 9 times: 512 processes unless capped. Bounded, so that a broken sandbox fails
    this test without exhausting the machine's process table (an endless bomb would, for its 2 s)."""
    cap = 16
    bomb = "import os, time\nfor _ in range(9):\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    marker, argv = marked(bomb + "time.sleep(60)")
    run = asyncio.ensure_future(
        run_sandboxed(argv, limits=limits(isolation, wall_seconds=2, max_processes=cap))
    )
    peak = 0
    while not run.done():
        peak = max(peak, processes_with(marker))
        await asyncio.sleep(0.02)
    result = run.result()
    assert (result.timed_out, result.limit_hit) == (True, "wall_time")
    # two wrapper processes (bwrap's monitor and init; unshare and its shell) carry the marker too
    assert cap // 2 <= peak <= cap + 2, "the bomb forked, but no more than max_processes"
    assert processes_with(marker) == 0, "nothing of the sandbox outlives the run"


@pytest.mark.parametrize("isolation", ISOLATED)
async def test_the_network_is_unreachable(isolation):
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        code = (
            "import socket\ntry:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n    print('connected')\n"
            "except OSError as error:\n    print('blocked', type(error).__name__)"
        )
        result = await run_sandboxed(code, limits=limits(isolation))
        assert result.stdout.startswith("blocked"), result
        assert select.select([listener], [], [], 0.2)[0] == [], "the listener never saw a connection"


@pytest.mark.parametrize("isolation", ISOLATED)
async def test_writes_stay_in_the_throwaway_work_dir(isolation, tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    outside = [tmp_path / "escape.txt", Path(f"/tmp/gym-sandbox-escape-{uuid.uuid4().hex}.txt")]
    targets = [str(path) for path in outside] + ["inside.txt", "given.txt"]
    code = (
        f"for path in {targets!r}:\n    try:\n        open(path, 'w').write('x')\n        print('wrote', path)\n"
        "    except OSError as error:\n        print('refused', path, type(error).__name__)"
    )
    result = await run_sandboxed(
        code, files={"given.txt": "input"}, limits=limits(isolation, scratch_dir=str(scratch))
    )
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"refused {outside[0]}"), "the host's directories are not there"
    assert lines[1] == f"wrote {outside[1]}", "the sandbox has a /tmp of its own"
    assert lines[2] == "wrote inside.txt" and lines[3].startswith("refused given.txt")
    assert not any(path.exists() for path in outside)
    assert list(scratch.iterdir()) == [], "the staging dir is removed"


@pytest.mark.parametrize("isolation", ISOLATED)
async def test_the_environment_is_clean_and_the_python_packages_usable(isolation):
    code = "import os, numpy\nprint(' '.join(sorted(os.environ)))\nprint(os.getuid() == 0, os.listdir('/sandbox'))"
    result = await run_sandboxed(code, limits=limits(isolation))
    names, facts = result.stdout.splitlines()
    # PWD and OLDPWD are the shell's and bwrap's notes of the sandbox's own work dir
    assert set(names.split()) - {"PWD", "OLDPWD"} == {
        "PATH",
        "HOME",
        "TMPDIR",
        "LANG",
        "LC_ALL",
        "OPENBLAS_NUM_THREADS",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
    }, "none of the server's variables"
    assert facts == "False ['main.py']"


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


# ---- limits (memory and output also under `none`) -----------------------------------------------------------------


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


async def test_unisolated_runs_are_never_chosen_for_you():
    result = await run_sandboxed("import os\nprint('work' in os.listdir('/'))", limits=limits("none"))
    assert (result.isolation, result.stdout) == ("none", "True\n"), "`none` really sees the host"
    assert resolve_isolation("auto") != "none"


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs `none` programs as a sandbox uid")
def test_none_refuses_a_python_its_uid_cannot_reach(tmp_path):
    """A server whose Python (here a virtualenv) lies where the sandbox uid cannot go refuses `none` with
    the reason, rather than fail every run or run another Python found on the host."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(private / "venv")], check=True, timeout=60
    )
    code = "from nemo_gym.sandbox import resolve_isolation\nresolve_isolation('none')"
    site_packages = [path for path in sys.path if path.endswith("site-packages")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path.cwd()), *site_packages])}
    result = subprocess.run(
        [str(private / "venv" / "bin" / "python"), "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith(
        "nemo_gym.sandbox.isolation.SandboxUnavailableError: isolation none cannot run"
    )
    assert "is closed to other users, so uid" in last_line


async def test_input_file_names_cannot_leave_the_work_dir():
    with pytest.raises(ValueError, match="sandbox file name"):
        await run_sandboxed("print(1)", files={"../escape.py": "x"})


# ---- the event loop stays free ----------------------------------------------------------------------------


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
def test_a_server_whose_virtualenv_lives_under_tmp_can_still_run_code(isolation, tmp_path):
    """The sandbox's fresh /tmp must not hide the server's own Python: a checkout (and its .venv) under
    /tmp, as a CI clone often is, still runs sandboxed programs."""
    limits(isolation)  # skips where this isolation cannot run
    under_tmp = Path("/tmp") / f"gym-venv-{uuid.uuid4().hex}"
    try:
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", str(under_tmp)], check=True, timeout=60
        )
        site_packages = [path for path in sys.path if path.endswith("site-packages")]
        script = (
            "import asyncio\n"
            "from nemo_gym.sandbox import SandboxLimits, run_sandboxed\n"
            f"limits = SandboxLimits(isolation={isolation!r})\n"
            "result = asyncio.run(run_sandboxed('import sys; print(sys.prefix)', limits=limits))\n"
            "print(result.exit_code, result.stdout.strip(), result.stderr.strip()[:200])\n"
        )
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path.cwd()), *site_packages])}
        finished = subprocess.run(
            [str(under_tmp / "bin" / "python"), "-c", script],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        shutil.rmtree(under_tmp, ignore_errors=True)
    assert finished.stdout.split()[:2] == ["0", str(under_tmp)], finished.stdout + finished.stderr


# ---- SandboxSlots: one server's sandbox, set up once ------------------------------------------------------


@pytest.mark.parametrize("isolation", ISOLATED)
async def test_slots_run_the_servers_python_on_a_script_among_the_files(isolation):
    sandbox = SandboxSlots(limits(isolation, output_bytes=1000), size=2)
    run = await sandbox.run_python("main.py", files={"main.py": "print(input() * 2)"}, stdin="ab", seconds=15)
    assert (run.stdout, run.exit_code, run.isolation, run.early_end()) == ("abab\n", 0, isolation, None)


def test_slots_refuse_a_server_whose_isolation_cannot_work(monkeypatch):
    def unavailable(requested: str) -> str:
        raise SandboxUnavailableError(f"{requested} cannot run here")

    monkeypatch.setattr(sandbox_slots, "resolve_isolation", unavailable)
    with pytest.raises(SandboxUnavailableError, match="bwrap cannot run here"):
        SandboxSlots(SandboxLimits(isolation="bwrap"), size=1)


def test_slots_give_a_run_its_own_time_budget_over_the_configured_limits(monkeypatch):
    monkeypatch.setattr(sandbox_slots, "resolve_isolation", lambda requested: requested)
    configured = SandboxLimits(memory_mb=2048, output_bytes=10)
    sandbox = SandboxSlots(configured, size=1)
    assert sandbox.limits_for() is configured
    budget = sandbox.limits_for(7, output_bytes=99)
    assert (budget.wall_seconds, budget.cpu_seconds, budget.output_bytes, budget.memory_mb) == (
        7,
        7,
        99,
        2048,
    )
    assert sandbox.limits_for(memory_mb=64).wall_seconds == configured.wall_seconds
    assert configured.output_bytes == 10, "the configured limits stay as they were"


async def test_slots_bound_the_runs_at_once(monkeypatch):
    """Three runs on two slots: the third starts only when one of the first two has finished."""
    monkeypatch.setattr(sandbox_slots, "resolve_isolation", lambda requested: requested)
    started: list[object] = []
    two_started, release = asyncio.Event(), asyncio.Event()

    async def held_run(command, *, stdin, files, limits):
        started.append((command, stdin, files, limits))
        if len(started) == 2:
            two_started.set()
        await release.wait()
        return command

    monkeypatch.setattr(sandbox_slots, "run_sandboxed", held_run)
    sandbox = SandboxSlots(SandboxLimits(), size=2)
    runs = [asyncio.ensure_future(sandbox.run(f"print({index})")) for index in range(3)]
    await two_started.wait()  # by now the third has run up to its slot, and waits there
    assert len(started) == 2 and not runs[2].done()
    release.set()
    assert await asyncio.gather(*runs) == ["print(0)", "print(1)", "print(2)"]
    assert started[0][3] is sandbox.limits, "a plain run takes the configured limits"
    script = await sandbox.run_python("runner.py", files={"runner.py": ""}, seconds=3)
    assert script == [*python_command(), "runner.py"] and started[-1][3].wall_seconds == 3


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
