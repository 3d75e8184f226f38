"""NeMo Gym 0.7's explicit-session shapes: who a rollout is (`EpisodeId`, `TaskId`), and the bodies with
which an environment server seeds and closes a resources server's and an agent's session, granting the
agent tools (`ToolAccess`) and a sandbox (`SandboxAccess`).

All of them forbid unknown keys, as NeMo Gym does: a session body with a typo is refused, not half read.
Identities are frozen, so they can key a dict.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field, JsonValue, field_validator

ROLLOUT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Identity(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EpisodeId(_Identity):
    """One attempt at one rollout."""

    rollout_id: str = Field(pattern=ROLLOUT_ID_PATTERN)
    attempt: int = Field(default=0, ge=0)

    @field_validator("rollout_id")
    @classmethod
    def _not_an_attempt_key(cls, rollout_id: str) -> str:
        # A retry's capture key is `<rollout id>-a<attempt>`: a rollout id of that shape would collide with one.
        _, marker, attempt = rollout_id.rpartition("-a")
        if marker and attempt.isdigit() and not attempt.startswith("0"):
            raise ValueError("must not end in -a<N>: that suffix marks a retry's capture key")
        return rollout_id

    @property
    def capture_key(self) -> str:
        return self.rollout_id if self.attempt == 0 else f"{self.rollout_id}-a{self.attempt}"


class TaskId(_Identity):
    """A task of a taskset (by convention `<environment>:<taskset>` when several are blended)."""

    taskset: str = Field(min_length=1)
    task_id: str = Field(min_length=1)


class MCPServerMetadata(BaseModel):
    """Where an agent reaches a resources server's tools over MCP."""

    server_name: str
    url_path: str = "/mcp"
    transport: str = "http"
    headers: dict[str, str] = {}


class DirectSandboxConnection(_Strict):
    kind: Literal["direct"] = "direct"
    provider_config_ref: str
    descriptor: dict[str, Any]


class SandboxAccess(_Strict):
    connection: DirectSandboxConnection
    workdir: str


ToolAccessName = Annotated[str, Field(pattern=ROLLOUT_ID_PATTERN)]


class DirectHTTPToolAccess(_Strict):
    """Tools called as `POST <base_url>/<tool name>` with these cookies and headers."""

    kind: Literal["direct_http"] = "direct_http"
    name: ToolAccessName
    required: bool
    base_url: AnyHttpUrl
    cookies: dict[str, str] = {}
    headers: dict[str, str] = {}


class MCPStreamableHTTPConnection(_Strict):
    transport: Literal["streamable_http"] = "streamable_http"
    url: AnyHttpUrl
    headers: dict[str, str] = {}


class MCPToolAccess(_Strict):
    """Tools called over MCP."""

    kind: Literal["mcp"] = "mcp"
    name: ToolAccessName
    required: bool
    connection: MCPStreamableHTTPConnection


ToolAccess = Annotated[DirectHTTPToolAccess | MCPToolAccess, Field(discriminator="kind")]


class ResourcesSeedSessionRequest(_Strict):
    resources_session_id: str = Field(min_length=1)
    episode_id: EpisodeId
    task_id: TaskId
    task_data: dict[str, JsonValue]


class ResourcesSeedSessionResponse(_Strict):
    resources_session_id: str
    resources_tools: MCPServerMetadata | None = None
    sandbox_access: SandboxAccess | None = None


class ResourcesCloseSessionRequest(_Strict):
    resources_session_id: str
    episode_id: EpisodeId


class ResourcesCloseSessionResponse(_Strict):
    resources_session_id: str


class AgentSeedSessionRequest(_Strict):
    agent_session_id: str = Field(min_length=1)
    episode_id: EpisodeId
    task_id: TaskId
    tool_accesses: list[ToolAccess] = []
    sandbox_access: SandboxAccess | None = None

    @field_validator("tool_accesses")
    @classmethod
    def _names_unique(cls, accesses: list[Any]) -> list[Any]:
        names = [access.name for access in accesses]
        if len(set(names)) != len(names):
            raise ValueError(f"tool access names must be unique, got {names}")
        return accesses


class AgentSeedSessionResponse(_Strict):
    agent_session_id: str


class AgentCloseSessionRequest(_Strict):
    agent_session_id: str
    episode_id: EpisodeId


class AgentCloseSessionResponse(_Strict):
    agent_session_id: str
    # NeMo Gym's AgentObservationBundle (`{source, records, gaps}`), kept as JSON until its schema is modelled.
    agent_observations: dict[str, JsonValue] | None = None
    resources_cookies: dict[str, str] | None = None
