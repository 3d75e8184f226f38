"""Reading config sources: YAML files, env.yaml and the `config_paths` work list (where each file is
looked for, the order files merge in, and the errors a bad file or path gives), through the config pipeline."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from nemo_gym.config.errors import ConfigError, ConfigPathNotFoundError, MalformedConfigPathsError
from nemo_gym.config.sources import install_root
from tests.config_pipeline import parse, write


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
