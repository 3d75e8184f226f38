"""A server's child process as the launcher sees it (nemo_gym.launch.child_processes): output read line by
line however long a line is, and the exit learnt from the process, not from the end of its output."""

import contextlib
import os
import signal

import pytest

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
