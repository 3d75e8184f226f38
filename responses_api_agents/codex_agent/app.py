"""CodexAgent: the Codex CLI (`codex exec`, from the npm registry) runs each rollout headless.

Codex calls the deployment's model server through a model provider of its own config (`wire_api =
"responses"`: streamed `/v1/responses`), at the model server's address under the rollout's prefix; its
commands run in a fresh workspace. Its `--json` events become the rollout's Gym output items
(`trajectory.py`), which go to the resources server's `/verify`. Compatible with NeMo Gym 0.7's codex_agent
(same folder, config keys, launch and output shape); the run itself (workspace, home, deadline, caps) is
`nemo_gym.agents.cli_agents`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import tomli_w
from pydantic import Field, SecretStr

from nemo_gym.agents.cli_agents import CliAgent, CliAgentConfig, merged
from nemo_gym.agents.cli_trajectories import Trajectory
from responses_api_agents.codex_agent.trajectory import parse_exec_json

FOLDER = Path(__file__).resolve().parent
PACKAGE = "@openai/codex"
API_KEY_VARIABLE = "OPENAI_API_KEY"
# The name Codex is told when the config names none: a Gym model server answers with its own model anyway.
DEFAULT_MODEL = "gym-policy-model"
# How often Codex itself retries a failed model call; the model server has bounded retries of its own.
CLI_RETRIES = 1


class CodexAgentConfig(CliAgentConfig):
    model: str | None = Field(default=None, description="the model name Codex asks for")
    openai_api_key: SecretStr = Field(
        default=SecretStr("gym-local"),
        description="sent to the model server as the bearer token; never shown",
    )
    openai_base_url: str | None = Field(
        default=None,
        description="the Responses endpoint (ending in /v1) for the CLI; default: model_server's",
    )
    sandbox_mode: Literal["read-only", "workspace-write", "danger-full-access"] = "danger-full-access"
    timeout: float = Field(
        default=600, gt=0, description="seconds one CLI run may take; its processes are then killed"
    )
    reasoning_effort: str | None = Field(
        default=None, description="model_reasoning_effort (low, medium, high)"
    )
    codex_version: str | None = Field(
        default=None, description="must equal the version package-lock.json pins (null = that one)"
    )
    stream_idle_timeout_ms: int | None = Field(
        default=None, ge=1, description="the provider's stream idle budget; null = timeout"
    )
    extra_config: dict[str, Any] = Field(
        default_factory=dict, description="merged over the generated config.toml"
    )


class CodexAgent(CliAgent):
    config: CodexAgentConfig
    program: str = "codex"
    folder: Path = FOLDER
    package: str = PACKAGE
    version_key: str = "codex_version"

    def check_config(self) -> None:
        try:
            tomli_w.dumps(self.config.extra_config)
        except TypeError as error:
            raise ValueError(f"extra_config: cannot be written as TOML: {error}") from error

    def model_target(self) -> str:
        return self.config.openai_base_url or self.model_base_url("/v1")

    def prepare(
        self, system: str | None, model_url: str, workspace: Path, home: Path
    ) -> tuple[list[str], dict[str, str]]:
        codex_home = home / ".codex"
        codex_home.mkdir()
        (codex_home / "config.toml").write_text(tomli_w.dumps(self.codex_config(system, model_url)))
        env = {"CODEX_HOME": str(codex_home), API_KEY_VARIABLE: self.config.openai_api_key.get_secret_value()}
        argv = [
            str(self._cli),
            "exec",
            "--json",
            "--ephemeral",
            "--skip-git-repo-check",
            "--cd",
            str(workspace),
        ]
        return [*argv, "-"], env  # `-`: the task is read on stdin

    def model_name(self) -> str:
        return self.config.model or DEFAULT_MODEL

    def parse(self, stdout: str, home: Path) -> Trajectory:
        return parse_exec_json(stdout)

    def codex_config(self, system: str | None, model_url: str) -> dict[str, Any]:
        """config.toml of one run: a provider that is the model server, nothing that phones home or
        keeps history (update check, analytics, feedback, plugin sync), no tools a Gym model server cannot
        serve (web search, sub-agents, apps); then `extra_config` merged over it."""
        config = self.config
        settings: dict[str, Any] = {
            "model": config.model or DEFAULT_MODEL,
            "model_provider": "gym",
            "approval_policy": "never",
            "sandbox_mode": config.sandbox_mode,
            "web_search": "disabled",
            "check_for_update_on_startup": False,
            "analytics": {"enabled": False},
            "feedback": {"enabled": False},
            "history": {"persistence": "none"},
            "agents": {"enabled": False},
            # Plugins sync a curated catalogue from github.com and chatgpt.com at start; apps are ChatGPT's.
            "features": {"plugins": False, "apps": False},
            "model_providers": {
                "gym": {
                    "name": "gym",
                    "base_url": model_url,
                    "env_key": API_KEY_VARIABLE,
                    "wire_api": "responses",
                    "request_max_retries": CLI_RETRIES,
                    "stream_max_retries": CLI_RETRIES,
                    "stream_idle_timeout_ms": config.stream_idle_timeout_ms or int(config.timeout * 1000),
                }
            },
        }
        if config.reasoning_effort:
            settings["model_reasoning_effort"] = config.reasoning_effort
        if system:
            settings["developer_instructions"] = system
        return merged(settings, config.extra_config)


if __name__ == "__main__":
    CodexAgent.run_webserver()
