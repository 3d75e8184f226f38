"""Deployment settings: the top-level settings of a merged config, read together, typed and checked once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from pydantic import ValidationError

from nemo_gym.config import defaults
from nemo_gym.config.deployment import DeploymentSettings, deployment_settings
from nemo_gym.config_types import ConfigError
from nemo_gym.global_config import http_client_settings, parse_global_config_dict
from nemo_gym.http import client as http_client


def test_an_empty_config_gets_the_defaults() -> None:
    settings = deployment_settings(OmegaConf.create({}))
    assert (settings.default_host, settings.head_server_host, settings.head_server_port) == (
        defaults.DEFAULT_HOST,
        defaults.DEFAULT_HOST,
        defaults.DEFAULT_HEAD_SERVER_PORT,
    )
    assert (settings.port_range_low, settings.port_range_high, settings.disallowed_ports) == (
        defaults.DEFAULT_PORT_RANGE_LOW,
        defaults.DEFAULT_PORT_RANGE_HIGH,
        (),
    )
    assert settings.http_client.global_http_deadline_s == defaults.DEFAULT_DEADLINE_S
    assert settings.knobs.error_on_almost_servers and not settings.knobs.verbose
    assert settings.knobs.global_max_request_body_mb == defaults.DEFAULT_MAX_REQUEST_BODY_MB


def test_values_are_read_with_interpolations_resolved() -> None:
    cfg = OmegaConf.create(
        {
            "base_port": 12000,
            "default_host": "127.0.0.2",
            "head_server": {"port": "${base_port}"},
            "port_range_low": 12001,
            "port_range_high": 12100,
            "disallowed_ports": ["${port_range_low}", 12002],
            "global_http_max_attempts": 5,
            "verbose": True,
            "global_request_read_timeout_s": 7.5,
        }
    )
    settings = deployment_settings(cfg)
    assert (settings.head_server_host, settings.head_server_port) == ("127.0.0.2", 12000)
    assert settings.disallowed_ports == (12001, 12002)
    assert settings.http_client.global_http_max_attempts == 5
    assert settings.knobs.verbose and settings.knobs.global_request_read_timeout_s == 7.5
    assert http_client_settings(cfg) == settings.http_client


def test_the_settings_are_frozen() -> None:
    settings = deployment_settings(OmegaConf.create({}))
    with pytest.raises(ValidationError):
        settings.port_range_low = 1  # type: ignore[misc]
    with pytest.raises(ValidationError):
        settings.http_client.global_http_max_attempts = 1  # type: ignore[misc]
    assert isinstance(settings, DeploymentSettings)


def test_equal_settings_are_validated_once_and_a_changed_value_is_read_again() -> None:
    cfg = OmegaConf.create({"port_range_low": 13001, "unrelated": 1})
    first = deployment_settings(cfg)
    assert deployment_settings(OmegaConf.create({"port_range_low": 13001, "unrelated": 2})) is first
    cfg.port_range_low = 13002
    assert deployment_settings(cfg).port_range_low == 13002


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"port_range_low": 0}, "port_range_low must be a port number between 1 and 65535, got 0"),
        ({"head_server": {"port": "x"}}, "head_server.port must be a port number between 1 and 65535"),
        ({"disallowed_ports": 80}, "disallowed_ports must be a list of ports, got 80"),
        ({"port_range_low": 3000, "port_range_high": 2000}, "port_range_low (3000) must not be above"),
        (
            {"global_http_deadline_s": -1},
            "Top-level key 'global_http_deadline_s': Input should be greater than 0 (got -1); "
            "set it with ++global_http_deadline_s=<value>",
        ),
        ({"global_max_request_body_mb": 0}, "set it with ++global_max_request_body_mb=<value>"),
        ({"default_host": "${nowhere}"}, "Cannot resolve top-level key 'default_host'"),
    ],
)
def test_a_bad_value_is_one_line_naming_its_key(setting: dict, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        deployment_settings(OmegaConf.create(setting))
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_parsing_checks_every_deployment_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="global_request_read_timeout_s"):
        parse_global_config_dict(["+global_request_read_timeout_s=-3"], cwd=tmp_path, install_root=tmp_path)


def test_the_http_client_keeps_its_default_numbers_under_their_old_names() -> None:
    assert http_client.DEFAULT_DEADLINE_S == defaults.DEFAULT_DEADLINE_S
    assert http_client.MAX_NUM_TRIES == defaults.DEFAULT_HTTP_MAX_ATTEMPTS
    assert http_client.RetryPolicy().connect_timeout_s == defaults.DEFAULT_CONNECT_TIMEOUT_S


def test_the_config_models_load_without_the_http_layer() -> None:
    probe = (
        "import sys, nemo_gym.config_types, nemo_gym.global_config\n"
        "print([m for m in sys.modules if m.split('.')[0] in ('aiohttp', 'fastapi', 'uvicorn', 'starlette')"
        " or m == 'nemo_gym.http.client'])"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_a_merged_config_reads_back_even_with_a_head_port_left_to_the_launcher(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(
        "rs:\n  resources_servers:\n    weather:\n      entrypoint: app.py\n      domain: agent\n"
    )
    cfg = parse_global_config_dict(
        ["+config_paths=[c.yaml]", "++head_server.port=0"], cwd=tmp_path, install_root=tmp_path
    )
    settings = deployment_settings(OmegaConf.create(OmegaConf.to_yaml(cfg)))
    assert settings.head_server_port == 0
    assert settings.disallowed_ports == (cfg.rs.resources_servers.weather.port,)
