"""nemo_gym.sandbox.slots: one server's sandbox, set up once."""

from __future__ import annotations

import asyncio

import pytest

from nemo_gym.sandbox import SandboxLimits, SandboxSlots, SandboxUnavailableError, python_command
from nemo_gym.sandbox import slots as sandbox_slots
from tests.sandbox_programs import ISOLATED, limits


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
