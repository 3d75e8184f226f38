"""References from one server instance to another by name (`{type: resources_servers, name: ...}`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from nemo_gym.config.server_kinds import SERVER_TYPES as SERVER_TYPES

# Literal types need the spelled-out names; tests/core/config/test_server_kinds.py checks they match the registry.
ModelServerType = Literal["responses_api_models"]
ResourcesServerType = Literal["resources_servers"]
AgentServerType = Literal["responses_api_agents"]
EnvironmentServerType = Literal["environment_servers"]
AGENT_REF_KEY = "agent_ref"
# NeMo Gym 0.7 carries a rollout's identity in the URL: `/ng-rollout/<id>[/training-token-capture]/...`.
ROLLOUT_PATH_PREFIX = "ng-rollout"
TOKEN_CAPTURE_PATH_SEGMENT = "training-token-capture"


class ModelServerRef(BaseModel):
    """Points at a model server instance by name."""

    type: ModelServerType
    name: str


class ResourcesServerRef(BaseModel):
    """Points at a resources server instance by name."""

    type: ResourcesServerType
    name: str


class AgentServerRef(BaseModel):
    """Points at an agent server instance by name."""

    type: AgentServerType
    name: str


class EnvironmentServerRef(BaseModel):
    """Points at an environment server instance by name (NeMo Gym 0.7)."""

    type: EnvironmentServerType
    name: str


ServerRef = Annotated[
    ModelServerRef | ResourcesServerRef | AgentServerRef | EnvironmentServerRef, Field(discriminator="type")
]
ServerRefTypeAdapter: TypeAdapter[ServerRef] = TypeAdapter(ServerRef)


def is_server_ref(value: Any) -> ServerRef | None:
    """The reference `value` spells (a mapping with a server `type` and a `name`), or None if it is not one."""
    if not isinstance(value, Mapping) or value.get("type") not in SERVER_TYPES:
        return None
    try:
        return ServerRefTypeAdapter.validate_python(dict(value))
    except ValidationError:
        return None
