"""Config models of a Gym deployment and the errors a config mistake raises.

The merged config is one flat mapping. A top-level key whose value has the shape
`<instance> -> <server type> -> <implementation dir> -> {entrypoint, ...}` is a server instance; the models
here validate that shape (`ServerInstanceConfig`), the `datasets:` entries of an instance, references from
one instance to another (`ServerRef`), and the command-line argument models of the dataset tools.
`nemo_gym.global_config` uses them to discover, check and complete instances.

Every user-facing config problem raises a `ConfigError` subclass whose message names the key or file and,
where possible, the fix; each subclass also derives from the builtin error callers historically caught.
"""

from __future__ import annotations

import inspect
import sys
import warnings
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from nemo_gym.http_client import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_CONNECTOR_LIMIT,
    DEFAULT_CONNECTOR_LIMIT_PER_HOST,
    DEFAULT_DEADLINE_S,
    MAX_NUM_TRIES,
)
from nemo_gym.redaction import MASKED_VALUE

# ---------------------------------------------------------------------------------------------------------
# Errors


class ConfigError(Exception):
    """A mistake in the user's config: the CLI prints the message (no traceback) and exits non-zero."""


class ConfigPathNotFoundError(ConfigError, FileNotFoundError):
    """A file listed in `config_paths` exists in none of the places it is looked up."""


class MalformedConfigPathsError(ConfigError, ValueError):
    """`config_paths` is not a list of file paths."""


class NoServerInstancesError(ConfigError, ValueError):
    """A deployment was asked to start but its config defines no server instance."""


class ConfigMissingValuesError(ConfigError, ValueError):
    """Mandatory values (`???`) were left unset."""


class ServerRefNotFoundError(ConfigError, ValueError):
    """A server reference or lookup names an instance that is not in the merged config."""


class InheritPathNotFoundError(ConfigError, ValueError):
    """A structural directive (`_inherit_from`, `_copy`, `_delete_key`) names a path that does not exist."""


class AlmostServerError(ConfigError, ValueError):
    """A top-level block is shaped like a server instance but does not validate as one."""


# ---------------------------------------------------------------------------------------------------------
# Domains and datasets


class Domain(StrEnum):
    """What a resources server's tasks are about; used to name and group datasets."""

    MATH = "math"
    CODING = "coding"
    AGENT = "agent"
    KNOWLEDGE = "knowledge"
    INSTRUCTION_FOLLOWING = "instruction_following"
    LONG_CONTEXT = "long_context"
    SAFETY = "safety"
    GAMES = "games"
    TRANSLATION = "translation"
    E2E = "e2e"
    RLHF = "rlhf"
    OTHER = "other"


DatasetType = Literal["train", "validation", "example"]
DatasetLicense = Literal[
    "Apache 2.0",
    "MIT",
    "Creative Commons Attribution 4.0 International",
    "Creative Commons Attribution-ShareAlike 4.0 International",
    "CC BY-SA 4.0",
    "CC BY-NC 3.0",
    "NVIDIA Internal Use Only, Do Not Distribute",
    "NVIDIA Evaluation Dataset License Agreement",
    "TBD",
    "GNU General Public License v3.0",
]
DATASET_TYPES_REQUIRING_LICENSE: frozenset[str] = frozenset({"train", "validation"})


class JsonlDatasetGitlabIdentifer(BaseModel):
    """Deprecated location of a dataset in the GitLab package registry; use `source: {type: gitlab}`."""

    dataset_name: str
    version: str
    artifact_fpath: str


class JsonlDatasetHuggingFaceIdentifer(BaseModel):
    """Deprecated location of a dataset on the Hugging Face hub; use `source: {type: huggingface}`."""

    repo_id: str
    artifact_fpath: str | None = None


class GitlabDatasetSource(JsonlDatasetGitlabIdentifer):
    """Where to download a dataset from the GitLab package registry."""

    type: Literal["gitlab"] = "gitlab"


class HuggingFaceDatasetSource(JsonlDatasetHuggingFaceIdentifer):
    """Where to download a dataset from the Hugging Face hub."""

    type: Literal["huggingface"] = "huggingface"


DatasetSource = Annotated[GitlabDatasetSource | HuggingFaceDatasetSource, Field(discriminator="type")]


class DatasetConfig(BaseModel):
    """One entry of an agent's `datasets:` list: a JSONL file of tasks and where it can be downloaded."""

    name: str
    type: DatasetType
    jsonl_fpath: str
    num_repeats: int = Field(default=1, ge=1)
    source: DatasetSource | None = None
    gitlab_identifier: JsonlDatasetGitlabIdentifer | None = None
    huggingface_identifier: JsonlDatasetHuggingFaceIdentifer | None = None
    license: DatasetLicense | None = None

    @model_validator(mode="after")
    def _require_license_for_training_data(self) -> DatasetConfig:
        if self.type in DATASET_TYPES_REQUIRING_LICENSE and self.license is None:
            raise ValueError(
                f"dataset '{self.name}': `license` is required for {self.type} datasets "
                "(e.g. license: Apache 2.0)"
            )
        return self

    @model_validator(mode="after")
    def _reconcile_source_with_legacy_identifiers(self) -> DatasetConfig:
        """Keep `source` and the deprecated identifiers in step so old and new readers both work."""
        if self.source is not None:
            self._mirror_source_into_legacy_identifier()
        elif self.gitlab_identifier is not None or self.huggingface_identifier is not None:
            warnings.warn(
                f"dataset '{self.name}': gitlab_identifier/huggingface_identifier are deprecated; "
                "use `source: {type: gitlab|huggingface, ...}` instead",
                DeprecationWarning,
                stacklevel=2,
            )
            if self.gitlab_identifier is None or self.huggingface_identifier is None:
                self.source = self._source_from_legacy_identifier()
        return self

    def _source_from_legacy_identifier(self) -> GitlabDatasetSource | HuggingFaceDatasetSource:
        if self.gitlab_identifier is not None:
            return GitlabDatasetSource(**self.gitlab_identifier.model_dump())
        return HuggingFaceDatasetSource(**self.huggingface_identifier.model_dump())

    def _mirror_source_into_legacy_identifier(self) -> None:
        """Fill the legacy field matching `source`; a differing legacy identifier is a conflict.

        An identical one is accepted so that a dumped config validates again.
        """
        source_fields = self.source.model_dump(exclude={"type"})
        if isinstance(self.source, GitlabDatasetSource):
            mirrored, other = JsonlDatasetGitlabIdentifer(**source_fields), self.huggingface_identifier
            given = self.gitlab_identifier
        else:
            mirrored, other = JsonlDatasetHuggingFaceIdentifer(**source_fields), self.gitlab_identifier
            given = self.huggingface_identifier
        if other is not None or (given is not None and given != mirrored):
            raise ValueError(
                f"dataset '{self.name}': set either `source` or the deprecated "
                "gitlab_identifier/huggingface_identifier, not both"
            )
        if isinstance(mirrored, JsonlDatasetGitlabIdentifer):
            self.gitlab_identifier = mirrored
        else:
            self.huggingface_identifier = mirrored


class BenchmarkDatasetConfig(BaseModel):
    """The dataset of a benchmark: `prepare_script`'s `prepare()` writes `jsonl_fpath` and returns it."""

    name: str
    type: Literal["benchmark"]
    jsonl_fpath: Path
    prepare_script: Path
    prompt_config: Path | None
    num_repeats: int = Field(default=1, ge=1)


AnyDatasetConfig = Annotated[DatasetConfig | BenchmarkDatasetConfig, Field(discriminator="type")]


# ---------------------------------------------------------------------------------------------------------
# Command-line argument models


def _help_requested(data: Any) -> bool:
    if isinstance(data, Mapping) and (data.get("h") or data.get("help")):
        return True
    return any(arg in ("-h", "--help") for arg in sys.argv[1:])


class BaseNeMoGymCLIConfig(BaseModel):
    """Arguments of a command, validated from the whole global config (so unrelated keys are ignored).

    `+h=true`, `+help=true`, `-h` or `--help` prints the class docstring and its fields, then exits.
    Numbers are accepted for text fields: the override parser reads `--revision 1.0` as a float.
    """

    model_config = ConfigDict(coerce_numbers_to_str=True)

    @model_validator(mode="before")
    @classmethod
    def _print_help_and_exit_when_asked(cls, data: Any) -> Any:
        if _help_requested(data):
            print(cls.help_text())
            raise SystemExit(0)
        return data

    @classmethod
    def help_text(cls) -> str:
        """The docstring followed by one line per field: name, type, default (or required), description."""
        lines = [inspect.cleandoc(cls.__doc__ or cls.__name__), "", "Fields:"]
        for field_name, field in cls.model_fields.items():
            default = (
                "required"
                if field.is_required()
                else f"default: {field.get_default(call_default_factory=True)!r}"
            )
            type_name = getattr(field.annotation, "__name__", None) or str(field.annotation)
            description = f"  {field.description}" if field.description else ""
            lines.append(f"  {field_name} ({type_name}, {default}){description}")
        return "\n".join(lines)


class UploadJsonlDatasetGitlabConfig(BaseNeMoGymCLIConfig):
    """Upload a JSONL dataset to the GitLab package registry."""

    dataset_name: str
    version: str = Field(description='version of the dataset, "x.x.x"')
    input_jsonl_fpath: str


class DownloadJsonlDatasetGitlabConfig(BaseNeMoGymCLIConfig):
    """Download a JSONL dataset artifact from the GitLab package registry."""

    dataset_name: str
    version: str = Field(description='version of the dataset, "x.x.x"')
    artifact_fpath: str
    output_fpath: str


class DeleteJsonlDatasetGitlabConfig(BaseNeMoGymCLIConfig):
    """Delete a dataset from the GitLab package registry."""

    dataset_name: str


class BaseUploadJsonlDatasetHuggingFaceConfig(BaseNeMoGymCLIConfig):
    """Upload a JSONL dataset to the Hugging Face hub and add it to a collection."""

    hf_token: str = Field(repr=False)
    hf_organization: str
    hf_collection_name: str
    hf_collection_slug: str
    dataset_name: str | None = Field(default=None, description="defaults to the resources server's dir name")
    input_jsonl_fpath: str
    resource_config_path: str
    hf_dataset_prefix: str = "Nemotron-RL"
    split: Literal["train", "validation", "test"] = "train"
    create_pr: bool = False
    revision: str | None = None
    commit_message: str | None = None
    commit_description: str | None = None


class UploadJsonlDatasetHuggingFaceConfig(BaseUploadJsonlDatasetHuggingFaceConfig):
    """Upload a JSONL dataset to the Hugging Face hub, then delete it from GitLab (always)."""

    @model_validator(mode="before")
    @classmethod
    def _forbid_delete_choice(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "delete_from_gitlab" in data:
            raise ValueError(
                "delete_from_gitlab cannot be set for this command: it always deletes from GitLab"
            )
        return data


class UploadJsonlDatasetHuggingFaceMaybeDeleteConfig(BaseUploadJsonlDatasetHuggingFaceConfig):
    """Upload a JSONL dataset to the Hugging Face hub, optionally deleting it from GitLab."""

    delete_from_gitlab: bool = False


class DownloadJsonlDatasetHuggingFaceConfig(BaseNeMoGymCLIConfig):
    """Download a dataset from the Hugging Face hub: one raw file (`artifact_fpath`) or split(s) as JSONL."""

    repo_id: str
    artifact_fpath: str | None = None
    output_dirpath: str | None = None
    output_fpath: str | None = None
    hf_token: str | None = Field(default=None, repr=False)
    split: Literal["train", "validation", "test"] | None = None
    revision: str | None = Field(default=None, description="branch, tag or commit (default: main)")

    @model_validator(mode="after")
    def _check_output_and_selection(self) -> DownloadJsonlDatasetHuggingFaceConfig:
        if (self.output_dirpath is None) == (self.output_fpath is None):
            raise ValueError("set exactly one of output_dirpath and output_fpath")
        if self.artifact_fpath is not None and self.split is not None:
            raise ValueError("set artifact_fpath or split, not both")
        if self.output_fpath is not None and self.artifact_fpath is None and self.split is None:
            raise ValueError("output_fpath without artifact_fpath needs a split (one file holds one split)")
        return self


class WANDBConfig(BaseModel):
    """Weights & Biases logging of the (secret-hidden) config; active only when every key is set."""

    wandb_project: str | None = None
    wandb_name: str | None = None
    wandb_api_key: str | None = Field(default=None, repr=False)

    @property
    def is_active(self) -> bool:
        """A masked key ("****") is not a usable key, so it does not activate logging."""
        return bool(self.wandb_project and self.wandb_name and self.wandb_api_key) and (
            self.wandb_api_key != MASKED_VALUE
        )


class AggregateMetricsRequest(BaseModel):
    """Body of `/aggregate_metrics`: the verify responses of one agent's rollouts."""

    verify_responses: list[dict[str, Any]]


class AggregateMetrics(BaseModel):
    """Answer of `/aggregate_metrics`."""

    group_level_metrics: list[dict[str, Any]] = []
    agent_metrics: dict[str, Any] = {}
    key_metrics: dict[str, Any] = {}


# ---------------------------------------------------------------------------------------------------------
# Server references

ModelServerType = Literal["responses_api_models"]
ResourcesServerType = Literal["resources_servers"]
AgentServerType = Literal["responses_api_agents"]
SERVER_TYPES: tuple[str, ...] = ("responses_api_models", "resources_servers", "responses_api_agents")
AGENT_REF_KEY = "agent_ref"


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


ServerRef = Annotated[ModelServerRef | ResourcesServerRef | AgentServerRef, Field(discriminator="type")]
ServerRefTypeAdapter: TypeAdapter[ServerRef] = TypeAdapter(ServerRef)


def is_server_ref(value: Any) -> ServerRef | None:
    """The reference `value` spells (a mapping with a server `type` and a `name`), or None if it is not one."""
    if not isinstance(value, Mapping) or value.get("type") not in SERVER_TYPES:
        return None
    try:
        return ServerRefTypeAdapter.validate_python(dict(value))
    except ValidationError:
        return None


# ---------------------------------------------------------------------------------------------------------
# Server configs


class HTTPClientSettings(BaseModel):
    """The top-level `global_aiohttp_*` / `global_http_*` knobs of every server's outbound client."""

    model_config = ConfigDict(extra="ignore")

    global_aiohttp_connector_limit: int = Field(default=DEFAULT_CONNECTOR_LIMIT, ge=1)
    global_aiohttp_connector_limit_per_host: int = Field(default=DEFAULT_CONNECTOR_LIMIT_PER_HOST, ge=1)
    global_http_max_attempts: int = Field(default=MAX_NUM_TRIES, ge=1)
    global_http_deadline_s: float = Field(default=DEFAULT_DEADLINE_S, gt=0)
    global_http_connect_timeout_s: float = Field(default=DEFAULT_CONNECT_TIMEOUT_S, gt=0)


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
    SERVER_TYPE: ClassVar[str] = "responses_api_models"

    responses_api_models: dict[str, BaseRunServerTypeConfig]


class ResourcesServerTypeConfig(BaseServerTypeConfig):
    SERVER_TYPE: ClassVar[str] = "resources_servers"

    resources_servers: dict[str, BaseRunServerTypeConfig]


class ResponsesAPIAgentServerTypeConfig(BaseServerTypeConfig):
    SERVER_TYPE: ClassVar[str] = "responses_api_agents"

    responses_api_agents: dict[str, BaseRunServerTypeConfig]


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
    Annotated[ResponsesAPIModelServerTypeConfig, Tag("responses_api_models")]
    | Annotated[ResourcesServerTypeConfig, Tag("resources_servers")]
    | Annotated[ResponsesAPIAgentServerTypeConfig, Tag("responses_api_agents")],
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


ServerInstanceConfig = Annotated[
    Annotated[ResponsesAPIModelServerInstanceConfig, Tag("responses_api_models")]
    | Annotated[ResourcesServerInstanceConfig, Tag("resources_servers")]
    | Annotated[ResponsesAPIAgentServerInstanceConfig, Tag("responses_api_agents")],
    _SERVER_TYPE_DISCRIMINATOR,
]
ServerInstanceConfigTypeAdapter: TypeAdapter[ServerInstanceConfig] = TypeAdapter(ServerInstanceConfig)


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
    problems = []
    for problem in error.errors():
        location = list(problem["loc"])
        if location and location[0] in SERVER_TYPES:
            location = location[1:]
        location = [
            part
            for index, part in enumerate(location)
            if not (index >= 2 and location[index - 2] == "datasets" and isinstance(location[index - 1], int))
        ]
        message = problem["msg"].removeprefix("Value error, ")
        problems.append(f"{'.'.join(map(str, location))}: {message}" if location else message)
    return "; ".join(problems)
