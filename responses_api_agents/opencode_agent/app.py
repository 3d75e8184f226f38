"""OpenCodeAgent: the OpenCode CLI (`opencode run`, from the npm registry) runs each rollout headless.

OpenCode calls the deployment's model server through a provider of its own config (`nemo`, the
`@ai-sdk/openai-compatible` provider bundled in the CLI: streamed `/v1/chat/completions`), at the model
server's address under the rollout's prefix, reached through the agent's relay; its tools run in a fresh
workspace. The session OpenCode keeps in its sqlite database (in the run's own data directory) is then read
back as the rollout's Gym output items (`trajectory.py`), which go to the resources server's `/verify`.
Compatible with NeMo Gym 0.7's opencode_agent (same folder, config keys, launch and output shape); the run
itself (workspace, home, deadline, caps) is `nemo_gym.agents.cli_agents`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from pydantic import Field

from nemo_gym.agents.cli_agents import (
    LOOPBACK_ONLY_ENV,
    OpenAICompatibleCliAgent,
    OpenAICompatibleCliConfig,
    merged,
)
from nemo_gym.agents.cli_trajectories import Trajectory
from responses_api_agents.opencode_agent.trajectory import parse_session

FOLDER = Path(__file__).resolve().parent
PACKAGE = "opencode-ai"
PROVIDER = "nemo"
DEFAULT_MODEL = "gym-policy-model"
# OpenCode's switches for a run that reaches nothing but the model server: no self-update, no model
# catalogue download, no plugins or LSP servers installed from the registry, no sharing, and nothing read
# from other tools' homes (~/.claude, external skills).
OFFLINE_ENV = {
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
    "OPENCODE_DISABLE_EMBEDDED_WEB_UI": "1",
    "OPENCODE_PURE": "1",
}


class OpenCodeAgentConfig(OpenAICompatibleCliConfig):
    model: str = Field(default=DEFAULT_MODEL, description="the model id OpenCode asks the model server for")
    thinking: bool = Field(default=False, description="--thinking: keep the model's reasoning in the session")
    opencode_config: dict[str, Any] = Field(
        default_factory=dict, description="merged over the generated opencode.json"
    )
    context_window: int = Field(
        default=262144, ge=1, description="the model's context limit, told to OpenCode"
    )
    max_output_tokens: int = Field(default=131072, ge=1, description="max output tokens of each model call")
    opencode_version: str | None = Field(
        default=None, description="must equal the version package-lock.json pins (null = that one)"
    )


class OpenCodeAgent(OpenAICompatibleCliAgent):
    config: OpenCodeAgentConfig
    program: str = "opencode"
    folder: Path = FOLDER
    package: str = PACKAGE
    version_key: str = "opencode_version"

    def model_name(self) -> str:
        return self.config.model

    def prepare(
        self, system: str | None, model_url: str, workspace: Path, home: Path
    ) -> tuple[list[str], dict[str, str]]:
        config_file = home / "opencode.json"
        config_file.write_bytes(orjson.dumps(self.opencode_config(model_url)))
        env = {**LOOPBACK_ONLY_ENV, **OFFLINE_ENV, "OPENCODE_CONFIG": str(config_file), **self.config.env}
        argv = [str(self._cli), "run", "--format", "json", "-m", f"{PROVIDER}/{self.config.model}"]
        # A title of its own: else OpenCode asks the model for one, a call that is not the rollout's.
        argv += ["--dir", str(workspace), "--title", "gym rollout", "--dangerously-skip-permissions"]
        argv += ["--thinking"] if self.config.thinking else []
        return [*argv, *self.config.extra_args], env

    def task_delivery(self, task: str, system: str | None) -> tuple[list[str], str]:
        """The task goes on stdin, which `opencode run` reads as its message (words given as arguments it
        would quote), the system text before it."""
        return [], f"{system}\n\n{task}" if system else task

    def parse(self, stdout: str, home: Path) -> Trajectory:
        return parse_session(home / ".local" / "share" / "opencode" / "opencode.db", stdout)

    def opencode_config(self, model_url: str) -> dict[str, Any]:
        """opencode.json of one run: the model server as provider `nemo` (its key from the environment
        would do too, but a file of the run's own is simplest), tools allowed without asking, no sharing
        or self-update; then `opencode_config` merged over it."""
        config = self.config
        settings = {
            "autoupdate": False,
            "share": "disabled",
            "permission": {"bash": "allow", "edit": "allow", "webfetch": "deny"},
            "provider": {
                PROVIDER: {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "Gym model server",
                    "options": {"baseURL": model_url, "apiKey": config.openai_api_key.get_secret_value()},
                    "models": {
                        config.model: {
                            "name": config.model,
                            "limit": {"context": config.context_window, "output": config.max_output_tokens},
                        }
                    },
                }
            },
        }
        return merged(settings, config.opencode_config)


if __name__ == "__main__":
    OpenCodeAgent.run_webserver()
