"""Which agents each environment server fronts, and NeMo Gym 0.7's rule for the agents none fronts: each
gets a generated `legacy_agent` relay (named by `legacy_environment_server_name`) and the config one
deprecation line when the deployment starts, or, with `error_on_agent_without_environment_server: true`, is a config error."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from omegaconf import DictConfig, OmegaConf

from nemo_gym.config.errors import ConfigError
from nemo_gym.config.key_names import (
    AGENT_SERVER_REF_KEY_NAME,
    AGENT_SERVER_TYPE_KEY_NAME,
    ENVIRONMENT_SERVER_TYPE_KEY_NAME,
    ERROR_ON_AGENT_WITHOUT_ENVIRONMENT_SERVER_KEY_NAME,
    LEGACY_ENVIRONMENT_SERVER_SUFFIX,
)
from nemo_gym.config.server_instances import ServerInstanceConfig
from nemo_gym.config.settings import top_level_setting


class AgentWithoutEnvironmentServerError(ConfigError):
    pass


def legacy_environment_server_name(agent_name: str, agent_type: str, taken: set[str] = frozenset()) -> str:
    """NeMo Gym 0.7's name for the relay it generates in front of an agent: the agent's name without its
    `_<implementation>` (or `_agent`) ending, plus `_environment_server`; on a clash, the whole agent name
    plus the suffix, the suffix repeated until the name is free."""
    stem = agent_name
    for ending in (f"_{agent_type}", "_agent"):
        if agent_name.endswith(ending) and len(agent_name) > len(ending):
            stem = agent_name[: -len(ending)]
            break
    name = stem + LEGACY_ENVIRONMENT_SERVER_SUFFIX
    if name not in taken:
        return name
    name = agent_name + LEGACY_ENVIRONMENT_SERVER_SUFFIX
    while name in taken:
        name += LEGACY_ENVIRONMENT_SERVER_SUFFIX
    return name


def environment_server_agent_names(instance: ServerInstanceConfig) -> list[str]:
    """The agents an environment server's config names: any top-level `{type: responses_api_agents, name}`
    field, or an `agent_server` field written without its type."""
    inner = OmegaConf.to_container(instance.get_inner_run_server_config_dict(), resolve=False)
    names = []
    for key, value in inner.items():
        if not isinstance(value, Mapping) or "name" not in value:
            continue
        typed_ref = value.get("type") == AGENT_SERVER_TYPE_KEY_NAME
        if typed_ref or (key == AGENT_SERVER_REF_KEY_NAME and "type" not in value):
            names.append(str(value["name"]))
    return names


def generated_relays(instances: Sequence[ServerInstanceConfig]) -> dict[str, str]:
    """agent -> the name of its generated relay, for every agent no environment server fronts."""
    fronted = {
        agent
        for instance in instances
        if instance.SERVER_TYPE == ENVIRONMENT_SERVER_TYPE_KEY_NAME
        for agent in environment_server_agent_names(instance)
    }
    taken = {instance.name for instance in instances}
    relays: dict[str, str] = {}
    for instance in instances:
        if instance.SERVER_TYPE == AGENT_SERVER_TYPE_KEY_NAME and instance.name not in fronted:
            relays[instance.name] = legacy_environment_server_name(instance.name, instance.impl_name, taken)
            taken.add(relays[instance.name])
    return relays


def check_agents_have_environment_servers(cfg: DictConfig, instances: Sequence[ServerInstanceConfig]) -> None:
    """A config error, with `error_on_agent_without_environment_server: true`, for agents no environment
    server fronts."""
    relays = generated_relays(instances)
    if relays and top_level_setting(cfg, ERROR_ON_AGENT_WITHOUT_ENVIRONMENT_SERVER_KEY_NAME, False):
        raise AgentWithoutEnvironmentServerError(
            f"agents without an environment server: {_listed(relays)}; declare a legacy_agent environment "
            f"server for each, or set ++{ERROR_ON_AGENT_WITHOUT_ENVIRONMENT_SERVER_KEY_NAME}=false"
        )


def agents_without_environment_server_deprecation(relays: Mapping[str, str]) -> str:
    """The one line a deployment prints when it starts agents behind generated relays."""
    return (
        f"DEPRECATED: agents without an environment server run behind generated legacy_agent relays "
        f"({_listed(relays)}); declare environment servers for them"
    )


def _listed(relays: Mapping[str, str]) -> str:
    return ", ".join(f"{agent} -> {name}" for agent, name in relays.items())
