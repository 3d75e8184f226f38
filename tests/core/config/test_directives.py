"""Structural directives (`_inherit_from`, `_copy`, `${copy:...}`, `_delete_key`) and the report of
every value left unset (`???`), through the config pipeline."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from nemo_gym.config.discovery import find_server_instances
from nemo_gym.config.errors import ConfigError, ConfigMissingValuesError, InheritPathNotFoundError
from tests.config_pipeline import agent, inner, parse, resources, write


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
