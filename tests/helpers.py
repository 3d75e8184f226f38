"""Start real server subprocesses on 127.0.0.1 and learn the address they bound."""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import requests
import yaml

from nemo_gym.http.client import RetryPolicy, get_response_json, request
from nemo_gym.launch.preflight import DEFAULT_READINESS_DEADLINE_S
from nemo_gym.serving.parent_death import die_with_parent
from nemo_gym.testing import (  # noqa: F401  (re-exported: the tests import them from here)
    STARTUP_DEADLINE_S,
    StartedServer,
    instance_config,
    run_instance,
    run_server,
    stop_process,
)
from tests.upstream_script import ModelRoles, fresh_model

REPO_ROOT = Path(__file__).resolve().parents[1]
GYM_CLI = Path(sys.executable).parent / "gym"
# Generous: a `gym` command is a whole subprocess (often a deployment), slow on a busy machine.
GYM_CLI_TIMEOUT_S = 180
# `gym test` runs a folder's whole test suite.
GYM_TEST_TIMEOUT_S = 300
NEVER_PRINTED = "\0never printed\0"


# Server folders that need a program this machine may lack (`make browser-tools` installs Chromium): the
# tests that start every folder leave such a folder out, saying why, where none of its programs is found.
FOLDER_PROGRAMS = {"interactive_browser": ("chromium", "chromium-browser")}
# Agent folders running an npm CLI that `make agent-clis` installs under the folder's node_modules/.bin.
FOLDER_CLIS = {
    "claude_code_agent": "claude",
    "codex_agent": "codex",
    "cline_agent": "cline",
    "opencode_agent": "opencode",
}


def missing_program(folder: str) -> str | None:
    """Why the server folder `folder` cannot start here, or None when it can."""
    programs = FOLDER_PROGRAMS.get(folder, ())
    if programs and not any(shutil.which(program) for program in programs):
        return f"{folder} needs {' or '.join(programs)}, not installed here (make browser-tools)"
    cli = FOLDER_CLIS.get(folder)
    if cli and not (REPO_ROOT / "responses_api_agents" / folder / "node_modules" / ".bin" / cli).exists():
        return f"{folder} needs the {cli} CLI, not installed under its node_modules (make agent-clis)"
    return None


class OutputReader:
    """Collects a process's output lines in a thread, so a test can wait for a line with a timeout."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._seen_up_to = 0
        threading.Thread(target=self._read, args=(process,), daemon=True).start()

    def _read(self, process: subprocess.Popen) -> None:
        for line in process.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, text: str, timeout_s: float) -> str:
        """The first line containing `text`, looking at lines already read first."""
        for line in self.lines:
            if text in line:
                return line
        deadline = time.monotonic() + timeout_s
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
            if text in line:
                return line
        raise AssertionError(f"never printed {text!r}; the output was:\n" + "\n".join(self.lines))


@contextmanager
def run_resources_fixture(
    fixture: Path, instance: str, implementation: str, workdir: Path, **settings: Any
) -> Iterator[StartedServer]:
    """A resources server of `tests/fixtures/`, configured as instance `instance` (with `settings`), as the
    launcher starts one."""
    config = {instance: instance_config("resources_servers", implementation, domain="other", **settings)}
    with run_fixture_instance(fixture, config, instance, workdir) as started:
        yield started


@contextmanager
def run_fixture_instance(
    fixture: Path, config: dict, instance: str, workdir: Path
) -> Iterator[StartedServer]:
    """A server script of `tests/fixtures/`, as the launcher starts instance `instance` of `config` (peers
    it calls must be in `config` with their real ports)."""
    config_file = workdir / f"config-{instance}.json"
    config_file.write_bytes(orjson.dumps(config))  # JSON is YAML
    env = {"NEMO_GYM_CONFIG_FILE": str(config_file), "NEMO_GYM_CONFIG_PATH": instance}
    with run_server([str(fixture)], workdir, env) as started:
        yield started


# Above any readiness deadline a test deployment sets (the launcher's default, or the big deployment's
# BIG_DEPLOYMENT_READINESS_S), plus time to parse the config and spawn the servers.
BIG_DEPLOYMENT_READINESS_S = 600.0
LAUNCHER_VERDICT_S = max(DEFAULT_READINESS_DEADLINE_S, BIG_DEPLOYMENT_READINESS_S) + STARTUP_DEADLINE_S


@dataclass
class RunningDeployment:
    """A `gym run` process started by a test, with the instances its head server reports."""

    process: subprocess.Popen
    head_url: str
    instances: dict[str, dict]
    output: OutputReader

    def url(self, instance_name: str) -> str:
        return self.instances[instance_name]["url"]

    def pids(self) -> list[int]:
        return [instance["pid"] for instance in self.instances.values()]

    def wait_for_output(self, text: str, timeout_s: float = STARTUP_DEADLINE_S) -> str:
        return self.output.wait_for(text, timeout_s)


def gym_command(*args: str) -> list[str]:
    return [str(GYM_CLI), *args]


def process_alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


@contextmanager
def running_deployment(
    args: list[str], cwd: Path, env: dict[str, str] | None = None
) -> Iterator[RunningDeployment]:
    """Run `gym run <args>` with the head server on any free port until every server is up; always stop it.

    The head server's address is read from the instance table, so the table must tell the truth."""
    process = subprocess.Popen(
        gym_command("run", *args, "++head_server.port=0"),
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # A test worker that crashes runs no teardown: its deployment must not outlive it (a leftover one
        # holds a hundred servers' memory).
        preexec_fn=lambda: die_with_parent(signal.SIGTERM),
    )
    try:
        output = OutputReader(process)
        # `gym run` itself gives up on a server that does not come up, naming it: wait for its verdict
        # rather than for a clock of our own, which a busy machine would outrun.
        head_url = output.wait_for("head_server ", LAUNCHER_VERDICT_S).split()[3]
        output.wait_for("server(s) are up", LAUNCHER_VERDICT_S)
        with urllib.request.urlopen(f"{head_url}/server_instances", timeout=10) as answer:
            instances = {entry["process_name"]: entry for entry in orjson.loads(answer.read())}
        yield RunningDeployment(process, head_url, instances, output)
    finally:
        stop_process(process, grace_s=15)


def service_control(server: StartedServer, method: str, path: str, body: dict | None = None) -> Any:
    """Call a control route (`/_state`, `/_faults`, ...) of a local stand-in service; its JSON answer."""
    response = requests.request(method, server.url + path, json=body, timeout=10)
    response.raise_for_status()
    return response.json()


def one_line_error(result: subprocess.CompletedProcess) -> str:
    """The stderr of a CLI run that failed the way users should see failures: one line, no traceback."""
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr.strip()


def files_under(folder: Path) -> set[str]:
    """Every file and folder below `folder`, relative to it."""
    return {str(path.relative_to(folder)) for path in folder.rglob("*")}


def worker_pids(leader: int) -> list[int]:
    """The processes a server forked to serve beside it (its direct children)."""
    return [int(pid) for pid in Path(f"/proc/{leader}/task/{leader}/children").read_text().split()]


def socket_inodes(pid: int) -> set[str]:
    """The inodes of the sockets `pid` holds open."""
    inodes = set()
    for descriptor in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(descriptor)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    return inodes


def established_connections(
    owned_by: set[int], local_ports: list[int] | None = None, remote_ports: list[int] | None = None
) -> int:
    """Open TCP connections (IPv4, /proc/net/tcp) held by these processes, with one of these ports."""
    inodes = set().union(*(socket_inodes(pid) for pid in owned_by))
    rows = [line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:]]
    return sum(
        1
        for row in rows
        if row[3] == "01"
        and row[9] in inodes
        and (local_ports is None or int(row[1].split(":")[1], 16) in local_ports)
        and (remote_ports is None or int(row[2].split(":")[1], 16) in remote_ports)
    )


def all_output(output: OutputReader) -> list[str]:
    """Every line printed by a process that has exited (reads its output to the end)."""
    with contextlib.suppress(AssertionError):
        output.wait_for(NEVER_PRINTED, timeout_s=10)
    return output.lines


def write_config(workdir: Path, config: dict) -> str:
    (workdir / "deployment.yaml").write_text(yaml.safe_dump(config))
    return "+config_paths=[deployment.yaml]"


# A bound on waiting for processes to exit, not a speed: `wait_until_gone` returns as soon as they have.
EXIT_WAIT_S = 60.0


def wait_until_gone(pids: list[int], timeout_s: float = EXIT_WAIT_S) -> list[int]:
    """The pids still alive after `timeout_s` (checked until then; returns early when all are gone)."""
    deadline = time.monotonic() + timeout_s
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in alive if process_alive(pid)]
        if alive:
            time.sleep(0.05)
    return alive


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class CounterAgentStack:
    """simple_agent over the session-counter environment and openai_model in front of a scripted upstream."""

    agent_url: str
    model_url: str


@contextmanager
def counter_agent_stack(
    upstream_base_url: str, model: str, workdir: Path, **agent_settings: Any
) -> Iterator[CounterAgentStack]:
    """Start the three servers, each a real process, peers wired by their bound ports."""
    config = {
        "counter_rs": instance_config("resources_servers", "example_session_state_mgmt", domain="agent"),
        "policy_model": instance_config(
            "responses_api_models",
            "openai_model",
            openai_base_url=upstream_base_url,
            openai_api_key="sk-counter-agent-test",
            openai_model=model,
        ),
    }
    with contextlib.ExitStack() as servers:
        counter = servers.enter_context(run_instance(config, "counter_rs", workdir))
        model_server = servers.enter_context(run_instance(config, "policy_model", workdir))
        config["counter_rs"]["resources_servers"]["example_session_state_mgmt"]["port"] = counter.port
        config["policy_model"]["responses_api_models"]["openai_model"]["port"] = model_server.port
        config["agent"] = instance_config(
            "responses_api_agents",
            "simple_agent",
            resources_server={"type": "resources_servers", "name": "counter_rs"},
            model_server={"type": "responses_api_models", "name": "policy_model"},
            **agent_settings,
        )
        agent = servers.enter_context(run_instance(config, "agent", workdir))
        yield CounterAgentStack(agent.url, model_server.url)


def run_with_port(servers: contextlib.ExitStack, config: dict, instance: str, workdir: Path) -> StartedServer:
    """Start `instance` of `config` within `servers` and write the port it bound into its block, so the
    instances started after it can call it."""
    started = servers.enter_context(run_instance(config, instance, workdir))
    (inner,) = next(iter(config[instance].values())).values()
    inner["port"] = started.port
    return started


@dataclass
class RoleStack(ModelRoles):
    """A test stack: scripted models by role, and the agents under test by instance name."""

    urls: dict[str, str] = field(default_factory=dict)

    async def run(self, agent: str, row: dict) -> tuple[int, Any]:
        """(status, body) of the agent's `/run` for `row`."""
        answer = await request("POST", self.urls[agent] + "/run", json=row)
        return answer.status, await get_response_json(answer)


def run_role_models(
    servers: contextlib.ExitStack, upstream: Any, roles: list[str], workdir: Path, **settings: Any
) -> tuple[dict[str, Any], dict[str, str]]:
    """An openai_model instance `<role>_model` per role, each a fresh model name of the scripted upstream,
    started within `servers`: (their config blocks with the real ports, role -> model name)."""
    models = {role: fresh_model(role) for role in roles}
    config: dict[str, Any] = {}
    for role, model in models.items():
        config[f"{role}_model"] = instance_config(
            "responses_api_models", "openai_model", openai_base_url=upstream.base_url,
            openai_api_key=f"sk-{role}-test", openai_model=model, **settings,
        )  # fmt: skip
        run_with_port(servers, config, f"{role}_model", workdir)
    return config, models


@dataclass
class ScheduleAsked:
    """One question a retry loop put to `RetryPolicy.next_delay`, and what it was told."""

    max_attempts: int
    attempts: int
    retry_after_s: float | None
    remaining_s: float | None
    answer: float | None


def script_the_attempt_schedule(monkeypatch: Any, answers: list[float | None]) -> list[ScheduleAsked]:
    """Make the shared attempt schedule (`RetryPolicy.next_delay`) give `answers` in turn (then decide as
    usual) and record every question: a retry loop that keeps its own arithmetic asks nothing, so a test
    of it fails."""
    real = RetryPolicy.next_delay
    asked: list[ScheduleAsked] = []

    def next_delay(policy, attempts, retry_after_s=None, remaining_s=None):
        answer = answers.pop(0) if answers else real(policy, attempts, retry_after_s, remaining_s)
        asked.append(ScheduleAsked(policy.max_attempts, attempts, retry_after_s, remaining_s, answer))
        return answer

    monkeypatch.setattr(RetryPolicy, "next_delay", next_delay)
    return asked


def run_gym(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = GYM_CLI_TIMEOUT_S,
    command: str = "gym",
    unset_prefixes: tuple[str, ...] = (),
) -> subprocess.CompletedProcess:
    """`<command> <args>` (a console script of this venv, `gym` by default) in `cwd` as a user runs it, output
    captured and stdin closed (a prompt fails instead of hanging); `env` on top of this process's
    environment, less the variables starting with one of `unset_prefixes`."""
    inherited = {key: value for key, value in os.environ.items() if not key.startswith(unset_prefixes)}
    return subprocess.run(
        [str(GYM_CLI.parent / command), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**inherited, **(env or {})},
        stdin=subprocess.DEVNULL,
    )
