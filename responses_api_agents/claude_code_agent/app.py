"""ClaudeCodeAgent: Claude Code (`claude -p`, from the npm registry) runs each rollout headless.

The CLI calls the deployment's model server over the Anthropic Messages API (`/v1/messages`, streamed), with
the model server's address under the rollout's prefix; tools (Bash, Edit, Read, ...) run inside a fresh
workspace. Its stream-json output becomes the rollout's Gym output items (`trajectory.py`), which go to the
resources server's `/verify`. Compatible with NeMo Gym 0.7's claude_code_agent (same folder, config keys,
launch and output shape); the run itself (workspace, home, deadline, caps) is `nemo_gym.agents.cli_agents`.
"""

from __future__ import annotations

from pathlib import Path

import orjson
from pydantic import Field, SecretStr

from nemo_gym.agents.cli_agents import CliAgent, CliAgentConfig
from nemo_gym.agents.cli_trajectories import Trajectory
from responses_api_agents.claude_code_agent.trajectory import parse_stream_json

FOLDER = Path(__file__).resolve().parent
PACKAGE = "@anthropic-ai/claude-code"
# How often Claude Code itself retries a failed model call; the model server has bounded retries of its own.
CLI_RETRIES = "1"
# Claude Code's own switches for a run that reaches nothing but the model server.
OFFLINE_ENV = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "CLAUDE_CODE_ENABLE_TELEMETRY": "0",
    "CLAUDE_CODE_ATTRIBUTION_HEADER": "0",
    "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
    "IS_SANDBOX": "1",  # lets --dangerously-skip-permissions run as root (the workspace is the sandbox)
}


class ClaudeCodeAgentConfig(CliAgentConfig):
    model: str = Field(default="claude-sonnet-4-6", description="the model name Claude Code asks for")
    anthropic_api_key: SecretStr = Field(
        default=SecretStr("gym-local"), description="sent to the model server as x-api-key; never shown"
    )
    anthropic_base_url: str | None = Field(
        default=None, description="the Messages endpoint for the CLI; default: model_server's address"
    )
    max_turns: int | None = Field(default=30, ge=1, description="--max-turns; null = no limit")
    allowed_tools: str | None = Field(default=None, description="--allowedTools")
    disallowed_tools: str | None = Field(default=None, description="--disallowedTools")
    claude_code_version: str | None = Field(
        default=None, description="must equal the version package-lock.json pins (null = that one)"
    )
    max_output_tokens: int | None = Field(
        default=None,
        ge=1,
        description="CLAUDE_CODE_MAX_OUTPUT_TOKENS: max_tokens of each model call (CLI default: 32000)",
    )
    thinking: str | None = Field(default=None, description="--thinking")
    max_thinking_tokens: int | None = Field(default=None, ge=1, description="--max-thinking-tokens")
    bare: bool = Field(default=True, description="--bare: no hooks, plugins, memory or CLAUDE.md discovery")
    mcp_config: str | None = Field(default=None, description="an MCP servers JSON file (--mcp-config)")
    settings: str | None = Field(
        default=None, description="a settings JSON file layered over the offline ones"
    )


class ClaudeCodeAgent(CliAgent):
    config: ClaudeCodeAgentConfig
    program: str = "claude"
    folder: Path = FOLDER
    package: str = PACKAGE
    version_key: str = "claude_code_version"

    def check_config(self) -> None:
        for key in ("mcp_config", "settings"):
            path = getattr(self.config, key)
            if path and not Path(path).expanduser().is_file():
                raise ValueError(f"{key}: no file at {path}")

    def model_target(self) -> str:
        return self.config.anthropic_base_url or self.model_base_url("")

    def prepare(
        self, system: str | None, model_url: str, workspace: Path, home: Path
    ) -> tuple[list[str], dict[str, str]]:
        config_dir = home / ".claude"
        config_dir.mkdir()
        (config_dir / "settings.json").write_bytes(orjson.dumps(self._settings()))
        model = self.config.model
        env = {
            **OFFLINE_ENV,
            "CLAUDE_CONFIG_DIR": str(config_dir),
            "CLAUDE_CODE_MAX_RETRIES": CLI_RETRIES,
            "API_TIMEOUT_MS": str(int(self.config.timeout * 1000)),
            "ANTHROPIC_BASE_URL": model_url,
            "ANTHROPIC_API_KEY": self.config.anthropic_api_key.get_secret_value(),
            "ANTHROPIC_MODEL": model,
            "ANTHROPIC_DEFAULT_HAIKU_MODEL": model,
            "ANTHROPIC_DEFAULT_SONNET_MODEL": model,
            "ANTHROPIC_DEFAULT_OPUS_MODEL": model,
            "CLAUDE_CODE_SUBAGENT_MODEL": model,
        }
        if self.config.max_output_tokens is not None:
            env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] = str(self.config.max_output_tokens)
        return [str(self._cli), *self._flags(system)], env  # `claude -p` reads the task on stdin

    def model_name(self) -> str:
        return self.config.model

    def parse(self, stdout: str, home: Path) -> Trajectory:
        return parse_stream_json(stdout)

    def _flags(self, system: str | None) -> list[str]:
        config = self.config
        flags = ["-p", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"]
        flags += ["--bare"] if config.bare else []
        flags += ["--model", config.model]
        optional = {
            "--append-system-prompt": system,
            "--mcp-config": config.mcp_config and str(Path(config.mcp_config).expanduser()),
            "--allowedTools": config.allowed_tools,
            "--disallowedTools": config.disallowed_tools,
            "--thinking": config.thinking,
            "--max-thinking-tokens": config.max_thinking_tokens,
            "--max-turns": config.max_turns,
        }
        for flag, value in optional.items():
            flags += [flag, str(value)] if value is not None else []
        return flags

    def _settings(self) -> dict:
        """The offline switches as settings too; a `settings` file adds to them (its `env` merged in)."""
        settings: dict = {"env": {key: OFFLINE_ENV[key] for key in OFFLINE_ENV if key != "IS_SANDBOX"}}
        if self.config.settings:
            extra = orjson.loads(Path(self.config.settings).expanduser().read_bytes())
            settings = {**settings, **extra, "env": {**settings["env"], **(extra.get("env") or {})}}
        return settings


if __name__ == "__main__":
    ClaudeCodeAgent.run_webserver()
