"""NeMo Gym 0.7's renames while a config is parsed: an agent moved by a top-level `_inherit_from` takes the
environment servers naming it along; renamed reasoning-gym agents and moved config files keep working."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from nemo_gym.config.renames import AmbiguousAgentRenameError
from nemo_gym.config_types import ConfigPathNotFoundError
from nemo_gym.global_config import get_first_server_config_dict, parse_global_config_dict
from tests.config_pipeline import write

MODEL = {"responses_api_models": {"vllm_model": {"entrypoint": "app.py", "base_url": "x", "model": "m"}}}
RESOURCES = {"resources_servers": {"example_single_tool_call": {"entrypoint": "app.py", "domain": "agent"}}}


def _agent() -> dict:
    return {
        "responses_api_agents": {
            "simple_agent": {
                "entrypoint": "app.py",
                "resources_server": {"type": "resources_servers", "name": "weather"},
                "model_server": {"type": "responses_api_models", "name": "policy_model"},
            }
        }
    }


def _episode_server(agent_name: str) -> dict:
    return {
        "environment_servers": {
            "single_agent_turn": {
                "entrypoint": "app.py",
                "agent_server": {"type": "responses_api_agents", "name": agent_name},
                "resources_server": {"type": "resources_servers", "name": "weather"},
            }
        }
    }


def _parse(workdir: Path, config: dict, *overrides: str):
    write(workdir / "c.yaml", {"policy_model": MODEL, "weather": RESOURCES, **config})
    listed = [token for token in overrides if token.startswith("+config_paths=")] or [
        "+config_paths=[c.yaml]"
    ]
    rest = [token for token in overrides if not token.startswith("+config_paths=")]
    return parse_global_config_dict([*listed, *rest], cwd=workdir, install_root=workdir.parent / "root")


def _episode_agent(cfg, server: str = "episode") -> str:
    return get_first_server_config_dict(cfg, server)["agent_server"]["name"]


def test_an_agent_moved_by_inherit_from_takes_its_environment_server_along(workdir: Path) -> None:
    cfg = _parse(
        workdir,
        {
            "base_agent": _agent(),
            "episode": _episode_server("base_agent"),
            "math_agent": {"_inherit_from": "base_agent"},
        },
    )
    assert "base_agent" not in cfg
    assert _episode_agent(cfg) == "math_agent"


def test_a_copied_agent_leaves_references_to_the_original(workdir: Path) -> None:
    cfg = _parse(
        workdir,
        {
            "base_agent": _agent(),
            "episode": _episode_server("base_agent"),
            "other_agent": {"_copy": "base_agent"},
        },
    )
    assert _episode_agent(cfg) == "base_agent"
    assert "other_agent" in cfg


def test_an_agent_moved_to_several_names_is_an_ambiguous_rename(workdir: Path) -> None:
    config = {
        "base_agent": _agent(),
        "episode": _episode_server("base_agent"),
        "copy_agent": {"_copy": "base_agent"},
        "moved_agent": {"_inherit_from": "base_agent"},
    }
    with pytest.raises(
        AmbiguousAgentRenameError, match="'episode' names agent 'base_agent'.*copy_agent.*moved_agent"
    ):
        _parse(workdir, config)


def test_an_old_reasoning_gym_agent_name_reaches_the_renamed_agent(
    workdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    new = "hermes_reasoning_gym_agent"
    with caplog.at_level(logging.WARNING):
        cfg = _parse(workdir, {new: _agent()}, "+agent_name=reasoning_gym_hermes_agent")
    assert cfg.agent_map["reasoning_gym_hermes_agent"] == new
    assert cfg.agent_name == new
    assert (
        "agent_name=reasoning_gym_hermes_agent is a renamed agent; using hermes_reasoning_gym_agent"
        in caplog.text
    )


def test_an_agent_still_named_the_old_way_is_left_alone(workdir: Path) -> None:
    cfg = _parse(workdir, {"reasoning_gym_hermes_agent": _agent()})
    assert "agent_map" not in cfg


def test_a_moved_config_file_loads_from_its_new_path_with_a_warning(
    workdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(workdir.parent / "root/responses_api_agents/tau2/configs/tau2.yaml", {"from_new_path": True})
    with caplog.at_level(logging.WARNING):
        cfg = _parse(workdir, {}, "+config_paths=[c.yaml,responses_api_agents/tau2/configs/tau2_agent.yaml]")
    assert cfg.from_new_path is True
    assert "tau2_agent.yaml was renamed to responses_api_agents/tau2/configs/tau2.yaml" in caplog.text


def test_a_moved_config_file_found_under_neither_name_says_both(workdir: Path) -> None:
    with pytest.raises(
        ConfigPathNotFoundError, match="tau2_agent.yaml' was renamed to 'responses_api_agents/tau2"
    ):
        _parse(workdir, {}, "+config_paths=[c.yaml,responses_api_agents/tau2/configs/tau2_agent.yaml]")


def test_extra_roots_are_searched_for_config_paths_and_env_yaml_first(
    workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = tmp_path / "extra"
    write(extra / "configs/shared.yaml", {"origin": "extra"})
    write(workdir / "configs/shared.yaml", {"origin": "cwd"})
    write(extra / "env.yaml", {"policy_model_name": "from-extra"})
    monkeypatch.setenv("NEMO_GYM_EXTRA_ROOTS", str(extra))
    cfg = _parse(workdir, {}, "+config_paths=[c.yaml,configs/shared.yaml]")
    assert (cfg.origin, cfg.policy_model_name) == ("extra", "from-extra")
