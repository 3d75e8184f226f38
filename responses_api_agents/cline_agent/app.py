"""ClineAgent: the Cline CLI (`cline --json`, from the npm registry) runs each rollout headless.

Before the task, `cline auth openai-compatible` writes the run's provider settings (the model server's
`/v1` address under the rollout's prefix, reached through the agent's relay) into a data directory of the
run's own; then `cline --json --auto-approve true` runs the task in a fresh workspace, calling the model
server's streamed `/v1/chat/completions`. Its JSON event stream becomes the rollout's Gym output items
(`trajectory.py`), which go to the resources server's `/verify`. Compatible with NeMo Gym 0.7's cline_agent
(same folder, config keys, launch and output shape); the run itself (workspace, home, deadline, caps) is
`nemo_gym.agents.cli_agents`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import Field

from nemo_gym.agents.cli_agents import LOOPBACK_ONLY_ENV, OpenAICompatibleCliAgent, OpenAICompatibleCliConfig
from nemo_gym.agents.cli_trajectories import Trajectory
from responses_api_agents.cline_agent.trajectory import parse_cline_json

FOLDER = Path(__file__).resolve().parent
PACKAGE = "cline"
# The one Cline provider whose base URL can be set, and which speaks the model servers' Chat Completions.
PROVIDER = "openai-compatible"
DEFAULT_MODEL = "gym-policy-model"


class ClineAgentConfig(OpenAICompatibleCliConfig):
    model: str | None = Field(default=None, description="the model id Cline asks the model server for")
    provider: str = Field(default=PROVIDER, description="must be openai-compatible (the model server)")
    system_prompt_override: str | None = Field(
        default=None, description="-s: replaces Cline's own system prompt (and its tool instructions)"
    )
    thinking: Literal["none", "low", "medium", "high", "xhigh"] | None = None
    compaction: Literal["agentic", "basic", "off"] | None = None
    retries: int | None = Field(
        default=None, ge=0, description="--retries: mistakes in a row before it stops"
    )
    command_permissions: dict[str, Any] = Field(
        default_factory=dict, description="CLINE_COMMAND_PERMISSIONS: shell commands allowed / denied"
    )
    cline_version: str | None = Field(
        default=None, description="must equal the version package-lock.json pins (null = that one)"
    )


class ClineAgent(OpenAICompatibleCliAgent):
    config: ClineAgentConfig
    program: str = "cline"
    folder: Path = FOLDER
    package: str = PACKAGE
    version_key: str = "cline_version"

    def check_config(self) -> None:
        if self.config.provider != PROVIDER:
            raise ValueError(
                f"provider: {self.config.provider} needs its own service on the internet; cline_agent runs "
                f"Cline against the model server only: set provider to {PROVIDER}"
            )

    def model_name(self) -> str:
        return self.config.model or DEFAULT_MODEL

    def setup_argv(self, model_url: str, workspace: Path, home: Path) -> list[str]:
        """`cline auth`: the only way to give Cline a base URL is its provider settings file."""
        return [
            str(self._cli), "auth", PROVIDER, "--apikey", self.config.openai_api_key.get_secret_value(),
            "--modelid", self.model_name(), "--baseurl", model_url, "--data-dir", str(home / "cline-data"),
        ]  # fmt: skip

    def prepare(
        self, system: str | None, model_url: str, workspace: Path, home: Path
    ) -> tuple[list[str], dict[str, str]]:
        data = home / "cline-data"
        settings = data / "settings"
        settings.mkdir(parents=True)
        # No telemetry and no self-update; the CLI reads these from its global settings.
        (settings / "global-settings.json").write_bytes(
            orjson.dumps({"telemetryOptOut": True, "autoUpdateEnabled": False})
        )
        config = self.config
        env = {
            "CLINE_DATA_DIR": str(data),
            "CLINE_DIR": str(home / ".cline"),
            "CLINE_PROVIDER_SETTINGS_PATH": str(settings / "providers.json"),
            "CLINE_GLOBAL_SETTINGS_PATH": str(settings / "global-settings.json"),
            "CLINE_MCP_SETTINGS_PATH": str(settings / "cline_mcp_settings.json"),
            "CLINE_SESSION_DATA_DIR": str(data / "sessions"),
            "CLINE_DB_DATA_DIR": str(data / "db"),
            "CLINE_TEAM_DATA_DIR": str(data / "teams"),
            "CLINE_HOOKS_LOG_PATH": str(data / "logs" / "hooks.jsonl"),
            # A process of the run's own, not a hub daemon shared with other runs.
            "CLINE_SESSION_BACKEND_MODE": "local",
            **LOOPBACK_ONLY_ENV,
            **config.env,
        }
        if config.command_permissions:
            env["CLINE_COMMAND_PERMISSIONS"] = orjson.dumps(config.command_permissions).decode()
        argv = [
            str(self._cli), "--json", "--auto-approve", "true", "--cwd", str(workspace), "--data-dir", str(data),
            "--timeout", str(max(1, int(config.timeout))), "-P", PROVIDER, "-m", self.model_name(),
        ]  # fmt: skip
        optional = {
            "--thinking": config.thinking,
            "--compaction": config.compaction,
            "--retries": config.retries,
            "-s": config.system_prompt_override,
        }
        for flag, value in optional.items():
            argv += [flag, str(value)] if value is not None else []
        return [*argv, *config.extra_args], env

    def task_delivery(self, task: str, system: str | None) -> tuple[list[str], str]:
        """The task is Cline's last argument (it reads none on stdin), after `--` so that a task starting
        with `-` is no flag, the system text before it; Cline takes a one-word argument for a command, so
        such a task gets a trailing space."""
        prompt = f"{system}\n\n{task}" if system else task
        return ["--", prompt if any(char.isspace() for char in prompt) else f"{prompt} "], ""

    def parse(self, stdout: str, home: Path) -> Trajectory:
        return parse_cline_json(stdout)


if __name__ == "__main__":
    ClineAgent.run_webserver()
