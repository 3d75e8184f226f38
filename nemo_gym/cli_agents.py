"""Agents that run a coding-agent CLI from the npm registry (claude, codex, ...) headless, one run per rollout.

The CLI talks to the deployment's model server in its own wire format, through a loopback relay that keeps
each call's token ids (`nemo_gym.cli_model_relay`); the agent gives each run a workspace and a home of its
own (so no run sees another's files, settings or sessions, and nothing of the host's), the task on stdin,
an environment holding only what the CLI needs (no key of the agent's own process leaks in), a deadline
after which the CLI's whole process group is killed, and a cap on the output kept. What the CLI printed is
then turned into Gym output items by the agent folder's parser, the token ids put on them, and the rollout
is verified like any other (`nemo_gym.rollout_agent`).

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
from typing import Any

import orjson
from fastapi import FastAPI, Request, Response
from pydantic import Field, PrivateAttr, SecretStr, model_validator

from nemo_gym.cli_model_relay import ModelCallRelay
from nemo_gym.config_types import ConfigError
from nemo_gym.deadlines import bounded
from nemo_gym.errors import GymError
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from nemo_gym.rollout_agent import RolloutAgent, RolloutAgentConfig, RolloutRunRequest
from nemo_gym.rollout_paths import with_current_rollout_prefix
from nemo_gym.text_extraction import content_text

KILL_WAIT_S = 5.0
READ_CHUNK_BYTES = 64 * 1024
STDERR_TAIL_BYTES = 4096
# What a CLI run may read from its parent's environment; everything else (keys, tokens, proxies) stays out.
INHERITED_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS")
# Output items a model call generates (tool results are the CLI's).
GENERATED_TYPES = frozenset({"message", "function_call", "reasoning"})
# Loopback traffic never goes through a proxy the host may configure.
NO_PROXY = "127.0.0.1,localhost,::1"


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


def attach_token_ids(output: list[dict[str, Any]], calls: list[dict[str, Any] | None]) -> str:
    """Put each model call's token fields on the last item it generated, as the model servers do: the
    output's turns (runs of generated items between tool results) are the calls, in order. Says whether
    that was done (`attached`), the model server had none (`unavailable`), or turns and calls did not
    line up one to one (`unmatched`: then nothing is attached rather than something wrong)."""
    if not calls or not any(calls):
        return "unavailable"
    turns: list[dict[str, Any]] = []  # the last generated item of each turn
    in_turn = False
    for item in output:
        generated = item.get("type") in GENERATED_TYPES
        if generated and in_turn:
            turns[-1] = item
        elif generated:
            turns.append(item)
        in_turn = generated or (in_turn and item.get("type") != "function_call_output")
    if len(turns) != len(calls) or not all(calls):
        return "unmatched"
    for item, fields in zip(turns, calls, strict=True):
        item.update(fields)
    return "attached"


@dataclass
class Trajectory:
    """What a CLI run produced, in Gym's terms."""

    output: list[dict[str, Any]]
    usage: dict[str, Any]
    # Whether the CLI reported the end of its run (a final answer, or a turn limit reached).
    finished: bool
    # The error the CLI reported (a failed model call, ...), if any: the rollout then fails with it.
    error: str | None = None
    # What the CLI said of its run (its outcome, e.g. that it hit max turns; its session id), as strings.
    metadata: dict[str, str] = field(default_factory=dict)


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


def json_events(stdout: str) -> list[dict[str, Any]]:
    """The JSON objects of a CLI's one-event-a-line output; other lines (warnings it printed) are skipped."""
    events = []
    for line in stdout.splitlines():
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


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


def assistant_message(text: str, item_id: str) -> dict[str, Any]:
    """A Responses output message item holding `text`."""
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def tool_call_items(call_id: str, name: str, arguments: str, output: str) -> list[dict[str, Any]]:
    """A tool call the CLI ran and its result, as a Responses function_call / function_call_output pair."""
    return [
        {"id": call_id, "type": "function_call", "call_id": call_id, "name": name, "arguments": arguments,
         "status": "completed"},
        {"type": "function_call_output", "call_id": call_id, "output": output},
    ]  # fmt: skip


def usage_of(input_tokens: int, output_tokens: int, cached: int = 0, reasoning: int = 0) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input_tokens + output_tokens,
    }


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

    def parse(self, stdout: str) -> Trajectory:
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
            async with self._relay.relayed(self.model_target(), timeout_s) as (model_url, relayed):
                argv, extra_env = self.prepare(system, model_url, workspace, home)
                try:
                    run = await run_cli(
                        argv,
                        env=cli_environment(home, extra_env),
                        cwd=workspace,
                        timeout_s=timeout_s,
                        max_output_bytes=self.config.max_output_bytes,
                        stdin=task.encode(),
                    )
                except OSError as error:
                    if error.errno != errno.E2BIG:
                        raise
                    raise GymError(
                        422,
                        "invalid_request",
                        "responses_create_params: the system text is too long for the CLI",
                    ) from error
        trajectory = (
            None if run.timed_out or run.truncated else self.parse(run.stdout.decode(errors="replace"))
        )
        failure = run.failure(self.program, timeout_s, trajectory)
        if failure is not None:
            raise GymError(504 if run.timed_out else 502, "timeout" if run.timed_out else "cli_failed",
                           self.redacted(failure, run.stderr_tail))  # fmt: skip
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
