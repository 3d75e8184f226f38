"""nemo_gym.sandbox.isolation: untrusted programs are contained. Each containment test runs under
bubblewrap and under the unshare fallback (forced by config); `none` is never chosen for you."""

from __future__ import annotations

import asyncio
import os
import select
import shutil
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from nemo_gym.sandbox import resolve_isolation, run_sandboxed
from tests.sandbox_programs import ISOLATED, limits, marked, processes_with


def test_auto_finds_real_isolation_here():
    assert resolve_isolation("auto") in ISOLATED


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


@pytest.mark.parametrize("isolation", ISOLATED)
def test_an_isolation_asked_for_by_name_is_the_one_used(isolation):
    limits(isolation)  # skips where this isolation cannot run
    assert resolve_isolation(isolation) == isolation


@pytest.mark.parametrize("name", ["/etc/passwd", "sub/main.py", ".hidden", "", "two words.txt"])
async def test_an_input_file_name_must_be_a_plain_name(name):
    with pytest.raises(ValueError, match="use letters, digits"):
        await run_sandboxed("print(1)", files={name: "x"}, limits=limits("bwrap"))
