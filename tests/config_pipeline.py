"""The whole config pipeline (`parse_global_config_dict`) on real YAML files in a scratch project: a current
directory `cwd/` beside a folder `root/` that plays the install root."""

from __future__ import annotations

from pathlib import Path

import yaml
from omegaconf import DictConfig

from nemo_gym.global_config import get_first_server_config_dict, parse_global_config_dict

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


def scratch_project(tmp_path: Path) -> Path:
    """The current directory of a parse; its sibling `root` plays the install root."""
    (tmp_path / "cwd").mkdir()
    (tmp_path / "root").mkdir()
    return tmp_path / "cwd"


def write(path: Path, content: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else yaml.safe_dump(content, sort_keys=False))
    return path


def parse(workdir: Path, *overrides: str, initial: dict | None = None) -> DictConfig:
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


def hydra_value(value: dict) -> str:
    """A mapping as a Hydra override value (flow YAML without spaces after separators)."""
    return (
        yaml.safe_dump(value, default_flow_style=True, width=10_000)
        .strip()
        .replace(", ", ",")
        .replace(": ", ":")
    )
