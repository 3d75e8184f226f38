"""Secrets in a deployment's config are masked wherever the config is shown (`gym resolve`, the head
server's config route, `gym run -v` settings logs) while the servers still get the real values."""

from __future__ import annotations

import base64
import json
import subprocess
import urllib.request
from pathlib import Path

import requests
import yaml

from tests.helpers import gym_command, running_deployment
from tests.upstream_script import ScriptedUpstream, fresh_model

URL_PASSWORD = "url-pass-4f9d2c"
HEADER_SECRET = "hdr-secret-7b1e5a"
DB_PASSWORD = "db-secret-93c0d8"
API_KEY = "sk-key-61a0f3"
SECRETS = (URL_PASSWORD, HEADER_SECRET, DB_PASSWORD, API_KEY)


def write_deployment(folder: Path, upstream: ScriptedUpstream, model: str) -> None:
    """env.yaml with a password in the model URL, an API key and a `db_passwd`; a config sending
    `X-Upstream-Auth`. As with the OpenAI client, the URL's user and password win over the key."""
    (folder / "env.yaml").write_text(
        yaml.safe_dump(
            {
                "policy_base_url": f"http://gymuser:{URL_PASSWORD}@{upstream.host}:{upstream.port}/v1",
                "policy_api_key": API_KEY,
                "policy_model_name": model,
                "db_passwd": DB_PASSWORD,
            }
        )
    )
    headers = {"openai_default_headers": {"X-Upstream-Auth": HEADER_SECRET}}
    (folder / "secrets.yaml").write_text(
        yaml.safe_dump(
            {
                "config_paths": ["configs/demo_live.yaml"],
                "policy_model": {"responses_api_models": {"openai_model": headers}},
            }
        )
    )


def test_gym_resolve_masks_url_passwords_credential_headers_and_passwd_keys(tmp_path, scripted_upstream):
    write_deployment(tmp_path, scripted_upstream, fresh_model("masking"))
    result = subprocess.run(
        gym_command("resolve", "--config", "secrets.yaml"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert not [secret for secret in SECRETS if secret in result.stdout + result.stderr]
    resolved = yaml.safe_load(result.stdout)
    model = resolved["policy_model"]["responses_api_models"]["openai_model"]
    assert (
        model["openai_base_url"]
        == f"http://gymuser:****@{scripted_upstream.host}:{scripted_upstream.port}/v1"
    )
    assert model["openai_default_headers"] == {"X-Upstream-Auth": "****"}
    assert resolved["db_passwd"] == "****"


def test_a_deployment_never_shows_its_secrets_but_its_servers_use_them(tmp_path, scripted_upstream):
    model = fresh_model("masking")
    write_deployment(tmp_path, scripted_upstream, model)
    with running_deployment(["-v", "--config", "secrets.yaml"], cwd=tmp_path) as deployment:
        for instance in ("mcqa", "mcqa_simple_agent", "policy_model"):
            deployment.wait_for_output(f"DEBUG nemo_gym.server: {instance}: settings")
        with urllib.request.urlopen(f"{deployment.head_url}/global_config_dict_yaml", timeout=10) as answer:
            served = json.loads(answer.read())
        reply = requests.post(
            f"{deployment.url('policy_model')}/v1/responses", json={"input": "hi"}, timeout=30
        )
        assert reply.status_code == 200, reply.text
        output = "\n".join(deployment.output.lines)
    assert not [secret for secret in SECRETS if secret in served or secret in output]
    assert "X-Upstream-Auth: '****'" in served and "db_passwd: '****'" in served
    [received] = scripted_upstream.requests(model)
    assert received["headers"]["X-Upstream-Auth"] == HEADER_SECRET
    basic = base64.b64encode(f"gymuser:{URL_PASSWORD}".encode()).decode()
    assert received["headers"]["Authorization"] == f"Basic {basic}"
