"""Servers, environments and benchmarks chosen by folder name (`--resources-server NAME/FLAVOR`), looked for
in the current directory, the install root and each search folder; and the listings of `gym list`."""

from __future__ import annotations

from pathlib import Path

import pytest

from nemo_gym.cli.selectors import Asset, discover, listed, matching, readme_description, selected_config
from nemo_gym.config.errors import ConfigError
from tests.helpers import REPO_ROOT


def folder(root: Path, kind: str, name: str, configs: list[str], readme: str | None = None) -> Path:
    """A folder `root/kind/name` holding these configs where its kind keeps them."""
    path = root / kind / name
    below = path / "configs" if kind.endswith("_servers") or kind.startswith("responses_api") else path
    below.mkdir(parents=True)
    for config in configs:
        (below / f"{config}.yaml").write_text("{}\n")
    if readme is not None:
        (path / "README.md").write_text(readme)
    return below


def test_a_name_means_its_own_config_and_a_flavor_names_another(tmp_path):
    configs = folder(tmp_path, "resources_servers", "zz_weather", ["zz_weather", "hot"])
    assert selected_config("resources_servers", "zz_weather", [tmp_path]) == configs / "zz_weather.yaml"
    assert selected_config("resources_servers", "zz_weather/hot", [tmp_path]) == configs / "hot.yaml"
    bench = folder(tmp_path, "benchmarks", "zz_bench", ["config", "config_small"])
    assert selected_config("benchmarks", "zz_bench", [tmp_path]) == bench / "config.yaml"
    assert selected_config("benchmarks", "zz_bench/config_small", [tmp_path]) == bench / "config_small.yaml"


def test_one_file_reached_through_two_roots_counts_once_and_two_files_are_ambiguous(tmp_path):
    shipped = REPO_ROOT / "resources_servers" / "mcqa" / "configs" / "mcqa.yaml"
    assert selected_config("resources_servers", "mcqa", [REPO_ROOT]) == shipped
    for root in ("one", "two"):
        folder(tmp_path / root, "resources_servers", "zz_twice", ["zz_twice"])
    with pytest.raises(ConfigError) as raised:
        selected_config("resources_servers", "zz_twice", [tmp_path / "one", tmp_path / "two"])
    assert str(raised.value) == (
        f"'zz_twice' is ambiguous: {tmp_path}/one/resources_servers/zz_twice/configs/zz_twice.yaml and "
        f"{tmp_path}/two/resources_servers/zz_twice/configs/zz_twice.yaml; remove a --search-dir"
    )


def test_an_unknown_flavor_lists_the_configs_there_are(tmp_path):
    folder(tmp_path, "resources_servers", "zz_weather", ["zz_weather", "hot", "cold"])
    with pytest.raises(
        ConfigError,
        match="resources_servers/zz_weather has no config 'warm'; its configs: cold, hot, zz_weather",
    ):
        selected_config("resources_servers", "zz_weather/warm", [tmp_path])


def test_a_misspelled_name_suggests_the_close_one(tmp_path):
    folder(tmp_path, "resources_servers", "zz_weather_station", ["zz_weather_station"])
    with pytest.raises(ConfigError) as raised:
        selected_config("resources_servers", "zz_wether_station", [tmp_path])
    message = str(raised.value)
    assert message.startswith("no resources_servers/zz_wether_station in ") and str(tmp_path) in message
    assert message.endswith("did you mean zz_weather_station?")


def test_discovery_keeps_folders_with_a_config_the_first_root_winning(tmp_path):
    folder(tmp_path / "first", "responses_api_agents", "zz_agent", ["zz_agent"], readme="# Title\n\nFirst.\n")
    folder(tmp_path / "second", "responses_api_agents", "zz_agent", ["zz_agent", "other"], readme="Second.\n")
    folder(tmp_path / "second", "responses_api_agents", "zz_empty", [])
    found = {
        asset.name: asset
        for asset in discover("responses_api_agents", [tmp_path / "first", tmp_path / "second"])
        if asset.name.startswith("zz_")
    }
    assert list(found) == ["zz_agent"]
    assert (found["zz_agent"].configs, found["zz_agent"].description) == (["zz_agent"], "First.")
    assert found["zz_agent"].path == str(tmp_path / "first" / "responses_api_agents" / "zz_agent")


def test_environments_are_resources_servers_and_environment_folders(tmp_path):
    folder(tmp_path, "resources_servers", "zz_server", ["zz_server"])
    folder(tmp_path, "environments", "zz_environment", ["config"])
    names = [asset.name for asset in listed("environments", [tmp_path]) if asset.name.startswith("zz_")]
    assert names == ["zz_server", "zz_environment"]


def test_a_search_matches_name_or_description_in_any_case_else_close_names():
    assets = [
        Asset("chess", "resources_servers", "/chess", ["chess"], "Plays a game of CHESS."),
        Asset("maths", "resources_servers", "/maths", ["maths"], "Checks arithmetic."),
    ]
    assert [asset.name for asset in matching(assets, "Chess")] == ["chess"]
    assert [asset.name for asset in matching(assets, "ARITH")] == ["maths"]
    assert [asset.name for asset in matching(assets, "mahts")] == ["maths"]
    assert matching(assets, "nothing like it") == []


def test_the_description_is_the_first_line_of_prose():
    """Not a heading, badge, link, table or HTML line, nor a line of a code block."""
    readme = "# Title\n![badge](b.svg)\n[link](x)\n```\ncode\n```\n| a | b |\n<img src=x>\n\n  The prose.  \nMore.\n"
    assert readme_description(readme) == "The prose."
    assert readme_description("# Only a heading\n") == ""
