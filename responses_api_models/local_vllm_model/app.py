"""local_vllm_model: vllm_model in front of a vLLM server this model server starts itself (NeMo Gym 0.7's
keys: `model`, `hf_home`, `vllm_serve_kwargs`, `vllm_serve_env_vars`, and every vllm_model key).

At setup the server runs `vllm serve <model>` as its child on 127.0.0.1 and a free port, waits (at most
`vllm_startup_deadline_s`) until it answers, and from then on serves exactly as vllm_model does with that
URL as `base_url`; the child ends with the server. A config that sets `base_url` starts nothing and uses
that server, as in 0.7. There is no Ray and no GPU placement here: vLLM uses the GPUs this process sees.
"""

from __future__ import annotations

import os
import shlex
from typing import Any

from fastapi import FastAPI
from pydantic import Field, PrivateAttr, SecretStr, field_validator

from nemo_gym.global_config import find_open_port, get_hf_token
from nemo_gym.server_utils import CHECK_CONFIG_ONLY_ENV_VAR_NAME
from responses_api_models.local_vllm_model.vllm_process import (
    RESERVED_SERVE_KEYS,
    VLLMChild,
    child_environment,
    serve_command,
)
from responses_api_models.vllm_model.app import VLLMModel, VLLMModelConfig


class LocalVLLMModelConfig(VLLMModelConfig):
    """vllm_model's keys (README.md there), with `base_url` and `api_key` filled in by the start, plus
    how to start vLLM. NeMo Gym 0.7's Ray keys (`ray_worker_py_executable`, `show_vllm_engine_stats`,
    `debug`) are accepted and have no effect."""

    base_url: list[str] = Field(default_factory=list)  # empty: start vLLM here
    api_key: SecretStr = SecretStr("dummy")  # a local vLLM checks no key
    hf_home: str | None = None
    vllm_serve_kwargs: dict[str, Any] = Field(default_factory=dict)
    vllm_serve_env_vars: dict[str, str] = Field(default_factory=dict)
    # The program that takes vLLM's `serve` subcommand, with any leading arguments of its own.
    vllm_serve_command: list[str] = Field(default_factory=lambda: ["vllm"], min_length=1)
    vllm_startup_deadline_s: float = Field(default=1800.0, gt=0)

    @field_validator("vllm_serve_command", mode="before")
    @classmethod
    def _command_line_is_split(cls, value: Any) -> Any:
        return shlex.split(value) if isinstance(value, str) else value

    @field_validator("vllm_serve_kwargs")
    @classmethod
    def _address_is_ours(cls, kwargs: dict[str, Any]) -> dict[str, Any]:
        for key in kwargs:
            if key.replace("-", "_") in RESERVED_SERVE_KEYS:
                raise ValueError(
                    f"{key}: set by local_vllm_model (`model` is the served checkpoint; vLLM listens on "
                    "127.0.0.1 and a free port); remove it"
                )
        return kwargs

    @field_validator("vllm_serve_kwargs", "vllm_serve_env_vars", mode="before")
    @classmethod
    def _null_is_empty_mapping(cls, value: Any) -> Any:
        return {} if value is None else value


class LocalVLLMModel(VLLMModel):
    config: LocalVLLMModelConfig

    _vllm: VLLMChild | None = PrivateAttr(default=None)

    def setup_webserver(self) -> FastAPI:
        """Start vLLM and wait until it answers before serving; `gym env validate` (check-only) starts
        nothing. A start that fails is the server's one-line error, with the child's last output."""
        if not self.config.base_url and os.environ.get(CHECK_CONFIG_ONLY_ENV_VAR_NAME) != "1":
            self._start_vllm()
        try:
            app = super().setup_webserver()
        except BaseException:
            self._stop_vllm()
            raise
        app.router.on_shutdown.append(self._stop_vllm)
        return app

    def _start_vllm(self) -> None:
        config = self.config
        port = find_open_port()
        command = serve_command(config.vllm_serve_command, config.model, port, config.vllm_serve_kwargs)
        self._vllm = VLLMChild.start(command, child_environment(self._vllm_env()), port)
        try:
            self._vllm.wait_until_ready(config.vllm_startup_deadline_s)
        except BaseException:
            self._stop_vllm()
            raise
        config.base_url = [self._vllm.base_url]

    def _vllm_env(self) -> dict[str, str]:
        """vLLM's own variables: where Hugging Face files go, the token, then the config's."""
        env: dict[str, str] = {}
        if self.config.hf_home:
            env["HF_HOME"] = self.config.hf_home
        token = get_hf_token()
        if token:
            env["HF_TOKEN"] = token
        return {**env, **self.config.vllm_serve_env_vars}

    def _stop_vllm(self) -> None:
        if self._vllm is not None:
            self._vllm.stop()


if __name__ == "__main__":
    LocalVLLMModel.run_webserver()
