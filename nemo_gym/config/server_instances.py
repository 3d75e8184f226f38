"""Server instances of the merged config: the shape `<instance> -> <server type> -> <implementation dir> ->
{entrypoint, ...}`, how a top-level block is recognised as one, and how its problems are worded."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from nemo_gym.config import server_kinds
from nemo_gym.config.datasets import AnyDatasetConfig, BenchmarkDatasetConfig, DatasetConfig, Domain
from nemo_gym.config.old_keys import old_key_names
from nemo_gym.config.server_kinds import SERVER_TYPES
from nemo_gym.config.server_refs import ServerRef, ServerRefTypeAdapter
from nemo_gym.wire.validation_errors import Location, describe_validation_error


class BaseServerConfig(BaseModel):
    """Where a server listens."""

    host: str
    port: int = Field(ge=0, le=65535)
    num_workers: int | None = Field(default=None, ge=1)


class BaseRunServerConfig(BaseServerConfig):
    """A server started by the launcher from its implementation directory."""

    entrypoint: str
    domain: Domain | None = None


class BaseRunServerInstanceConfig(BaseRunServerConfig):
    """Base of every server's own `config` model: its resolved inner config plus its instance `name`."""

    name: str


class BaseRunServerTypeConfig(BaseRunServerConfig):
    """The inner config as written in YAML: host/port may be left for the launcher, any extra key is kept."""

    model_config = ConfigDict(extra="allow")

    host: str | None = None
    port: int | None = Field(default=None, ge=0, le=65535)
    datasets: list[AnyDatasetConfig] | None = None


class BaseServerTypeConfig(BaseModel):
    """`{<server type>: {<implementation dir>: <inner config>}}` with exactly one implementation."""

    model_config = ConfigDict(extra="allow")

    SERVER_TYPE: ClassVar[str]

    @model_validator(mode="after")
    def _exactly_one_implementation(self) -> BaseServerTypeConfig:
        implementations = getattr(self, self.SERVER_TYPE)
        if len(implementations) != 1:
            raise ValueError(
                f"{self.SERVER_TYPE} must map exactly one implementation directory to its config, "
                f"found {len(implementations)}: {', '.join(implementations) or 'none'}"
            )
        return self

    @property
    def impl_name(self) -> str:
        """The implementation directory name, i.e. `<server type>/<impl_name>/` holds the code."""
        return next(iter(getattr(self, self.SERVER_TYPE)))

    def get_inner_run_server_config(self) -> BaseRunServerTypeConfig:
        return getattr(self, self.SERVER_TYPE)[self.impl_name]


class ResponsesAPIModelServerTypeConfig(BaseServerTypeConfig):
    SERVER_TYPE: ClassVar[str] = server_kinds.MODEL.key

    responses_api_models: dict[str, BaseRunServerTypeConfig]


class ResourcesServerTypeConfig(BaseServerTypeConfig):
    SERVER_TYPE: ClassVar[str] = server_kinds.RESOURCES.key

    resources_servers: dict[str, BaseRunServerTypeConfig]


class ResponsesAPIAgentServerTypeConfig(BaseServerTypeConfig):
    SERVER_TYPE: ClassVar[str] = server_kinds.AGENT.key

    responses_api_agents: dict[str, BaseRunServerTypeConfig]


class EnvironmentServerTypeConfig(BaseServerTypeConfig):
    SERVER_TYPE: ClassVar[str] = server_kinds.ENVIRONMENT.key

    environment_servers: dict[str, BaseRunServerTypeConfig]


def _server_type_tag(value: Any) -> str | None:
    """The one server type key of a block; None (a validation error) when there is none or several."""
    if isinstance(value, BaseServerTypeConfig):
        return value.SERVER_TYPE
    if isinstance(value, Mapping):
        present = [server_type for server_type in SERVER_TYPES if server_type in value]
        return present[0] if len(present) == 1 else None
    return None


_SERVER_TYPE_DISCRIMINATOR = Discriminator(
    _server_type_tag,
    custom_error_type="server_type",
    custom_error_message=f"a server instance needs exactly one of the keys {', '.join(SERVER_TYPES)}",
)

ServerTypeConfig = Annotated[
    Annotated[ResponsesAPIModelServerTypeConfig, Tag(server_kinds.MODEL.key)]
    | Annotated[ResourcesServerTypeConfig, Tag(server_kinds.RESOURCES.key)]
    | Annotated[ResponsesAPIAgentServerTypeConfig, Tag(server_kinds.AGENT.key)]
    | Annotated[EnvironmentServerTypeConfig, Tag(server_kinds.ENVIRONMENT.key)],
    _SERVER_TYPE_DISCRIMINATOR,
]


class BaseServerInstanceConfig(BaseServerTypeConfig):
    """A server instance: its validated type config, its `name`, and the raw config subtree.

    `server_type_config_dict` is kept as given (for the config parser: the DictConfig node still attached
    to the root, so `${policy_*}` interpolations can be resolved later against the whole config).
    """

    name: str
    server_type_config_dict: Any = Field(exclude=True, repr=False)

    def get_server_ref(self) -> ServerRef:
        return ServerRefTypeAdapter.validate_python({"type": self.SERVER_TYPE, "name": self.name})

    def get_inner_run_server_config_dict(self) -> Any:
        """The raw inner config (interpolations unresolved): three levels down the instance's subtree."""
        return self.server_type_config_dict[self.SERVER_TYPE][self.impl_name]

    @property
    def datasets(self) -> list[DatasetConfig | BenchmarkDatasetConfig]:
        return self.get_inner_run_server_config().datasets or []


class ResponsesAPIModelServerInstanceConfig(ResponsesAPIModelServerTypeConfig, BaseServerInstanceConfig):
    @model_validator(mode="after")
    def _drop_domain(self) -> ResponsesAPIModelServerInstanceConfig:
        self.get_inner_run_server_config().domain = None
        return self


class ResourcesServerInstanceConfig(ResourcesServerTypeConfig, BaseServerInstanceConfig):
    @model_validator(mode="after")
    def _require_domain(self) -> ResourcesServerInstanceConfig:
        if self.get_inner_run_server_config().domain is None:
            raise ValueError(
                f"resources server '{self.name}' must set `domain` (one of: {', '.join(Domain)})"
            )
        return self


class ResponsesAPIAgentServerInstanceConfig(ResponsesAPIAgentServerTypeConfig, BaseServerInstanceConfig):
    @model_validator(mode="after")
    def _drop_domain(self) -> ResponsesAPIAgentServerInstanceConfig:
        self.get_inner_run_server_config().domain = None
        return self


class EnvironmentServerInstanceConfig(EnvironmentServerTypeConfig, BaseServerInstanceConfig):
    @model_validator(mode="after")
    def _drop_domain(self) -> EnvironmentServerInstanceConfig:
        self.get_inner_run_server_config().domain = None
        return self


ServerInstanceConfig = Annotated[
    Annotated[ResponsesAPIModelServerInstanceConfig, Tag(server_kinds.MODEL.key)]
    | Annotated[ResourcesServerInstanceConfig, Tag(server_kinds.RESOURCES.key)]
    | Annotated[ResponsesAPIAgentServerInstanceConfig, Tag(server_kinds.AGENT.key)]
    | Annotated[EnvironmentServerInstanceConfig, Tag(server_kinds.ENVIRONMENT.key)],
    _SERVER_TYPE_DISCRIMINATOR,
]
ServerInstanceConfigTypeAdapter: TypeAdapter[ServerInstanceConfig] = TypeAdapter(ServerInstanceConfig)


# Keys of a server's inner config that its own config model need not declare: read by the launcher and the
# collector (`datasets`), or informational in NeMo Gym's shipped configs.
SHARED_SERVER_KEYS = frozenset(
    {"entrypoint", "host", "port", "num_workers", "domain", "name", "datasets", "verified", "description",
     "value", "allowed_agents", "allowed_model_types"}
)  # fmt: skip


def _read_names(alias: Any) -> set[str]:
    """The config keys an alias reads: itself, or each plain name of an `AliasChoices` (a server that reads
    a key under NeMo Gym's name and its own)."""
    if isinstance(alias, str):
        return {alias}
    if isinstance(alias, AliasChoices):
        return {choice for choice in alias.choices if isinstance(choice, str)}
    return set()


def unknown_setting(config_class: type[BaseModel], inner: Mapping[str, Any]) -> str | None:
    """One line naming the first key of `inner` that `config_class` does not read (with the nearest key it
    does read), or None. A model that keeps extra keys (`extra="allow"`) reads them all."""
    if config_class.model_config.get("extra") == "allow":
        return None
    known = set(SHARED_SERVER_KEYS)
    for name, field in config_class.model_fields.items():
        known |= {name, *_read_names(field.alias), *_read_names(field.validation_alias)}
    known |= old_key_names(config_class)
    unknown = [key for key in inner if isinstance(key, str) and key not in known]
    if not unknown:
        return None
    key = unknown[0]
    close = difflib.get_close_matches(key, sorted(known - SHARED_SERVER_KEYS), n=1, cutoff=0.7)
    hint = (
        f"; did you mean '{close[0]}'?"
        if close
        else f"; it reads: {', '.join(sorted(known - SHARED_SERVER_KEYS)) or 'none'}"
    )
    return f"unknown key '{key}' ({config_class.__name__} does not read it){hint}"


# ---------------------------------------------------------------------------------------------------------
# Recognising server instances


def leniently_resolved(node: Any) -> Any:
    """A plain copy of `node` in which each interpolation is resolved if it can be and kept as text if not.

    Lets a block be validated while `${policy_model_name}` and the like are still unset; plain containers
    are returned as they are.
    """
    if not isinstance(node, DictConfig | ListConfig):
        return node
    return _leniently_resolved_children(node, OmegaConf.to_container(node, resolve=False))


def _leniently_resolved_children(node: DictConfig | ListConfig, raw: dict | list) -> dict | list:
    keys = list(raw) if isinstance(raw, dict) else range(len(raw))
    resolved = {key: _leniently_resolved_child(node, key, raw[key]) for key in keys}
    return resolved if isinstance(raw, dict) else list(resolved.values())


def _leniently_resolved_child(parent: DictConfig | ListConfig, key: Any, raw_value: Any) -> Any:
    if OmegaConf.is_interpolation(parent, key):
        try:
            value = parent[key]
            return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
        except OmegaConfBaseException:
            return raw_value
    if isinstance(raw_value, dict | list):
        return _leniently_resolved_children(parent[key], raw_value)
    return raw_value


def validate_server_instance_config(name: str, server_type_config_dict: Any) -> ServerInstanceConfig:
    """Validate one top-level block as a server instance; raises pydantic's ValidationError if it is not."""
    view = leniently_resolved(server_type_config_dict)
    if not isinstance(view, Mapping):
        view = {}
    return ServerInstanceConfigTypeAdapter.validate_python(
        {**view, "name": name, "server_type_config_dict": server_type_config_dict}
    )


def maybe_get_server_instance_config(name: str, server_type_config_dict: Any) -> ServerInstanceConfig | None:
    """The server instance a top-level block defines, or None if the block is not a valid instance."""
    try:
        return validate_server_instance_config(name, server_type_config_dict)
    except ValidationError:
        return None


def looks_like_server(value: Any) -> bool:
    """Shape test: a server type key whose value holds a mapping with an `entrypoint`."""
    if not isinstance(value, Mapping):
        return False
    for server_type in SERVER_TYPES:
        implementations = value.get(server_type)
        if isinstance(implementations, Mapping) and any(
            isinstance(inner, Mapping) and "entrypoint" in inner for inner in implementations.values()
        ):
            return True
    return False


def is_almost_server(server_type_config_dict: Any) -> bool:
    """Shaped like a server instance but not a valid one: a typo the launcher must not silently skip."""
    return looks_like_server(server_type_config_dict) and (
        maybe_get_server_instance_config("almost_server", server_type_config_dict) is None
    )


def describe_server_instance_error(error: ValidationError) -> str:
    """The problems of a block that failed `validate_server_instance_config`, as `location: message` parts.

    Pydantic's union tags (the server type in front, the dataset type after a dataset index) are left out
    so that the location reads like the YAML path below the instance name.
    """
    return describe_validation_error(error, root="<instance>", relocate=_yaml_path_below_instance)


def _yaml_path_below_instance(location: Location) -> Location:
    if location and location[0] in SERVER_TYPES:
        location = location[1:]
    return tuple(
        part
        for index, part in enumerate(location)
        if not (index >= 2 and location[index - 2] == "datasets" and isinstance(location[index - 1], int))
    )
