"""The config pipeline on real YAML files and real Hydra override parsing."""

from __future__ import annotations

import logging
import socket
import sys
from pathlib import Path

import pytest
from omegaconf import DictConfig, OmegaConf
from pydantic import BaseModel, model_validator

from nemo_gym.config.settings import command_settings
from nemo_gym.config_types import ConfigError
from nemo_gym.global_config import (
    DEFAULT_HEAD_SERVER_PORT,
    NEMO_GYM_CONFIG_DICT_ENV_VAR_NAME,
    NEMO_GYM_CONFIG_FILE_ENV_VAR_NAME,
    GlobalConfigDictParser,
    GlobalConfigDictParserConfig,
    find_open_port,
    get_global_config_dict,
    get_hf_token,
    maybe_get_global_config_dict,
    parse_overrides,
    reset_global_config_dict_cache,
    set_global_config_dict,
)
from tests.config_pipeline import inner, parse, resources, write

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
# Secrets in override errors


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
