"""Resources servers own the task side of a rollout: tools, per-rollout state, and the reward.

Subclass `SimpleResourcesServer`, declare request models for your tools and `verify`, and add one POST
route per tool in `setup_webserver()` after calling `super().setup_webserver()`. `verify(self, body)` (as
NeMo Gym declares it) and `verify(self, request, body)` (to read the session) both serve `/verify`: the
route takes its parameters from the method's own signature. Per-rollout state goes in `self.sessions`.
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable
from enum import StrEnum
from typing import Any, ClassVar

from fastapi import Body, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field, PrivateAttr, ValidationError

from nemo_gym.config.metrics_bodies import AggregateMetrics as AggregateMetrics
from nemo_gym.config.metrics_bodies import AggregateMetricsRequest as AggregateMetricsRequest
from nemo_gym.config.old_keys import AcceptsOldKeyNames
from nemo_gym.config.server_instances import BaseRunServerInstanceConfig
from nemo_gym.envkit.reward_profile import AggregateMetricsMixin
from nemo_gym.http.errors import GymError
from nemo_gym.http.sessions import SESSION_ID_KEY, SessionStore, deployment_session_secret, get_session_id
from nemo_gym.serving.cpu_pool import fallbacks_noted
from nemo_gym.serving.servers import SimpleServer, new_app
from nemo_gym.telemetry import tracing
from nemo_gym.wire.failure_kinds import VERIFIER_ERROR
from nemo_gym.wire.responses import NeMoGymResponse as NeMoGymResponse
from nemo_gym.wire.responses import (
    NeMoGymResponseCreateParamsNonStreaming as NeMoGymResponseCreateParamsNonStreaming,
)

# The row and session types live with the other wire types; they are importable from here, as in NeMo Gym.
from nemo_gym.wire.rows import BaseRunRequest as BaseRunRequest
from nemo_gym.wire.rows import BaseSeedSessionRequest as BaseSeedSessionRequest
from nemo_gym.wire.rows import BaseSeedSessionResponse as BaseSeedSessionResponse
from nemo_gym.wire.rows import BaseVerifyRequest as BaseVerifyRequest
from nemo_gym.wire.rows import BaseVerifyResponse as BaseVerifyResponse
from nemo_gym.wire.sessions import EpisodeId as EpisodeId
from nemo_gym.wire.sessions import MCPServerMetadata as MCPServerMetadata
from nemo_gym.wire.sessions import ResourcesCloseSessionRequest as ResourcesCloseSessionRequest
from nemo_gym.wire.sessions import ResourcesCloseSessionResponse as ResourcesCloseSessionResponse
from nemo_gym.wire.sessions import ResourcesSeedSessionRequest as ResourcesSeedSessionRequest
from nemo_gym.wire.sessions import ResourcesSeedSessionResponse as ResourcesSeedSessionResponse
from nemo_gym.wire.sessions import SandboxAccess as SandboxAccess
from nemo_gym.wire.sessions import TaskId as TaskId

# About 200 bytes per session of a small state: the default caps the store near 20 MB, far above any
# rollout concurrency.
DEFAULT_MAX_SESSIONS = 100_000
# NeMo Gym's names for the MCP metadata a seed answer may carry and the header of an MCP session token.
NEMO_GYM_MCP_METADATA_KEY = "mcp"
NEMO_GYM_MCP_SESSION_TOKEN_HEADER = "X-NeMo-Gym-Session-Token"
# How MCP clients name a server's tools to a model: `mcp__<server>__<tool>`.
MCP_TOOL_PREFIX = "mcp__"
# The key by which a seed body is read as NeMo Gym 0.7's typed seed rather than a task row.
TYPED_SEED_KEY = "resources_session_id"


class ReverifyMode(StrEnum):
    """Whether a stored rollout can be verified again without its session: `stateless` (yes),
    `unsupported` (no), `unknown` (not declared)."""

    STATELESS = "stateless"
    UNSUPPORTED = "unsupported"
    UNKNOWN = "unknown"


class BaseResourcesServerConfig(AcceptsOldKeyNames, BaseRunServerInstanceConfig):
    REVERIFY_MODE: ClassVar[ReverifyMode] = ReverifyMode.UNKNOWN
    max_sessions: int = Field(
        default=DEFAULT_MAX_SESSIONS, ge=1, description="per-rollout states kept at once; the least recent go"
    )
    expose_tools_over_mcp: bool = Field(
        default=False, description="serve the tool routes as MCP tools at /mcp (NeMo Gym 0.7)"
    )
    # Old keys of base settings (old -> current; `config.old_keys`). A folder whose old default differs
    # overrides the field's default.
    OLD_KEY_NAMES: ClassVar[dict[str, str]] = {"grading_timeout_seconds": "grading_timeout_s"}
    grading_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="deadline of one grading (verify); past it the rollout is masked or scored 0",
    )


class SimpleResourcesServer(AggregateMetricsMixin, SimpleServer):
    config: BaseResourcesServerConfig
    _sessions: SessionStore[Any] | None = PrivateAttr(default=None)
    _mcp: Any = PrivateAttr(default=None)

    @property
    def sessions(self) -> SessionStore[Any]:
        """Per-rollout state by session id (`nemo_gym.http.sessions.get_session_id(request)`), at most
        `config.max_sessions`; made on first use, so a stateless environment holds none. The environment
        drops a rollout's state when it is done with it (usually in `verify`)."""
        if self._sessions is None:
            self._sessions = SessionStore(self.config.max_sessions)
        return self._sessions

    def setup_webserver(self) -> FastAPI:
        """Register the base routes; FastAPI reads body and response models from the (overridden) methods."""
        app = new_app()
        self.setup_session_middleware(app)
        app.post("/seed_session")(self._seed_route())
        app.post("/close_session")(self.close_resources_session)
        app.post("/verify")(self._verify_route())
        app.post("/aggregate_metrics")(self.aggregate_metrics)
        app.get("/reverify_mode")(self.reverify_mode)
        return app

    async def seed_session(
        self, request: Request, body: ResourcesSeedSessionRequest | BaseSeedSessionRequest
    ) -> ResourcesSeedSessionResponse | BaseSeedSessionResponse:
        """Both of NeMo Gym's seed shapes: a row (0.4; an environment overrides this with its own row
        model) or an environment server's typed seed (0.7), which `begin_resources_session` answers."""
        if isinstance(body, ResourcesSeedSessionRequest):
            return self.begin_resources_session(request, body)
        return BaseSeedSessionResponse()

    def _seed_route(self) -> Callable[..., Any]:
        """`seed_session` as the route. It takes NeMo Gym 0.7's typed seed too when an environment overrides
        it with its own row model: the typed seed names the session, then the environment's seed runs on
        the task's data (validated by that row model) as it would on a 0.4 row. With
        `expose_tools_over_mcp`, every seed answer also says where the session's MCP tools are."""
        row_model, takes_request = _seed_body_model(self.seed_session)
        takes_typed = _accepts(row_model, ResourcesSeedSessionRequest)
        if takes_typed and not self.config.expose_tools_over_mcp:
            return self.seed_session

        async def seed_either_shape(request: Request, body: Any) -> Any:
            if takes_typed:
                answer = await self._call_seed(request, body, takes_request)
            elif TYPED_SEED_KEY not in body:
                answer = await self._call_seed(request, _validated(row_model, body, ("body",)), takes_request)
            else:
                typed = _validated(ResourcesSeedSessionRequest, body, ("body",))
                answer = self.begin_resources_session(request, typed)
                row = _validated(row_model, typed.task_data, ("body", "task_data"))
                await self._call_seed(request, row, takes_request)
                body = typed
            return self._with_mcp_metadata(request, body, answer)

        # A row seed is validated by hand, so that a bad one is a 422 naming its field (a union annotation
        # would report every member's problems under the member's name).
        annotation = row_model if takes_typed else dict[str, Any]
        parameters = [
            inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Request),
            inspect.Parameter(
                "body", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=annotation, default=Body()
            ),
        ]
        seed_either_shape.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        return seed_either_shape

    def _with_mcp_metadata(self, request: Request, body: Any, answer: Any) -> Any:
        """The seed's answer plus where this session's MCP tools are: `resources_tools` of a typed answer,
        or key `mcp` of a row seed's answer."""
        if self._mcp is None:
            return answer
        if isinstance(answer, ResourcesSeedSessionResponse):
            if answer.resources_tools is None:
                allowed = self.mcp_allowed_tools_for_session(body.task_data)
                answer.resources_tools = self._mcp.metadata(answer.resources_session_id, allowed)
            return answer
        dumped = answer.model_dump(mode="json") if isinstance(answer, BaseModel) else dict(answer or {})
        row = body.model_dump(mode="json") if isinstance(body, BaseModel) else body
        metadata = self._mcp.metadata(get_session_id(request), self.mcp_allowed_tools_for_session(row))
        return {**dumped, NEMO_GYM_MCP_METADATA_KEY: metadata.model_dump(mode="json")}

    def mcp_allowed_tools_for_session(self, seed_body: Any) -> list[str] | None:
        """The tools a session may call over MCP (None: all); `seed_body` is the row, or a typed seed's
        `task_data`. Override to narrow a session's tools by its task."""
        return None

    def complete_app(self, app: FastAPI) -> FastAPI:
        """Once every route is in place: publish the tool routes over MCP when the config asks."""
        if self.config.expose_tools_over_mcp:
            from nemo_gym.serving.mcp_exposure import MCPExposure

            self._mcp = MCPExposure(app, self.config.name, self.server_label, deployment_session_secret())
        return app

    def _verify_route(self) -> Callable[..., Any]:
        """`verify` as the route, marking an answer that graded with a deadline fallback (`run_cpu_bound`'s
        `on_timeout`) as not measured: `mask_sample` true, with the failure's kind and reason. Such a
        reward says nothing about the answer; a trainer or a metric must not read it as a wrong one.
        With MCP exposed, tool calls named as MCP clients name them (`mcp__<server>__<tool>`) are scored
        as calls of `<tool>`; the answer's response keeps the names the model emitted."""
        verify = self.verify

        @functools.wraps(verify)
        async def verify_marking_fallbacks(*args: Any, **kwargs: Any) -> Any:
            emitted = _bare_mcp_tool_names(args, kwargs) if self._mcp is not None else {}
            with fallbacks_noted() as fallbacks:
                answer = await verify(*args, **kwargs)
            if isinstance(answer, BaseVerifyResponse):
                tracing.set_on_current_span(tracing.REWARD_ATTRIBUTE, answer.reward)
                for index, name in emitted.items():
                    if index < len(answer.response.output):
                        answer.response.output[index].name = name
                if fallbacks:
                    answer.mask_sample = True
                    answer.failure_kind = answer.failure_kind or VERIFIER_ERROR
                    answer.failure_reason = answer.failure_reason or "grading fell back: " + "; ".join(
                        fallbacks
                    )
            return answer

        return verify_marking_fallbacks

    async def _call_seed(self, request: Request, body: BaseModel, takes_request: bool) -> Any:
        return await (self.seed_session(request, body) if takes_request else self.seed_session(body))

    def begin_resources_session(
        self, request: Request, body: ResourcesSeedSessionRequest
    ) -> ResourcesSeedSessionResponse:
        """Make the environment server's id this rollout's session (`get_session_id(request)` and the
        session cookie carry it from now on), unless that id was already closed: a seed arriving after
        its close must not bring the session back (a 409). Seeding an open id again is harmless."""
        if self._sessions is not None and self._sessions.is_closed(body.resources_session_id):
            raise GymError(
                409,
                "session_closed",
                f"resources_session_id {body.resources_session_id!r} was closed; seed a new session id",
            )
        request.session[SESSION_ID_KEY] = body.resources_session_id
        return ResourcesSeedSessionResponse(resources_session_id=body.resources_session_id)

    async def close_resources_session(
        self, body: ResourcesCloseSessionRequest
    ) -> ResourcesCloseSessionResponse:
        """NeMo Gym 0.7's `/close_session`: the session's state in `self.sessions` is released. Closing
        again, or closing an id never seeded, answers the same; the id stays closed. An environment
        holding more than `self.sessions` (a sandbox, a browser) releases it in its override."""
        self.sessions.close(body.resources_session_id)
        return ResourcesCloseSessionResponse(resources_session_id=body.resources_session_id)

    async def reverify_mode(self) -> ReverifyMode:
        """Whether a stored rollout can be verified again without its session (the config's REVERIFY_MODE)."""
        return self.config.REVERIFY_MODE

    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        raise NotImplementedError(f"{type(self).__name__} must implement verify()")


def _bare_mcp_tool_names(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[int, str]:
    """Renames, in the verify body among `args`/`kwargs`, each `mcp__<server>__<tool>` call to `<tool>`;
    returns the emitted names by output position."""
    body = next((value for value in (*args, *kwargs.values()) if isinstance(value, BaseVerifyRequest)), None)
    emitted: dict[int, str] = {}
    for index, item in enumerate(body.response.output if body is not None else []):
        name = getattr(item, "name", None)
        if (
            getattr(item, "type", None) == "function_call"
            and isinstance(name, str)
            and name.startswith(MCP_TOOL_PREFIX)
        ):
            server_and_tool = name[len(MCP_TOOL_PREFIX) :]
            if "__" in server_and_tool:
                emitted[index] = name
                item.name = server_and_tool.split("__", 1)[1]
    return emitted


def _validated(model: type[BaseModel], data: Any, location: tuple[str, ...]) -> Any:
    """`data` as `model`, or the standard 422 with each problem located under `location`."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise RequestValidationError(
            [{**problem, "loc": (*location, *problem["loc"])} for problem in error.errors()]
        ) from None


def _seed_body_model(seed: Callable[..., Any]) -> tuple[Any, bool]:
    """The body annotation of an environment's `seed_session` and whether it also takes the request."""
    hints = typing.get_type_hints(seed)
    hints.pop("return", None)
    takes_request = any(hint is Request for hint in hints.values())
    body = next((hint for hint in hints.values() if hint is not Request), None)
    return body, takes_request


def _accepts(annotation: Any, model: type[BaseModel]) -> bool:
    """Whether `annotation` is `model` or a union with it."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return model in typing.get_args(annotation)
    return annotation is model
