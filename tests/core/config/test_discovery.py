"""The server instances of a merged config: finding them, refusing blocks that almost are instances,
checking the references between them, and reading one instance's config."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from nemo_gym.config.discovery import (
    RESERVED_TOP_LEVEL_KEYS,
    find_server_instances,
    get_first_server_config_dict,
    require_server_instances,
    resolve_instance_config,
)
from nemo_gym.config.errors import (
    AlmostServerError,
    ConfigError,
    NoServerInstancesError,
    ServerRefNotFoundError,
)
from nemo_gym.config.masking import to_yaml
from tests.config_pipeline import (
    POLICY_MODEL,
    agent,
    hydra_value,
    inner,
    parse,
    resources,
    write,
)


def test_no_server_instances_is_raised_for_callers_that_start_servers(workdir: Path) -> None:
    cfg = parse(workdir, "+policy_model_name=m")
    assert find_server_instances(cfg) == []
    with pytest.raises(NoServerInstancesError, match=r"No server instances.*\+config_paths="):
        require_server_instances(cfg)


def test_a_dangling_server_reference_suggests_the_close_name(workdir: Path) -> None:
    config = {
        "my_rs": resources(),
        "my_agent": agent(resources_server={"type": "resources_servers", "name": "my_rss"}),
    }
    write(workdir / "c.yaml", config)
    with pytest.raises(ServerRefNotFoundError) as error_info:
        parse(workdir, "+config_paths=[c.yaml]")
    assert str(error_info.value) == (
        "In server instance 'my_agent', field 'resources_server' references resources_servers/'my_rss', "
        "which is not defined in the merged config. Did you mean: 'my_rs'?"
    )


def test_a_dangling_reference_of_the_wrong_type_says_so(workdir: Path) -> None:
    config = {
        "my_rs": resources(),
        "my_agent": agent(model_server={"type": "responses_api_models", "name": "my_rs"}),
    }
    write(workdir / "c.yaml", config)
    with pytest.raises(ServerRefNotFoundError, match="'my_rs' is an instance of resources_servers"):
        parse(workdir, "+config_paths=[c.yaml]")


def test_references_nested_in_lists_are_checked_too(workdir: Path) -> None:
    config = {
        "rs_a": resources(),
        "my_agent": agent(tools=[{"server": {"type": "resources_servers", "name": "zzz"}}]),
    }
    write(workdir / "c.yaml", config)
    with pytest.raises(
        ServerRefNotFoundError, match=r"field 'tools.0.server'.*Defined resources_servers instances"
    ):
        parse(workdir, "+config_paths=[c.yaml]")


def test_valid_references_pass(workdir: Path) -> None:
    model_ref = {"type": "responses_api_models", "name": "policy_model"}
    rs_ref = {"type": "resources_servers", "name": "rs"}
    write(
        workdir / "c.yaml", {"rs": resources(), "a": agent(resources_server=rs_ref, model_server=model_ref)}
    )
    cfg = parse(workdir, "+config_paths=[c.yaml]", "+policy_model=" + hydra_value(POLICY_MODEL))
    assert [instance.name for instance in find_server_instances(cfg)] == ["rs", "a", "policy_model"]


def test_an_almost_server_is_an_error_naming_the_instance_and_the_problem(workdir: Path) -> None:
    write(
        workdir / "c.yaml",
        {"weather": {"resources_servers": {"w": {"entrypoint": "app.py", "api_key": "sk-1"}}}},
    )
    with pytest.raises(AlmostServerError) as error_info:
        parse(workdir, "+config_paths=[c.yaml]")
    message = str(error_info.value)
    assert "Server instance 'weather' looks like a server but is not valid" in message
    assert "must set `domain`" in message
    assert "api_key: '****'" in message and "sk-1" not in message
    assert "++error_on_almost_servers=false" in message


def test_almost_servers_are_only_warned_about_when_asked(
    workdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(workdir / "c.yaml", {"weather": resources(port="nope"), "rs": resources()})
    with caplog.at_level(logging.WARNING, logger="nemo_gym.global_config"):
        cfg = parse(workdir, "+config_paths=[c.yaml]", "+error_on_almost_servers=false")
    assert [instance.name for instance in find_server_instances(cfg)] == ["rs"]
    assert "'weather' looks like a server" in caplog.text and "will not be started" in caplog.text


def test_a_reserved_key_cannot_name_a_server(workdir: Path) -> None:
    assert "query" in RESERVED_TOP_LEVEL_KEYS
    write(workdir / "c.yaml", {"query": resources()})
    with pytest.raises(AlmostServerError, match="'query' is a reserved top-level key"):
        parse(workdir, "+config_paths=[c.yaml]")


def test_policy_interpolations_stay_unresolved_until_an_instance_is_resolved(workdir: Path) -> None:
    write(
        workdir / "env.yaml",
        {"policy_base_url": "http://u/v1", "policy_api_key": "sk-x", "policy_model_name": "m"},
    )
    write(workdir / "c.yaml", {"policy_model": POLICY_MODEL})
    cfg = parse(workdir, "+config_paths=[c.yaml]")
    raw = OmegaConf.to_container(inner(cfg, "policy_model"), resolve=False)
    assert raw["openai_model"] == "${policy_model_name}"
    assert "openai_model: ${policy_model_name}" in to_yaml(cfg, mask=False)
    resolved = resolve_instance_config(cfg, "policy_model")
    assert (resolved["openai_model"], resolved["openai_api_key"], resolved["name"]) == (
        "m",
        "sk-x",
        "policy_model",
    )
    assert resolved["port"] == inner(cfg, "policy_model").port


def test_an_unresolvable_reference_does_not_break_parsing_but_resolution_names_it(workdir: Path) -> None:
    write(workdir / "c.yaml", {"policy_model": POLICY_MODEL})
    cfg = parse(workdir, "+config_paths=[c.yaml]")
    assert [instance.name for instance in find_server_instances(cfg)] == ["policy_model"]
    with pytest.raises(ConfigError, match="openai_model.openai_base_url of server instance 'policy_model'"):
        resolve_instance_config(cfg, "policy_model")


def test_unknown_instance_lookup_suggests_a_name(workdir: Path) -> None:
    write(workdir / "c.yaml", {"weather_rs": resources()})
    cfg = parse(workdir, "+config_paths=[c.yaml]")
    assert inner(cfg, "weather_rs").entrypoint == "app.py"
    with pytest.raises(
        ServerRefNotFoundError, match="No server instance named 'weather_r'.*Did you mean: 'weather_rs'"
    ):
        get_first_server_config_dict(cfg, "weather_r")
