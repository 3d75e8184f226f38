"""A server's child process as the launcher sees it (nemo_gym.launch.child_processes): output read line by
line however long a line is, and the exit learnt from the process, not from the end of its output."""

import contextlib
import os
import signal
import sys
from pathlib import Path

import pytest

from nemo_gym.launch.child_processes import LineSplitter, start_child
from tests.helpers import all_output, running_deployment, wait_until_gone, write_config
from tests.launch_projects import counter_instance, run_dirs


@pytest.mark.parametrize("ending", ["server killed", "ctrl-c"])
def test_an_overlong_output_line_stops_neither_the_output_nor_the_supervision(workdir, ending):
    config = {"noisy": counter_instance("noisy"), "quiet": counter_instance()}
    args = [write_config(workdir, config), "+readiness_deadline_s=20"]
    with running_deployment(args, workdir) as deployment:
        deployment.wait_for_output("(noisy) after the long line")
        long_line = deployment.wait_for_output("(noisy) xxxxxxxxxx")
        assert "[line truncated" in long_line and len(long_line) < 20_000
        assert deployment.wait_for_output("(noisy) filler line 2999")
        pids = deployment.pids()
        if ending == "server killed":
            os.kill(deployment.instances["noisy"]["pid"], signal.SIGKILL)
            line = deployment.wait_for_output("exited with code")
            assert "'noisy'" in line and "-9" in line
            assert deployment.process.wait(15) == 1
        else:
            deployment.process.send_signal(signal.SIGINT)
            assert deployment.process.wait(15) == 0
        assert wait_until_gone(pids) == []
        assert not [line for line in all_output(deployment.output) if "Traceback" in line]


def test_stopping_finishes_while_a_server_helper_holds_its_output_open(workdir, private_tmp):
    config = {"parent": counter_instance("grandchild")}
    env = {"TMPDIR": str(private_tmp)}
    with running_deployment([write_config(workdir, config)], workdir, env) as deployment:
        helper_pid = int(deployment.wait_for_output("(parent) helper pid").split()[-1])
        try:
            pids = deployment.pids()
            deployment.process.send_signal(signal.SIGINT)
            assert deployment.process.wait(15) == 0
            assert wait_until_gone(pids) == []
            assert not [line for line in all_output(deployment.output) if "Traceback" in line]
            assert run_dirs(private_tmp) == []
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(helper_pid, signal.SIGKILL)


# A bound on waiting for a short-lived child, not a speed.
CHILD_WAIT_S = 30.0


def test_lines_split_across_chunks_come_out_whole():
    splitter = LineSplitter()
    assert splitter.feed(b"ab") == []
    assert splitter.feed(b"c\r\nde\n\xff!\n") == ["abc", "de", "\ufffd!"]


def test_a_long_line_is_cut_once_and_the_rest_of_it_dropped():
    splitter = LineSplitter(limit=8)
    assert splitter.feed(b"x" * 20) == ["xxxxxxxx [line truncated: longer than 8 bytes]"]
    assert splitter.feed(b"yyyy" * 10) == []
    assert splitter.feed(b"yy\nnext\n") == ["next"]


def test_the_unterminated_last_line_comes_when_the_stream_ends():
    splitter = LineSplitter()
    assert splitter.feed(b"first\nlast") == ["first"]
    assert splitter.flush() == ["last"]
    assert splitter.flush() == []


async def test_a_child_hands_over_stdout_and_stderr_line_by_line_and_its_exit_code(tmp_path: Path):
    lines: list[str] = []
    code = "import sys\nprint('out', flush=True)\nsys.stderr.write('err\\n')\nsys.exit(3)"
    child = await start_child(["-c", code], tmp_path, dict(os.environ), [], lines.append)
    assert await child.wait() == 3
    assert await child.output_ends_within(CHILD_WAIT_S)
    child.close()
    assert lines == ["out", "err"]


async def test_the_exit_is_known_while_a_helper_holds_the_output_open(tmp_path: Path):
    """The helper shares the child's output pipe and outlives it; stopping the group ends the helper too."""
    helper = (
        f"import subprocess\nsubprocess.Popen([{sys.executable!r}, '-c', 'import time; time.sleep(3600)'])"
    )
    child = await start_child(["-c", helper], tmp_path, dict(os.environ), [], lambda line: None)
    try:
        assert await child.exits_within(CHILD_WAIT_S) and child.returncode == 0
        assert not await child.output_ends_within(0), "the helper still holds the pipe"
    finally:
        child.signal_group(signal.SIGKILL)
    assert await child.output_ends_within(CHILD_WAIT_S)
    child.close()
