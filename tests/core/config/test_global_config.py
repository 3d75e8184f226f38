"""The config pipeline on real YAML files and real Hydra override parsing."""

from __future__ import annotations

import logging
import socket
import sys
from pathlib import Path

import pytest
import yaml
from omegaconf import DictConfig, OmegaConf
from pydantic import BaseModel, model_validator

from nemo_gym.config.settings import command_settings
from nemo_gym.config_types import (
    AlmostServerError,
    ConfigError,
    ConfigMissingValuesError,
    ConfigPathNotFoundError,
    InheritPathNotFoundError,
    MalformedConfigPathsError,
    NoServerInstancesError,
    ServerRefNotFoundError,
)
from nemo_gym.global_config import (
    DEFAULT_HEAD_SERVER_PORT,
    DEFAULT_HOST,
    NEMO_GYM_CONFIG_DICT_ENV_VAR_NAME,
    NEMO_GYM_CONFIG_FILE_ENV_VAR_NAME,
    RESERVED_TOP_LEVEL_KEYS,
    GlobalConfigDictParser,
    GlobalConfigDictParserConfig,
    find_open_port,
    find_server_instances,
    get_first_server_config_dict,
    get_global_config_dict,
    get_hf_token,
    install_root,
    mask_secrets,
    maybe_get_global_config_dict,
    parse_global_config_dict,
    parse_overrides,
    require_server_instances,
    reset_global_config_dict_cache,
    resolve_instance_config,
    set_global_config_dict,
    to_resolved_yaml,
    to_yaml,
)

POLICY_MODEL = {
    "responses_api_models": {
        "openai_model": {
            "entrypoint": "app.py",
            "openai_base_url": "${policy_base_url}",
            "openai_api_key": "${policy_api_key}",
            "openai_model": "${policy_model_name}",
        }
    }
}


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """The current directory of a parse; its sibling `root` plays the install root."""
    (tmp_path / "cwd").mkdir()
    (tmp_path / "root").mkdir()
    return tmp_path / "cwd"


def write(path: Path, content: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else yaml.safe_dump(content, sort_keys=False))
    return path


def parse(workdir: Path, *overrides: str, initial: dict | None = None):
    return parse_global_config_dict(
        list(overrides), initial_global_config_dict=initial, cwd=workdir, install_root=workdir.parent / "root"
    )


def resources(port: int | None = None, **inner: object) -> dict:
    block = {"entrypoint": "app.py", "domain": "agent", **inner}
    if port is not None:
        block["port"] = port
    return {"resources_servers": {"weather": block}}


def agent(**inner: object) -> dict:
    return {"responses_api_agents": {"simple_agent": {"entrypoint": "app.py", **inner}}}


def inner(cfg, name: str):
    return get_first_server_config_dict(cfg, name)


# ---------------------------------------------------------------------------------------------------------
# Overrides and precedence


def test_hydra_override_grammar() -> None:
    config = parse_overrides(["+a.b=1", "+xs=[1,two]", "++a.c=x", "++a.b=2", "+d={k: v}", "+n=null"])
    assert OmegaConf.to_container(config) == {
        "a": {"b": 2, "c": "x"},
        "xs": [1, "two"],
        "d": {"k": "v"},
        "n": None,
    }


@pytest.mark.parametrize(
    ("token", "message"),
    [
        ("a=1", r"must start with '\+' \(add\) or '\+\+'"),
        ("~a", "must start with"),
        ("+a=1,2", "several comma-separated values"),
        ("+a=[1", r"Cannot parse override '\+a=\[1'"),
    ],
)
def test_overrides_outside_the_grammar_are_config_errors(token: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_overrides([token])


def test_adding_a_key_twice_needs_force_add() -> None:
    with pytest.raises(ConfigError, match=r"'a' is already set.*\+\+a="):
        parse_overrides(["+a=1", "+a=2"])


def test_a_key_below_a_plain_value_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"'a' is already set to a plain value"):
        parse_overrides(["+a=1", "+a.b=2"])


def test_override_errors_never_echo_a_secret_value() -> None:
    for tokens in (
        ["+policy_api_key=sk-abc,def"],
        ["+hf_token=[hf-abc"],
        ["+x.api_key=sk-1", "+x.api_key=sk-2"],
    ):
        with pytest.raises(ConfigError) as raised:
            parse_overrides(tokens)
        assert "sk-" not in str(raised.value) and "hf-" not in str(raised.value)


def test_precedence_files_then_env_yaml_then_initial_dict_then_cli(workdir: Path) -> None:
    write(workdir / "c.yaml", {"a": "file", "b": "file", "c": "file", "d": "file"})
    write(workdir / "env.yaml", {"b": "env", "c": "env", "d": "env"})
    cfg = parse(workdir, "+config_paths=[c.yaml]", "++d=cli", initial={"c": "initial", "d": "initial"})
    assert [cfg.a, cfg.b, cfg.c, cfg.d] == ["file", "env", "initial", "cli"]


def test_later_files_override_earlier_ones(workdir: Path) -> None:
    write(workdir / "one.yaml", {"x": 1, "only_one": True})
    write(workdir / "two.yaml", {"x": 2})
    cfg = parse(workdir, "+config_paths=[one.yaml,two.yaml]")
    assert (cfg.x, cfg.only_one) == (2, True)


def test_an_includer_overrides_what_it_includes_at_any_depth(workdir: Path) -> None:
    """NeMo Gym 0.7's post-order merge (0.4 let an included file override its includer)."""
    write(workdir / "top.yaml", {"config_paths": ["sub/base.yaml"], "x": "top", "y": "top", "top_only": 0})
    write(
        workdir / "sub/base.yaml",
        {"config_paths": ["sub/deep.yaml"], "x": "base", "z": "base", "base_only": 1},
    )
    write(
        workdir / "sub/deep.yaml", {"deep_only": 2, "y": "deep", "z": "deep", "config_paths": ["top.yaml"]}
    )  # a cycle
    cfg = parse(workdir, "+config_paths=[top.yaml]")
    assert (cfg.x, cfg.y, cfg.z) == ("top", "top", "base")
    assert (cfg.top_only, cfg.base_only, cfg.deep_only) == (0, 1, 2)
    assert list(cfg.config_paths) == ["top.yaml", "sub/base.yaml", "sub/deep.yaml"], "discovery order"


def test_a_later_sibling_and_its_includes_override_an_earlier_one(workdir: Path) -> None:
    write(workdir / "a.yaml", {"config_paths": ["included.yaml"], "x": "a"})
    write(workdir / "b.yaml", {"config_paths": ["b_base.yaml"], "x": "b"})
    write(workdir / "included.yaml", {"x": "included", "y": "included"})
    write(workdir / "b_base.yaml", {"y": "b_base"})
    cfg = parse(workdir, "+config_paths=[a.yaml,b.yaml]")
    assert (cfg.x, cfg.y) == ("b", "b_base")
    assert list(cfg.config_paths) == ["a.yaml", "b.yaml", "included.yaml", "b_base.yaml"]


def test_a_diamond_include_is_loaded_once(workdir: Path, caplog: pytest.LogCaptureFixture) -> None:
    write(workdir / "top.yaml", {"config_paths": ["left.yaml", "right.yaml"], "x": "top"})
    write(workdir / "left.yaml", {"config_paths": ["shared.yaml"], "x": "left", "y": "left"})
    write(workdir / "right.yaml", {"config_paths": ["shared.yaml"], "y": "right"})
    write(workdir / "shared.yaml", {"x": "shared", "y": "shared", "z": "shared"})
    with caplog.at_level(logging.WARNING, logger="nemo_gym.global_config"):
        cfg = parse(workdir, "+config_paths=[top.yaml]")
    assert (cfg.x, cfg.y, cfg.z) == ("top", "right", "shared")
    assert list(cfg.config_paths) == ["top.yaml", "left.yaml", "right.yaml", "shared.yaml"]
    assert "shared.yaml is listed more than once" in caplog.text


def test_config_paths_are_tried_in_cwd_then_in_install_root(workdir: Path) -> None:
    root = workdir.parent / "root"
    write(root / "configs/only_in_root.yaml", {"from_root": True})
    write(root / "configs/both.yaml", {"both": "root"})
    write(workdir / "configs/both.yaml", {"both": "cwd"})
    cfg = parse(workdir, "+config_paths=[configs/only_in_root.yaml,configs/both.yaml]")
    assert (cfg.from_root, cfg.both) == (True, "cwd")


def test_env_yaml_of_cwd_wins_over_install_root_and_may_list_config_paths(workdir: Path) -> None:
    write(workdir.parent / "root/env.yaml", {"policy_model_name": "root-model"})
    write(workdir / "c.yaml", {"from_file": True})
    assert parse(workdir).policy_model_name == "root-model"
    write(workdir / "env.yaml", {"policy_model_name": "cwd-model", "config_paths": ["c.yaml"]})
    cfg = parse(workdir)
    assert (cfg.policy_model_name, cfg.from_file) == ("cwd-model", True)


def test_install_root_is_the_parent_of_the_package() -> None:
    assert (install_root() / "nemo_gym" / "global_config.py").is_file()


# ---------------------------------------------------------------------------------------------------------
# Errors of core-spec §3.1


def test_missing_config_path_names_both_places_tried(workdir: Path) -> None:
    with pytest.raises(ConfigPathNotFoundError) as error_info:
        parse(workdir, "+config_paths=[nowhere.yaml]")
    message = str(error_info.value)
    assert "'nowhere.yaml'" in message
    assert (
        str(workdir / "nowhere.yaml") in message and str(workdir.parent / "root" / "nowhere.yaml") in message
    )


def test_missing_config_path_listed_by_a_file_names_that_file(workdir: Path) -> None:
    including = write(workdir / "a.yaml", {"config_paths": ["gone.yaml"]})
    with pytest.raises(ConfigPathNotFoundError, match=f"listed in config_paths of {including}"):
        parse(workdir, "+config_paths=[a.yaml]")


def test_config_paths_as_a_string_is_malformed(workdir: Path) -> None:
    with pytest.raises(MalformedConfigPathsError, match=r"write \+config_paths=\[a.yaml\]"):
        parse(workdir, "+config_paths=a.yaml")


def test_malformed_config_paths_in_a_file_names_the_file(workdir: Path) -> None:
    bad = write(workdir / "a.yaml", {"config_paths": [1, 2]})
    with pytest.raises(
        MalformedConfigPathsError, match=f"config_paths in {bad} must be a list of file paths"
    ):
        parse(workdir, "+config_paths=[a.yaml]")


def test_malformed_yaml_names_file_line_and_column(workdir: Path) -> None:
    bad = write(workdir / "bad.yaml", "a: 1\nb: [1, 2\nc: 3\n")
    with pytest.raises(ConfigError, match=rf"^{bad}:3:2: expected ',' or '\]'"):
        parse(workdir, "+config_paths=[bad.yaml]")


def test_a_yaml_file_must_hold_a_mapping(workdir: Path) -> None:
    bad = write(workdir / "list.yaml", "- 1\n- 2\n")
    with pytest.raises(ConfigError, match=f"{bad}: the top level must be a mapping"):
        parse(workdir, "+config_paths=[list.yaml]")


def test_every_unset_value_is_listed(workdir: Path) -> None:
    write(workdir / "c.yaml", {"a": {"b": "???", "ok": 1}, "rs": resources(model="???"), "xs": [1, "???"]})
    with pytest.raises(ConfigMissingValuesError) as error_info:
        parse(workdir, "+config_paths=[c.yaml]", "+c.d=???")
    message = str(error_info.value)
    assert "a.b, rs.resources_servers.weather.model, xs.1, c.d" in message
    assert "++a.b=<value>" in message


def test_missing_values_set_on_the_command_line_are_not_reported(workdir: Path) -> None:
    write(workdir / "c.yaml", {"a": {"b": "???"}})
    assert parse(workdir, "+config_paths=[c.yaml]", "++a.b=5").a.b == 5


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
    cfg = parse(workdir, "+config_paths=[c.yaml]", "+policy_model=" + _hydra(POLICY_MODEL))
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


# ---------------------------------------------------------------------------------------------------------
# Structural directives


@pytest.mark.parametrize("order", ["source first", "user first"])
def test_chained_copies_resolve_in_any_order(workdir: Path, order: str) -> None:
    blocks = {
        "base": {"x": 1, "y": 2},
        "middle": {"_copy": "base", "y": 3},
        "user": {"_copy": "middle", "z": 4},
    }
    if order == "user first":
        blocks = dict(reversed(blocks.items()))
    write(workdir / "c.yaml", blocks)
    cfg = parse(workdir, "+config_paths=[c.yaml]")
    assert OmegaConf.to_container(cfg.user) == {"x": 1, "y": 3, "z": 4}
    assert OmegaConf.to_container(cfg.middle) == {"x": 1, "y": 3}


def test_cyclic_directives_are_reported(workdir: Path) -> None:
    write(workdir / "c.yaml", {"a": {"_copy": "b"}, "b": {"_copy": "c"}, "c": {"_copy": "a"}})
    with pytest.raises(ConfigError, match="cycle"):
        parse(workdir, "+config_paths=[c.yaml]")


def test_inherit_from_moves_and_copy_copies(workdir: Path) -> None:
    config = {
        "templates": {"agent": agent(max_steps=5), "shared": {"temperature": 0.5}},
        "my_agent": {"_inherit_from": "templates.agent"},
        "params": "${copy:templates.shared}",
        "tuned": {"_copy": "templates.shared", "top_p": 0.9, "_delete_key": "temperature"},
    }
    write(workdir / "c.yaml", config)
    cfg = parse(workdir, "+config_paths=[c.yaml]")
    assert "agent" not in cfg.templates  # moved
    assert inner(cfg, "my_agent").max_steps == 5
    assert OmegaConf.to_container(cfg.params) == {"temperature": 0.5}
    assert OmegaConf.to_container(cfg.tuned) == {"top_p": 0.9}
    assert [instance.name for instance in find_server_instances(cfg)] == ["my_agent"]


def test_a_directive_naming_a_missing_path_says_which(workdir: Path) -> None:
    write(workdir / "c.yaml", {"templates": {"agent": {}}, "x": {"_inherit_from": "templates.agnet"}})
    with pytest.raises(
        InheritPathNotFoundError, match=r"_inherit_from at 'x' names 'templates.agnet'.*templates.agent"
    ):
        parse(workdir, "+config_paths=[c.yaml]")


# ---------------------------------------------------------------------------------------------------------
# Interpolation


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


# ---------------------------------------------------------------------------------------------------------
# Hosts and ports


def test_hosts_ports_and_derived_keys_are_filled(workdir: Path) -> None:
    write(workdir / "c.yaml", {"a": resources(), "b": resources(port=15000, host="0.0.0.0")})
    cfg = parse(workdir, "+config_paths=[c.yaml]")
    assert (inner(cfg, "a").host, inner(cfg, "b").host, inner(cfg, "b").port) == (
        "127.0.0.1",
        "0.0.0.0",
        15000,
    )
    assert 10001 <= inner(cfg, "a").port <= 20000
    assert OmegaConf.to_container(cfg.head_server) == {"host": "127.0.0.1", "port": DEFAULT_HEAD_SERVER_PORT}
    assert list(cfg.disallowed_ports) == [DEFAULT_HEAD_SERVER_PORT, inner(cfg, "a").port, 15000]
    assert (cfg.port_range_low, cfg.port_range_high) == (10001, 20000)


def test_default_host_is_used_for_instances_and_head_server(workdir: Path) -> None:
    write(workdir / "c.yaml", {"a": resources()})
    cfg = parse(workdir, "+config_paths=[c.yaml]", "+default_host=127.0.0.2")
    assert inner(cfg, "a").host == "127.0.0.2" and cfg.head_server.host == "127.0.0.2"


def test_duplicate_explicit_ports_name_both_instances(workdir: Path) -> None:
    write(workdir / "c.yaml", {"first": resources(port=15000), "second": resources(port=15000)})
    with pytest.raises(ConfigError, match="'first' and 'second' both have port 15000"):
        parse(workdir, "+config_paths=[c.yaml]")


def test_an_explicit_port_may_not_be_the_head_port(workdir: Path) -> None:
    write(workdir / "c.yaml", {"first": resources(port=12345)})
    with pytest.raises(ConfigError, match="'first' has port 12345, which is the head server's port"):
        parse(workdir, "+config_paths=[c.yaml]", "+head_server.port=12345")


def test_many_random_ports_never_collide_with_each_other_explicit_or_head_ports(workdir: Path) -> None:
    explicit = {f"fixed_{i}": resources(port=10001 + i * 3) for i in range(50)}
    randoms = {f"random_{i}": resources() for i in range(200)}
    write(workdir / "c.yaml", {**randoms, **explicit})
    cfg = parse(workdir, "+config_paths=[c.yaml]", "+port_range_low=10001", "+port_range_high=10400")
    ports = [inner(cfg, name).port for name in [*randoms, *explicit]]
    assert len(set(ports)) == len(ports) == 250
    assert DEFAULT_HEAD_SERVER_PORT not in ports
    assert all(10001 <= port <= 10400 for port in ports)


def test_random_ports_fill_exactly_the_ports_left_in_a_narrow_range(workdir: Path) -> None:
    low = _free_port_block(10)
    explicit = {f"fixed_{i}": resources(port=low + i) for i in range(5)}
    randoms = {f"random_{i}": resources() for i in range(4)}
    write(workdir / "c.yaml", {**randoms, **explicit})
    overrides = ["+config_paths=[c.yaml]", f"+head_server.port={low + 5}", f"+port_range_low={low}"]
    cfg = parse(workdir, *overrides, f"+port_range_high={low + 9}")
    assert sorted(inner(cfg, name).port for name in randoms) == [low + 6, low + 7, low + 8, low + 9]
    write(workdir / "c.yaml", {**randoms, "random_extra": resources(), **explicit})
    with pytest.raises(ConfigError, match="No free port left"):
        parse(workdir, *overrides, f"+port_range_high={low + 9}")


# ---------------------------------------------------------------------------------------------------------
# Secrets


def test_mask_secrets_hides_values_under_key_and_token_keys() -> None:
    config = OmegaConf.create(
        {
            "policy_api_key": "sk-1",
            "nested": {"HF_TOKEN": "hf-1", "tokens": ["a", "b"], "keep": "visible", "session_key": 123},
            "openai_api_key": "${policy_api_key}",
            "unset_key": None,
            "use_key_rotation": True,
        }
    )
    assert mask_secrets(config) == {
        "policy_api_key": "****",
        "nested": {"HF_TOKEN": "****", "tokens": ["****", "****"], "keep": "visible", "session_key": "****"},
        "openai_api_key": "${policy_api_key}",
        "unset_key": None,
        "use_key_rotation": True,
    }
    assert config.policy_api_key == "sk-1"  # a copy was masked


def test_mask_secrets_keeps_server_addresses_and_counts_visible() -> None:
    config = {
        "tokenizer_rs": {
            "resources_servers": {
                "token_counter": {"host": "127.0.0.1", "port": 12001, "api_key": "sk-2", "max_tokens": 64}
            }
        },
        "monkey_model": {
            "responses_api_models": {
                "openai_model": {"port": 12002, "default_headers": {"Authorization": "Bearer sk-3"}}
            }
        },
        "hf_token": "hf-2",
        "db": {"password": "p", "client_secret": "s"},
    }
    masked = mask_secrets(config)
    assert masked["tokenizer_rs"]["resources_servers"]["token_counter"] == {
        "host": "127.0.0.1",
        "port": 12001,
        "api_key": "****",
        "max_tokens": 64,
    }
    model = masked["monkey_model"]["responses_api_models"]["openai_model"]
    assert model == {"port": 12002, "default_headers": {"Authorization": "****"}}
    assert masked["hf_token"] == "****"
    assert masked["db"] == {"password": "****", "client_secret": "****"}


def test_to_yaml_masks_only_when_asked() -> None:
    config = {"policy_api_key": "sk-1", "url": "${policy_base_url}"}
    assert "sk-1" not in to_yaml(config, mask=True) and "'****'" in to_yaml(config, mask=True)
    assert "policy_api_key: sk-1" in to_yaml(config, mask=False)
    assert "url: ${policy_base_url}" in to_yaml(config, mask=True)


def test_resolved_yaml_shows_env_yaml_values_and_masks_secrets_that_came_through_interpolation(
    workdir: Path,
) -> None:
    model = POLICY_MODEL["responses_api_models"]["openai_model"]
    headers = {"X-Auth": "Bearer ${policy_api_key}", "max_tokens": "${limits.max_tokens}"}
    write(
        workdir / "env.yaml",
        {"policy_base_url": "http://u/v1", "policy_api_key": "sk-9", "policy_model_name": "m-1"},
    )
    write(
        workdir / "c.yaml",
        {
            "policy_model": {"responses_api_models": {"openai_model": {**model, "default_headers": headers}}},
            "limits": {"max_tokens": 64},
        },
    )
    resolved = yaml.safe_load(to_resolved_yaml(parse(workdir, "+config_paths=[c.yaml]")))
    assert "sk-9" not in str(resolved) and resolved["policy_api_key"] == "****"
    assert inner(OmegaConf.create(resolved), "policy_model") == {
        "entrypoint": "app.py",
        "openai_base_url": "http://u/v1",
        "openai_api_key": "****",
        "openai_model": "m-1",
        "default_headers": {"X-Auth": "****", "max_tokens": 64},
        "host": DEFAULT_HOST,
        "port": resolved["policy_model"]["responses_api_models"]["openai_model"]["port"],
    }


def test_resolved_yaml_masks_a_secret_that_reached_a_plain_key_through_a_chain() -> None:
    config = OmegaConf.create(
        {
            "policy_api_key": "sk-chained-secret",
            "bearer": "Bearer ${policy_api_key}",
            "server": {"headers": {"X-Upstream": "${bearer}", "X-Note": "kept as is"}},
        }
    )
    text = to_resolved_yaml(config)
    assert "sk-chained-secret" not in text
    assert yaml.safe_load(text)["server"]["headers"] == {"X-Upstream": "Bearer ****", "X-Note": "kept as is"}


def test_resolved_yaml_leaves_unresolvable_values_as_written() -> None:
    config = OmegaConf.create(
        {
            "name": "m",
            "model": {"name": "${name}", "url": "${nowhere}/v1", "api_key": "${missing_key}", "todo": "???"},
        }
    )
    assert yaml.safe_load(to_resolved_yaml(config))["model"] == {
        "name": "m",
        "url": "${nowhere}/v1",
        "api_key": "${missing_key}",
        "todo": "???",
    }


def test_mask_secrets_knows_the_common_secret_spellings() -> None:
    names = [
        "db_passwd", "passwd", "pwd", "credential", "credentials", "private_key", "access_key",
        "client_secret", "api_key", "apikey", "apiKey", "auth", "upstream_auth", "cookie", "session_secret",
        "SMTP_PASSWORD", "hftoken", "passphrase",
    ]  # fmt: skip
    masked = mask_secrets({"settings": {name: "s3cr3t-value" for name in names}})
    assert masked == {"settings": {name: "****" for name in names}}


def test_mask_secrets_leaves_names_that_only_contain_the_letters_visible() -> None:
    config = {"tokenizer": "gpt2", "keyword": "paris", "author": "me", "monkey": "george", "use_auth": True}
    assert mask_secrets({"settings": config}) == {"settings": config}
    assert mask_secrets({"limits": {"max_tokens": 64, "db_passwd": 1234}}) == {
        "limits": {"max_tokens": 64, "db_passwd": "****"}
    }


def test_mask_secrets_hides_a_password_in_any_url() -> None:
    config = {
        "policy_base_url": "https://user:url-pass-1@host/v1",
        "mirrors": ["http://127.0.0.1:9/v1", {"url": "https://bot:url-pass-2@git.example/repo.git"}],
        "notes": "fetched from https://u:p@ss-3@h/x?a=b@c and ftp://token-4@h/",
    }
    assert mask_secrets(config) == {
        "policy_base_url": "https://user:****@host/v1",
        "mirrors": ["http://127.0.0.1:9/v1", {"url": "https://bot:****@git.example/repo.git"}],
        "notes": "fetched from https://u:****@h/x?a=b@c and ftp://****@h/",
    }


def test_mask_secrets_hides_credential_headers_in_header_maps() -> None:
    headers = {
        "X-Upstream-Auth": "h-1",
        "Cookie": "h-2",
        "Proxy-Authorization": "h-3",
        "X-Api-Key": "h-4",
        "X-Session-Id": "h-5",
        "Accept": "application/json",
    }
    masked = mask_secrets(
        {"model": {"headers": headers, "extra_headers": headers, "openai_default_headers": headers}}
    )
    expected = {name: "****" for name in headers} | {"Accept": "application/json"}
    assert masked == {
        "model": {"headers": expected, "extra_headers": expected, "openai_default_headers": expected}
    }


def test_resolved_yaml_hides_url_passwords_and_credential_headers_that_came_through_interpolation() -> None:
    config = OmegaConf.create(
        {
            "policy_base_url": "https://user:url-pass-5@host/v1",
            "upstream_header": "hdr-secret-6",
            "model": {
                "url": "${policy_base_url}",
                "default_headers": {"X-Upstream-Auth": "${upstream_header}"},
            },
        }
    )
    text = to_resolved_yaml(config)
    assert "url-pass-5" not in text and "hdr-secret-6" not in text
    assert yaml.safe_load(text)["model"] == {
        "url": "https://user:****@host/v1",
        "default_headers": {"X-Upstream-Auth": "****"},
    }


def test_override_errors_hide_url_passwords_and_credential_headers() -> None:
    for tokens in (
        ["+policy_base_url=x", "+policy_base_url=https://u:url-pass-7@h/v1"],
        ["+m.headers.X-Session=x", "+m.headers.X-Session=hdr-secret-8"],
        ["+db_passwd=x", "+db_passwd=db-secret-9"],
    ):
        with pytest.raises(ConfigError) as raised:
            parse_overrides(tokens)
        assert "****" in str(raised.value)
        assert "pass-7" not in str(raised.value) and "secret-" not in str(raised.value)


# ---------------------------------------------------------------------------------------------------------
# The process-wide config


@pytest.fixture
def fresh_process_config(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(NEMO_GYM_CONFIG_FILE_ENV_VAR_NAME, raising=False)
    monkeypatch.delenv(NEMO_GYM_CONFIG_DICT_ENV_VAR_NAME, raising=False)
    reset_global_config_dict_cache()
    yield monkeypatch
    reset_global_config_dict_cache()


def test_a_server_process_loads_the_merged_config_file_once(tmp_path: Path, fresh_process_config) -> None:
    config_file = write(tmp_path / "merged.yaml", {"a": {"b": "${x}"}, "x": 1})
    fresh_process_config.setenv(NEMO_GYM_CONFIG_FILE_ENV_VAR_NAME, str(config_file))
    first = get_global_config_dict()
    assert first.a.b == 1
    write(config_file, {"changed": True})
    assert get_global_config_dict() is first
    reset_global_config_dict_cache()
    assert get_global_config_dict().changed is True


def test_the_legacy_config_text_variable_is_still_read(fresh_process_config) -> None:
    fresh_process_config.setenv(NEMO_GYM_CONFIG_DICT_ENV_VAR_NAME, "policy_model_name: m\n")
    assert get_global_config_dict().policy_model_name == "m"


def test_without_a_launcher_the_config_is_parsed_from_a_command_line_of_overrides(
    fresh_process_config, tmp_path: Path
) -> None:
    fresh_process_config.chdir(tmp_path)
    fresh_process_config.setattr(sys, "argv", ["gym", "+policy_model_name=m", "++head_server.port=11999"])
    cfg = get_global_config_dict()
    assert (cfg.policy_model_name, cfg.head_server.port) == ("m", 11999)


@pytest.mark.parametrize(
    "argv",
    [
        [
            "default_worker.py",
            "--node-ip-address=10.0.0.1",
            "--object-store-name=/tmp/plasma",
        ],  # a Ray worker
        ["trainer.py", "11000", "tasks.jsonl"],
        ["pytest", "-q", "tests/test_x.py"],
    ],
)
def test_a_foreign_command_line_is_never_read_as_config(fresh_process_config, tmp_path: Path, argv) -> None:
    fresh_process_config.chdir(tmp_path)
    fresh_process_config.setattr(sys, "argv", argv)
    cfg = get_global_config_dict()
    assert "policy_model_name" not in cfg and cfg.head_server.port == DEFAULT_HEAD_SERVER_PORT


def test_a_parser_config_builds_the_process_config_from_memory_and_a_named_env_yaml(
    fresh_process_config, tmp_path: Path
) -> None:
    fresh_process_config.chdir(tmp_path)
    fresh_process_config.setattr(sys, "argv", ["gym", "+policy_model_name=from_the_cli"])
    write(tmp_path / "trainer_env.yaml", {"policy_api_key": "sk-from-env-yaml", "policy_model_name": "env"})
    write(tmp_path / "env.yaml", {"policy_api_key": "sk-not-this-one"})
    parser_config = GlobalConfigDictParserConfig(
        dotenv_path=tmp_path / "trainer_env.yaml",
        initial_global_config_dict=DictConfig({"policy_model_name": "in_memory", "head_server": {"port": 0}}),
        skip_load_from_cli=True,
    )
    cfg = get_global_config_dict(global_config_dict_parser_config=parser_config)
    # The in-memory dict wins over env.yaml, as in NeMo Gym; the command line is skipped.
    assert (cfg.policy_model_name, cfg.policy_api_key) == ("in_memory", "sk-from-env-yaml")
    assert get_global_config_dict() is cfg
    assert maybe_get_global_config_dict() is cfg


def test_a_missing_dotenv_path_is_no_error_and_hide_secrets_masks(
    fresh_process_config, tmp_path: Path
) -> None:
    parser_config = GlobalConfigDictParserConfig(
        dotenv_path=tmp_path / "absent.yaml",
        initial_global_config_dict={"policy_api_key": "sk-secret-value"},
        skip_load_from_cli=True,
        hide_secrets=True,
    )
    cfg = GlobalConfigDictParser().parse(parser_config)
    assert cfg.policy_api_key != "sk-secret-value" and "sk-secret-value" not in str(cfg)


def test_without_any_source_the_process_has_no_config_yet(fresh_process_config) -> None:
    assert maybe_get_global_config_dict() is None


def test_nemo_gyms_key_names_have_nemo_gyms_values() -> None:
    from nemo_gym import global_config

    assert global_config.TASK_INDEX_KEY_NAME == "_ng_task_index"
    assert global_config.ROLLOUT_INDEX_KEY_NAME == "_ng_rollout_index"
    assert global_config.HEAD_SERVER_KEY_NAME == "head_server"
    assert global_config.AGENT_REF_KEY_NAME == "agent_ref"
    assert global_config.POLICY_BASE_URL_KEY_NAME == "policy_base_url"
    assert global_config.NEMO_GYM_CONFIG_DICT_ENV_VAR_NAME == "NEMO_GYM_CONFIG_DICT"


def test_get_hf_token_and_find_open_port(fresh_process_config, tmp_path: Path) -> None:
    set_global_config_dict(global_config_dict=DictConfig({"hf_token": "hf_abc"}))
    assert get_hf_token() == "hf_abc"
    port = find_open_port(disallowed_ports=[1, 2])
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))


# ---------------------------------------------------------------------------------------------------------
# Helpers


def _hydra(value: dict) -> str:
    """A mapping as a Hydra override value (flow YAML without spaces after separators)."""
    return (
        yaml.safe_dump(value, default_flow_style=True, width=10_000)
        .strip()
        .replace(", ", ",")
        .replace(": ", ":")
    )


def _free_port_block(size: int) -> int:
    """The lowest port of `size` consecutive ports that can all be bound now (above the default range)."""
    for low in range(20100, 30000, size):
        if all(_bindable(port) for port in range(low, low + size)):
            return low
    raise RuntimeError("no block of free ports")


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_an_offline_parse_gives_ports_without_probing_them(tmp_path: Path) -> None:
    """`offline` inspects a config without side effects: the one port of the range is taken, yet given."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        initial = {
            "port_range_low": port,
            "port_range_high": port,
            "head_server": {"port": 0},
            "rs": {"resources_servers": {"x": {"entrypoint": "app.py", "domain": "other"}}},
        }
        parser_config = GlobalConfigDictParserConfig(
            initial_global_config_dict=initial, skip_load_from_cli=True, skip_load_from_dotenv=True
        )
        with pytest.raises(ConfigError, match="No bindable port"):
            GlobalConfigDictParser().parse(parser_config)
        offline = parser_config.model_copy(update={"offline": True})
        assert GlobalConfigDictParser().parse(offline).rs.resources_servers.x.port == port


def test_a_top_level_key_that_nearly_spells_a_setting_is_warned_about(workdir: Path, caplog) -> None:
    write(
        workdir / "c.yaml", {"num_repeat": 3, "my_own_value": 1, "templated_ur": "x", "t": "${templated_ur}"}
    )
    with caplog.at_level(logging.WARNING, logger="nemo_gym.global_config"):
        parse(workdir, "+config_paths=[c.yaml]", "++disable_agregation=true")
    warned = [record.getMessage() for record in caplog.records if "is no setting" in record.getMessage()]
    assert sorted(warned) == [
        "top-level key 'disable_agregation' is no setting; did you mean 'disable_aggregation'? (a value of your "
        "own is fine once another value refers to it as ${disable_agregation})",
        "top-level key 'num_repeat' is no setting; did you mean 'num_repeats'? (a value of your own is fine "
        "once another value refers to it as ${num_repeat})",
    ]


def test_every_settings_field_is_a_known_top_level_key() -> None:
    """The did-you-mean list must know every key a command reads, or a right key would be warned about."""
    import importlib

    from nemo_gym.config.deployment import HTTPClientSettings, ServerKnobs
    from nemo_gym.config.top_level_keys import KNOWN_KEYS
    from nemo_gym.config_types import BaseNeMoGymCLIConfig

    for module in ("nemo_gym.collection.config", "nemo_gym.collection.shards", "nemo_gym.collection.reverification",
                   "nemo_gym.collection.eval_profile", "nemo_gym.datasets.collation", "nemo_gym.prompt", "nemo_gym.cli.env_test",
                   "nemo_gym.cli.view", "nemo_gym.datasets.gitlab", "nemo_gym.datasets.huggingface"):  # fmt: skip
        importlib.import_module(module)

    def every_subclass(cls: type) -> list[type]:
        return [sub for direct in cls.__subclasses__() for sub in (direct, *every_subclass(direct))]

    fields = {field for model in every_subclass(BaseNeMoGymCLIConfig) for field in model.model_fields}
    fields |= set(HTTPClientSettings.model_fields) | set(ServerKnobs.model_fields)
    assert fields - KNOWN_KEYS == set()


def test_top_level_skip_verification_reaches_every_agent_that_does_not_set_it(workdir: Path) -> None:
    agent = {"entrypoint": "app.py", "resources_server": {"type": "resources_servers", "name": "env"},
             "model_server": {"type": "responses_api_models", "name": "policy_model"}}  # fmt: skip
    write(workdir / "c.yaml", {
        "skip_verification": True,
        "skip_verification_reward": 0.5,
        "env": {"resources_servers": {"example_single_tool_call": {"entrypoint": "app.py", "domain": "agent"}}},
        "policy_model": {"responses_api_models": {"replay_model": {"entrypoint": "app.py"}}},
        "plain_agent": {"responses_api_agents": {"simple_agent": dict(agent)}},
        "own_agent": {"responses_api_agents": {"simple_agent": {**agent, "skip_verification": False}}},
    })  # fmt: skip
    cfg = parse(workdir, "+config_paths=[c.yaml]")
    plain = cfg.plain_agent.responses_api_agents.simple_agent
    own = cfg.own_agent.responses_api_agents.simple_agent
    assert (plain.skip_verification, plain.skip_verification_reward) == (True, 0.5)
    assert (own.skip_verification, own.skip_verification_reward) == (False, 0.5)


def test_the_token_id_capture_block_is_checked_key_by_key(workdir: Path, caplog) -> None:
    with pytest.raises(ConfigError, match="token_id_capture: .*enabeld"):
        parse(workdir, "++token_id_capture.enabeld=true")
    with caplog.at_level(logging.WARNING, logger="nemo_gym.global_config"):
        cfg = parse(workdir, "++token_id_capture.enabled=false", "++token_id_capture.sink=my.Sink")
    assert "token_id_capture: sink has no effect in Gym" in caplog.text
    assert "dir" not in cfg.token_id_capture


def test_token_id_capture_gets_an_absolute_directory_at_parse(workdir: Path, caplog) -> None:
    on = "++token_id_capture.enabled=true"
    with caplog.at_level(logging.WARNING, logger="nemo_gym.global_config"):
        defaulted = parse(workdir, on, "++token_id_capture.all_agents=true")
    assert defaulted.token_id_capture.dir == str(workdir.resolve() / "token_id_capture")
    assert defaulted.token_id_capture.all_agents is True
    assert f"training tokens are recorded under {workdir.resolve() / 'token_id_capture'}" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="nemo_gym.global_config"):
        given = [
            parse(workdir, on, "++results_dir=out").token_id_capture.dir,
            parse(workdir, on, "++model_call_capture_dir=calls").token_id_capture.dir,
            parse(
                workdir, on, "++model_call_capture_dir=calls", "++token_id_capture.dir=tokens"
            ).token_id_capture.dir,
        ]
    assert given == [
        str(workdir.resolve() / "out" / "token_id_capture"),
        str(workdir.resolve() / "calls"),
        str(workdir.resolve() / "tokens"),
    ]
    assert caplog.text.count("training tokens are recorded under") == 1  # the results_dir default only


class _PairedSettings(BaseModel):
    first: int | None = None
    second: int | None = None

    @model_validator(mode="after")
    def _both_or_neither(self) -> _PairedSettings:
        if (self.first is None) != (self.second is None):
            raise ValueError("first and second go together: set both or neither")
        return self


def test_a_problem_between_keys_is_its_own_message_not_a_key_to_set():
    with pytest.raises(ConfigError) as raised:
        command_settings(_PairedSettings, OmegaConf.create({"first": 1}))
    assert str(raised.value) == "_PairedSettings: first and second go together: set both or neither"
    with pytest.raises(ConfigError) as raised:
        command_settings(_PairedSettings, OmegaConf.create({"first": "one", "second": 2}))
    assert str(raised.value).startswith("Top-level key 'first': Input should be a valid integer")
