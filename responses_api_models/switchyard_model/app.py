"""switchyard_model: openai_model in front of a Switchyard routing proxy, which picks per request the
upstream model that serves it. `switchyard_model` names a Switchyard route, not a provider model; the
model that served a call comes back on the answer.

NeMo Gym's switchyard_model keys. A call that came under `/ng-rollout/<id>/` (Gym's environment servers
always send one; agents pass it on) carries the rollout id to the proxy in each of `session_id_headers`,
so the proxy's routing decisions, session affinity and `/v1/stats` join back to the rollout. Attaching to a
running proxy (`switchyard_base_url`) is what this server does; hosting the proxy in-process from a
`deployment` TOML needs nemo-switchyard's native server, which is refused at start in one line saying how
to attach instead.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from pydantic import AliasChoices, Field, SecretStr, model_validator

from nemo_gym.http.rollout_paths import rollout_key_of
from nemo_gym.http.upstream import NeMoGymAsyncOpenAI
from responses_api_models.openai_model.app import OpenAIModel, OpenAIModelConfig
from responses_api_models.switchyard_model.condition import snapshot_stats, write_condition

logger = logging.getLogger("switchyard_model")
SESSION_ID_HEADER = "x-switchyard-session-id"


class SwitchyardModelConfig(OpenAIModelConfig):
    openai_base_url: str = Field(
        validation_alias=AliasChoices("switchyard_base_url", "openai_base_url"),
        description="the running proxy's base URL, ending in /v1",
    )
    openai_api_key: SecretStr = Field(
        default=SecretStr("dummy"),
        validation_alias=AliasChoices("switchyard_api_key", "openai_api_key"),
        description="sent as `Authorization: Bearer <key>`; never shown",
    )
    openai_model: str = Field(
        validation_alias=AliasChoices("switchyard_model", "openai_model"),
        description="the Switchyard route every call asks for",
    )
    openai_default_headers: dict[str, str] = Field(
        default_factory=dict,
        repr=False,
        validation_alias=AliasChoices("default_headers", "openai_default_headers"),
    )
    deployment: str | None = Field(default=None, description="NeMo Gym's in-process proxy; refused here")
    proxy_port: int | None = Field(default=None, description="the in-process proxy's port; unused here")
    session_id_headers: list[str] = Field(default_factory=lambda: [SESSION_ID_HEADER])
    forward_session_id: bool = True
    condition_dir: Path | None = Field(
        default=None,
        description="where the run's routing condition is recorded (condition.py); null = nowhere",
    )
    proxy_provenance: dict[str, Any] = Field(
        default_factory=dict,
        description="the attached proxy's identity (build, deployment hash), as its operator gives it",
    )

    @model_validator(mode="before")
    @classmethod
    def _attach_only(cls, data: object) -> object:
        """NeMo Gym hosts the proxy when no base URL is given; here a running proxy is required."""
        if not isinstance(data, dict):
            return data
        base_url = data.get("switchyard_base_url") or data.get("openai_base_url")
        deployment = data.get("deployment")
        if base_url and deployment:
            logger.warning(
                "switchyard_model: both switchyard_base_url and deployment are set; attaching to %s, the "
                "deployment %s is not served by this server",
                base_url,
                deployment,
            )
        elif deployment:
            raise ValueError(
                "deployment: hosting the Switchyard proxy in-process needs nemo-switchyard's native server, "
                "which this server does not run; start `switchyard-server --config <deployment> --port N` "
                "and set switchyard_base_url=http://127.0.0.1:N/v1"
            )
        elif not base_url:
            raise ValueError(
                "switchyard_base_url is required: the base URL of a running Switchyard proxy (…/v1)"
            )
        return data


class SwitchyardModel(OpenAIModel):
    config: SwitchyardModelConfig

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        folder = self.config.condition_dir
        if folder is not None:
            config = self.config
            write_condition(
                folder,
                config.openai_model,
                config.openai_base_url,
                config.proxy_provenance,
                config.session_id_headers,
            )
            app.router.lifespan_context = self._with_stats_snapshot(app.router.lifespan_context, folder)
        return app

    def _with_stats_snapshot(self, lifespan: Any, folder: Path) -> Any:
        """The app's lifespan, then the proxy's stats kept when the server stops."""

        @contextlib.asynccontextmanager
        async def lifespan_then_snapshot(app: FastAPI) -> AsyncIterator[Any]:
            async with lifespan(app) as state:
                yield state
            await snapshot_stats(folder, self.client.base_url, self.client.auth_headers())

        return lifespan_then_snapshot

    def client_for(self, request: Request) -> NeMoGymAsyncOpenAI:
        """The client with the rollout id in the session headers, for a call made within a rollout."""
        rollout = rollout_key_of(request)
        if rollout is None or not self.config.forward_session_id:
            return self.client
        headers = {**self.client.default_headers, **dict.fromkeys(self.config.session_id_headers, rollout)}
        return self.client.model_copy(update={"default_headers": headers})


if __name__ == "__main__":
    SwitchyardModel.run_webserver()
