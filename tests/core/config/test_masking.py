"""Secrets are masked wherever a config is shown: values under secret-looking keys, passwords in URLs,
credential headers, and secrets that reached a plain key through interpolation."""

from __future__ import annotations

from pathlib import Path

import yaml
from omegaconf import OmegaConf

from nemo_gym.config.defaults import DEFAULT_HOST
from nemo_gym.config.masking import mask_secrets, to_resolved_yaml, to_yaml
from tests.config_pipeline import POLICY_MODEL, inner, parse, write


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
