"""Config models under their NeMo Gym name `nemo_gym.config_types`: the errors, server instance shapes and references."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf
from pydantic import ValidationError

from nemo_gym.config_types import (
    AggregateMetrics,
    AlmostServerError,
    ConfigError,
    ConfigMissingValuesError,
    ConfigPathNotFoundError,
    Domain,
    InheritPathNotFoundError,
    MalformedConfigPathsError,
    ModelServerRef,
    NoServerInstancesError,
    ResourcesServerInstanceConfig,
    ResourcesServerRef,
    ResponsesAPIAgentServerInstanceConfig,
    ResponsesAPIModelServerInstanceConfig,
    ServerRefNotFoundError,
    ServerRefTypeAdapter,
    describe_server_instance_error,
    is_almost_server,
    is_server_ref,
    leniently_resolved,
    maybe_get_server_instance_config,
    validate_server_instance_config,
)


def resources_block(**inner: object) -> dict:
    return {"resources_servers": {"weather": {"entrypoint": "app.py", **inner}}}


@pytest.mark.parametrize(
    ("error_class", "builtin"),
    [
        (ConfigPathNotFoundError, FileNotFoundError),
        (MalformedConfigPathsError, ValueError),
        (NoServerInstancesError, ValueError),
        (ConfigMissingValuesError, ValueError),
        (ServerRefNotFoundError, ValueError),
        (InheritPathNotFoundError, ValueError),
        (AlmostServerError, ValueError),
    ],
)
def test_each_config_error_is_also_its_builtin_error(error_class: type, builtin: type) -> None:
    error = error_class("the message")
    assert isinstance(error, ConfigError) and isinstance(error, builtin)
    assert str(error) == "the message"


def test_server_refs() -> None:
    assert is_server_ref({"type": "resources_servers", "name": "rs", "extra": 1}) == ResourcesServerRef(
        type="resources_servers", name="rs"
    )
    assert is_server_ref({"type": "train", "name": "d"}) is None
    assert is_server_ref({"type": "responses_api_models"}) is None
    assert is_server_ref("responses_api_models") is None
    parsed = ServerRefTypeAdapter.validate_python({"type": "responses_api_models", "name": "m"})
    assert parsed == ModelServerRef(type="responses_api_models", name="m")


def test_instance_configs_of_each_type() -> None:
    model = validate_server_instance_config(
        "m", {"responses_api_models": {"openai_model": {"entrypoint": "app.py"}}}
    )
    assert isinstance(model, ResponsesAPIModelServerInstanceConfig)
    assert model.get_server_ref() == ModelServerRef(type="responses_api_models", name="m")
    assert model.impl_name == "openai_model"

    resources = validate_server_instance_config("rs", resources_block(domain="agent", port=4000))
    assert isinstance(resources, ResourcesServerInstanceConfig)
    assert resources.get_inner_run_server_config().domain is Domain.AGENT
    assert resources.get_inner_run_server_config_dict() == {
        "entrypoint": "app.py",
        "domain": "agent",
        "port": 4000,
    }

    agent_block = {
        "responses_api_agents": {
            "simple_agent": {
                "entrypoint": "app.py",
                "domain": "math",
                "max_steps": 3,
                "datasets": [{"name": "e", "type": "example", "jsonl_fpath": "e.jsonl"}],
            }
        }
    }
    agent = validate_server_instance_config("a", agent_block)
    assert isinstance(agent, ResponsesAPIAgentServerInstanceConfig)
    assert agent.get_inner_run_server_config().domain is None  # dropped for everything but resources servers
    assert agent.get_inner_run_server_config().max_steps == 3  # extra keys are kept
    assert [dataset.name for dataset in agent.datasets] == ["e"]


def test_resources_server_without_domain_is_not_an_instance() -> None:
    with pytest.raises(ValidationError) as error_info:
        validate_server_instance_config("rs", resources_block())
    assert "must set `domain`" in describe_server_instance_error(error_info.value)


@pytest.mark.parametrize(
    "block",
    [
        {
            "resources_servers": {
                "a": {"entrypoint": "app.py", "domain": "math"},
                "b": {"entrypoint": "app.py"},
            }
        },
        {**resources_block(domain="math"), "responses_api_agents": {"x": {"entrypoint": "app.py"}}},
        {"policy_model_name": "m"},
    ],
)
def test_blocks_that_are_not_exactly_one_instance(block: dict) -> None:
    assert maybe_get_server_instance_config("x", block) is None


def test_almost_server_detection() -> None:
    assert is_almost_server(resources_block())  # no domain
    assert is_almost_server(resources_block(domain="math", port="not-a-port"))
    assert not is_almost_server(resources_block(domain="math"))  # a valid instance
    assert not is_almost_server({"resources_servers": {"weather": {"domain": "math"}}})  # no entrypoint
    assert not is_almost_server({"responses_create_params": {"temperature": 1.0}})


def test_validation_error_location_reads_like_the_yaml_path() -> None:
    with pytest.raises(ValidationError) as error_info:
        validate_server_instance_config(
            "rs",
            resources_block(
                domain="math", datasets=[{"name": "t", "type": "train", "jsonl_fpath": "t.jsonl"}]
            ),
        )
    assert describe_server_instance_error(error_info.value).startswith(
        "resources_servers.weather.datasets.0: "
    )


def test_instances_validate_with_unresolvable_interpolations() -> None:
    root = OmegaConf.create(
        {"port": 4000, "rs": resources_block(domain="math", port="${port}", model="${unset}")}
    )
    instance = validate_server_instance_config("rs", root.rs)
    assert instance.get_inner_run_server_config().port == 4000
    assert leniently_resolved(root.rs)["resources_servers"]["weather"]["model"] == "${unset}"


def test_aggregate_metrics_defaults() -> None:
    assert AggregateMetrics().model_dump() == {
        "group_level_metrics": [],
        "agent_metrics": {},
        "key_metrics": {},
        "repeat_level_metrics": [],
        "perf_summary": None,
    }
