"""Agents that run a coding-agent CLI from the npm registry (claude, codex, ...) headless, one run per rollout.

The CLI talks to the deployment's model server in its own wire format, through a loopback relay that keeps
each call's token ids (`nemo_gym.agents.cli_model_relay`); the agent gives each run a workspace and a home of its
own (so no run sees another's files, settings or sessions, and nothing of the host's), the task on stdin,
an environment holding only what the CLI needs (no key of the agent's own process leaks in), a deadline
after which the CLI's whole process group is killed, and a cap on the output kept. What the CLI printed is
then turned into Gym output items by the agent folder's parser, the token ids put on them, and the rollout
is verified like any other (`nemo_gym.agents.rollout_agent`).

Each CLI is installed from its folder's own `package.json` / `package-lock.json` (`make agent-clis` runs
`npm ci` there) and found under that folder's `node_modules/.bin`, unless `cli_path` names another.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import orjson
from fastapi import FastAPI, Request, Response
from pydantic import Field, PrivateAttr, SecretStr, model_validator

from nemo_gym.agents.cli_model_relay import ModelCallRelay
from nemo_gym.agents.cli_trajectories import Trajectory, attach_token_ids
from nemo_gym.agents.rollout_agent import RolloutAgent, RolloutAgentConfig, RolloutRunRequest
from nemo_gym.config.errors import ConfigError
from nemo_gym.http.deadlines import bounded
from nemo_gym.http.errors import GymError
from nemo_gym.http.rollout_paths import with_current_rollout_prefix
from nemo_gym.text.extraction import content_text
from nemo_gym.wire.responses import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming

KILL_WAIT_S = 5.0
READ_CHUNK_BYTES = 64 * 1024
STDERR_TAIL_BYTES = 4096
# What a CLI run may read from its parent's environment; everything else (keys, tokens, proxies) stays out.
INHERITED_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS")
# Loopback traffic never goes through a proxy the host may configure.
NO_PROXY = "127.0.0.1,localhost,::1"
# For a CLI that reaches for the internet on its own (a package install, a feature-flag or telemetry call)
# with no switch to turn that off: everything but loopback goes to a proxy that refuses it at once, and an
# npm it runs stays offline.
DEAD_PROXY = "http://127.0.0.1:9"
LOOPBACK_ONLY_ENV = {
    "HTTP_PROXY": DEAD_PROXY,
    "HTTPS_PROXY": DEAD_PROXY,
    "http_proxy": DEAD_PROXY,
    "https_proxy": DEAD_PROXY,
    "npm_config_offline": "true",
    "npm_config_registry": DEAD_PROXY,
}


class CliAgentConfig(RolloutAgentConfig):
    """Keys every CLI agent has, besides `resources_server` / `model_server` (`RolloutAgentConfig`)."""

    timeout: float = Field(
        default=300, gt=0, description="seconds one CLI run may take; its processes are then killed"
    )
    cli_path: str | None = Field(
        default=None,
        description="the CLI program to run; default: node_modules/.bin/<cli> in the agent's folder",
    )
    system_prompt: str | None = Field(default=None, description="put before the task's own system message")
    cwd: str | None = Field(
        default=None, description="the CLI's working directory; default: a fresh empty directory per rollout"
    )
    max_output_bytes: int = Field(
        default=16 * 1024 * 1024, gt=0, description="stdout kept of one CLI run; a run printing more fails"
    )
    concurrency: int | None = Field(
        default=None, ge=1, description="NeMo Gym's name for max_concurrent_rollouts (CLI runs at once)"
    )

    @model_validator(mode="after")
    def _concurrency_caps_rollouts(self) -> CliAgentConfig:
        if self.concurrency is not None and self.max_concurrent_rollouts is None:
            self.max_concurrent_rollouts = self.concurrency
        return self


@dataclass
class CliRun:
    """One finished (or killed) CLI run."""

    returncode: int | None
    stdout: bytes
    stderr_tail: str
    timed_out: bool = False
    truncated: bool = False

    def failure(self, program: str, timeout_s: float, trajectory: Trajectory | None) -> str | None:
        """Why the run fails its rollout, or None: killed at its timeout, too much output, or an exit that
        is not a finished run (`trajectory` None: its output could not be read)."""
        if self.timed_out:
            return f"{program} did not finish within its {timeout_s:g}s timeout"
        if self.truncated:
            return f"{program} printed more than max_output_bytes"
        if trajectory is not None and trajectory.error:
            return f"{program} reported: {trajectory.error}"
        if self.returncode != 0 or trajectory is None or not trajectory.finished:
            return f"{program} exited with status {self.returncode} without finishing its run"
        return None

    def setup_failure(self, program: str, timeout_s: float) -> str | None:
        """Why a setup command (run before the task) fails the rollout, or None when it exited 0."""
        if self.timed_out:
            return f"{program} setup did not finish within the {timeout_s:g}s timeout"
        if self.returncode != 0:
            return f"{program} setup exited with status {self.returncode}"
        return None


@dataclass
class _Capped:
    """Bytes read from a pipe, keeping at most `limit` of them (the first, or the last with `tail`)."""

    limit: int
    tail: bool = False
    data: bytearray = field(default_factory=bytearray)
    overflowed: bool = False

    async def read_all(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(READ_CHUNK_BYTES):
            self.data += chunk
            if len(self.data) > self.limit:
                self.overflowed = True
                self.data = self.data[-self.limit :] if self.tail else self.data[: self.limit]


async def run_cli(
    argv: list[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    timeout_s: float,
    max_output_bytes: int,
    stdin: bytes = b"",
) -> CliRun:
    """Run `argv` in a process group of its own, `stdin` written to it and then closed; after `timeout_s`
    (or when the caller is cancelled) the whole group is killed, so no helper the CLI started outlives the
    rollout."""
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(env),
        cwd=cwd,
        start_new_session=True,
    )
    stdout = _Capped(max_output_bytes)
    stderr = _Capped(STDERR_TAIL_BYTES, tail=True)
    readers = asyncio.gather(
        _write_all(process.stdin, stdin), stdout.read_all(process.stdout), stderr.read_all(process.stderr)
    )
    timed_out = False
    try:
        try:
            await asyncio.wait_for(process.wait(), timeout_s)
        except TimeoutError:
            timed_out = True
    finally:
        await _kill_group(process)
        # A grandchild holding the pipes open dies with the group, so the readers end promptly.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(readers), KILL_WAIT_S)
    return CliRun(
        returncode=process.returncode,
        stdout=bytes(stdout.data),
        stderr_tail=stderr.data.decode(errors="replace"),
        timed_out=timed_out,
        truncated=stdout.overflowed,
    )


async def _write_all(pipe: asyncio.StreamWriter, data: bytes) -> None:
    """`data` to the CLI's stdin, then end of file; a CLI that exits without reading it all is no error."""
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        pipe.write(data)
        await pipe.drain()
    pipe.close()


async def _kill_group(process: asyncio.subprocess.Process) -> None:
    """SIGKILL to everything left in the run's process group, then reap the CLI (bounded)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(TimeoutError):
        await asyncio.shield(asyncio.wait_for(process.wait(), KILL_WAIT_S))


class OpenAICompatibleCliConfig(CliAgentConfig):
    """Keys of the CLI agents that call the model server as an OpenAI-compatible provider (Cline, OpenCode),
    with NeMo Gym's names."""

    openai_api_key: SecretStr = Field(
        default=SecretStr("gym-local"),
        description="sent to the model server as the bearer token; never shown",
    )
    openai_base_url: str | None = Field(
        default=None, description="another endpoint (ending in /v1) for the CLI instead of model_server's"
    )
    env: dict[str, str] = Field(default_factory=dict, description="extra environment of each CLI run")
    extra_args: list[str] = Field(default_factory=list, description="appended to the CLI's command line")
    timeout: float = Field(default=900, gt=0, description="seconds one CLI run may take; then it is killed")
    setup_timeout: float = Field(
        default=300, gt=0, description="seconds a setup step before the task may take (within timeout)"
    )


def cli_environment(home: Path, extra: Mapping[str, str]) -> dict[str, str]:
    """The environment of one CLI run: a few harmless variables of this process, a home of the run's own,
    no proxy for loopback, and `extra` (the CLI's own settings)."""
    inherited = {name: os.environ[name] for name in INHERITED_ENV if name in os.environ}
    tmp = home / "tmp"
    tmp.mkdir(exist_ok=True)
    return {
        **inherited,
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "NO_PROXY": NO_PROXY,
        "no_proxy": NO_PROXY,
        **extra,
    }


def resolve_cli(folder: Path, program: str, override: str | None) -> Path:
    """The CLI to run: `override` (the `cli_path` key) or the folder's node_modules/.bin/<program>. A CLI
    that is not there stops the agent at start with the way to install it."""
    path = Path(override).expanduser() if override else folder / "node_modules" / ".bin" / program
    if not (path.is_file() and os.access(path, os.X_OK)):
        where = "cli_path" if override else f"{folder.name}/node_modules/.bin"
        raise ValueError(
            f"{program} CLI not found at {path} ({where}); install it with `make agent-clis` "
            f"(npm ci in {folder}) or set cli_path to an installed {program}"
        )
    return path


def check_pinned_version(folder: Path, package: str, wanted: str | None, key: str) -> None:
    """NeMo Gym installs the CLI version a config names at start; here the version is the one the folder's
    package-lock.json pins, so a config naming another is refused rather than silently run on this one."""
    if not wanted:
        return
    lock = orjson.loads((folder / "package-lock.json").read_bytes())
    pinned = lock["packages"][f"node_modules/{package}"]["version"]
    if wanted != pinned:
        raise ValueError(
            f"{key}: {wanted} asked, but {folder.name}/package-lock.json pins {package} {pinned}; set {key} "
            f"to {pinned} or null, or change the pin in package.json and run `make agent-clis`"
        )


def instruction_of(params: dict[str, Any], system_prompt: str | None) -> tuple[str, str | None]:
    """The task a CLI gets from Responses params: the last user message's text, and the system text (the
    configured `system_prompt`, then the input's system/developer messages)."""
    items = params.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    system_parts = [system_prompt] if system_prompt else []
    if params.get("instructions"):
        system_parts.append(params["instructions"])
    task = ""
    for item in items or []:
        if not isinstance(item, dict) or item.get("type", "message") != "message":
            continue
        text = content_text(item.get("content"))
        if item.get("role") in ("system", "developer"):
            system_parts.append(text)
        elif item.get("role") == "user":
            task = text
    if not task.strip():
        raise GymError(422, "invalid_request", "responses_create_params.input: no user message for the CLI")
    system = "\n\n".join(part for part in system_parts if part) or None
    for text in (task, system or ""):
        if "\0" in text or not _encodable(text):
            raise GymError(
                422,
                "invalid_request",
                "responses_create_params: a NUL character or an unpaired surrogate, which no CLI can be given",
            )
    return task, system


def _encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`override` over `base`, tables merged key by key (a config key laid over a CLI's generated settings)."""
    result = dict(base)
    for key, value in override.items():
        both_tables = isinstance(value, dict) and isinstance(result.get(key), dict)
        result[key] = merged(result[key], value) if both_tables else value
    return result


class CliAgent(RolloutAgent):
    """`/run`: seed, one CLI run in a fresh workspace, verify. `/v1/responses`: the CLI run alone.

    A subclass names its `program` and `folder`, builds the run (`prepare`) and parses what the CLI printed
    (`parse`)."""

    config: CliAgentConfig
    program: str = "cli"
    folder: Path = Path()
    # The npm package of the CLI, and the config key that may name its version (NeMo Gym's).
    package: str = ""
    version_key: str = ""

    _cli: Path = PrivateAttr(default=Path())
    _relay: ModelCallRelay = PrivateAttr(default_factory=ModelCallRelay)

    def setup_webserver(self) -> FastAPI:
        """A CLI that is not installed stops the agent at start, saying how to install it."""
        try:
            self._cli = resolve_cli(self.folder, self.program, self.config.cli_path)
            wanted = getattr(self.config, self.version_key, None)
            check_pinned_version(self.folder, self.package, wanted, self.version_key)
            self.check_config()
        except ValueError as error:
            raise ConfigError(str(error)) from error
        return super().setup_webserver()

    def check_config(self) -> None:
        """Raise ValueError naming a key this agent cannot run with (checked at start)."""

    def model_base_url(self, path: str) -> str:
        """The model server's address (+ `path`) under the rollout's prefix, so the CLI's calls are the
        rollout's (and recorded when training-token capture is on)."""
        base = self.server_client.server_base_url(self.config.model_server.name).rstrip("/")
        return base + with_current_rollout_prefix(path)

    def model_target(self) -> str:
        """The base URL the CLI's model calls go to (through the relay, which records their token ids)."""
        raise NotImplementedError

    def redacted(self, failure: str, stderr_tail: str) -> str:
        """`failure` with the end of the CLI's stderr, no configured secret (API key) in either."""
        said = stderr_tail.strip()[-800:]
        message = f"{failure}; its last output: {said}" if said else failure
        for value in vars(self.config).values():
            if isinstance(value, SecretStr) and value.get_secret_value():
                message = message.replace(value.get_secret_value(), "***")
        return message

    def prepare(
        self, system: str | None, model_url: str, workspace: Path, home: Path
    ) -> tuple[list[str], dict[str, str]]:
        """argv and the extra environment of one run, which reads its task on stdin (files it needs go
        under `home`); `model_url` is the base URL the CLI calls, standing for `model_target()`."""
        raise NotImplementedError

    def task_delivery(self, task: str, system: str | None) -> tuple[list[str], str]:
        """How the CLI gets its task: argv words after `prepare`'s, and the text written on its stdin (by
        default the task alone there; the system text then goes in `prepare`'s flags)."""
        return [], task

    def setup_timeout_s(self) -> float:
        """Seconds the setup command may take (within the run's timeout)."""
        return self.config.timeout

    def setup_argv(self, model_url: str, workspace: Path, home: Path) -> list[str] | None:
        """A command run before the task, in the run's environment (e.g. one writing the CLI's provider
        settings into the run's home), or None; it must exit 0 within the run's deadline."""
        return None

    def parse(self, stdout: str, home: Path) -> Trajectory | None:
        """The run's trajectory, from what the CLI printed or what it left in the run's `home`; None when
        there is none to read (the run then failed)."""
        raise NotImplementedError

    def model_name(self) -> str:
        """The model the CLI was told to ask for (the answer's `model` when the task names none)."""
        return self.program

    async def cli_response(self, params: dict[str, Any]) -> dict[str, Any]:
        """Run the CLI once on the task of `params` and answer what it did as a Response."""
        task, system = instruction_of(params, self.config.system_prompt)
        timeout_s = bounded(self.config.timeout)
        with tempfile.TemporaryDirectory(prefix=f"gym-{self.program}-") as scratch:
            home = Path(scratch) / "home"
            home.mkdir()
            workspace = Path(self.config.cwd).expanduser() if self.config.cwd else Path(scratch) / "workspace"
            workspace.mkdir(parents=True, exist_ok=True)
            target = self.model_target()
            # The target is Gym's own model server when it is the address resolved from its instance name.
            to_gym_server = target.startswith(self.model_base_url(""))
            async with self._relay.relayed(target, timeout_s, to_gym_server) as (model_url, relayed):
                ends_at = time.monotonic() + timeout_s
                argv, extra_env = self.prepare(system, model_url, workspace, home)
                env = cli_environment(home, extra_env)
                if setup := self.setup_argv(model_url, workspace, home):
                    setup_s = min(timeout_s, self.setup_timeout_s())
                    run = await self._run_within(setup, env, workspace, setup_s, b"")
                    if failure := run.setup_failure(self.program, setup_s):
                        self.fail(run, failure)
                words, stdin = self.task_delivery(task, system)
                left_s = max(0.0, ends_at - time.monotonic())
                run = await self._run_within([*argv, *words], env, workspace, left_s, stdin.encode())
            trajectory = (
                None
                if run.timed_out or run.truncated
                else self.parse(run.stdout.decode(errors="replace"), home)
            )
        if (failure := run.failure(self.program, timeout_s, trajectory)) is not None:
            self.fail(run, failure)
        trajectory.metadata["token_ids"] = attach_token_ids(trajectory.output, relayed.calls)
        response = {
            "id": f"resp_{os.urandom(12).hex()}",
            "object": "response",
            "created_at": int(time.time()),
            "model": params.get("model") or self.model_name(),
            "output": trajectory.output,
            "usage": trajectory.usage,
            "tools": params.get("tools") or [],
            "tool_choice": params.get("tool_choice") or "auto",
            "parallel_tool_calls": params.get("parallel_tool_calls", True),
            "metadata": trajectory.metadata,
        }
        return NeMoGymResponse.model_validate(response).model_dump(mode="json", exclude_none=True)

    def fail(self, run: CliRun, failure: str) -> NoReturn:
        """Fail the rollout: 504 `timeout` when the run was killed at its deadline, else 502 `cli_failed`."""
        raise GymError(504 if run.timed_out else 502, "timeout" if run.timed_out else "cli_failed",
                       self.redacted(failure, run.stderr_tail))  # fmt: skip

    async def _run_within(
        self, argv: list[str], env: dict[str, str], workspace: Path, timeout_s: float, stdin: bytes
    ) -> CliRun:
        """One CLI process of the run; an argument list the system refuses as too long is the task's
        fault (its text), so a 422."""
        try:
            return await run_cli(
                argv, env=env, cwd=workspace, timeout_s=timeout_s,
                max_output_bytes=self.config.max_output_bytes, stdin=stdin,
            )  # fmt: skip
        except OSError as error:
            if error.errno != errno.E2BIG:
                raise
            raise GymError(
                422,
                "invalid_request",
                "responses_create_params: the task or system text is too long for the CLI",
            ) from error

    async def responses(
        self, request: Request, response: Response, body: NeMoGymResponseCreateParamsNonStreaming
    ) -> NeMoGymResponse:
        answer = await self.as_rollout(self.cli_response(body.model_dump(mode="json", exclude_unset=True)))
        return NeMoGymResponse.model_validate(answer)

    async def run(self, request: Request, body: RolloutRunRequest) -> Response:
        """Seed the session, run the CLI on the task, verify what it did; the verify answer as is."""
        return Response(await self.as_rollout(self._run(request, body)), media_type="application/json")

    async def _run(self, request: Request, body: RolloutRunRequest) -> bytes:
        row = body.model_dump(mode="json", exclude_unset=True)
        rollout = await self.seeded_rollout(request, row)
        answer = await self.cli_response(row["responses_create_params"])
        return await self.verified(row, answer, rollout)


class OpenAICompatibleCliAgent(CliAgent):
    """A CLI agent whose CLI calls the model server's OpenAI-compatible `/v1` (Chat Completions)."""

    config: OpenAICompatibleCliConfig

    def model_target(self) -> str:
        return self.config.openai_base_url or self.model_base_url("/v1")

    def setup_timeout_s(self) -> float:
        return self.config.setup_timeout
