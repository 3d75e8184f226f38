"""Command-line flags as the friendly spelling of `++key=value` overrides: what each kind of flag becomes,
how config files chosen by flags join the user's `config_paths`, and the one-line usage errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from nemo_gym.cli.flags import (
    CONFIG,
    Command,
    UsageError,
    help_requested,
    override_value,
    repeated,
    switch,
    value,
    with_config_paths,
)
from nemo_gym.config.errors import ConfigError
from nemo_gym.config.overrides import parse_overrides
from tests.helpers import run_gym


def command(*flags, positional=None) -> Command:
    return Command(
        "try", "a command to parse with", run=lambda invocation: 0, flags=flags, positional=positional
    )


@pytest.fixture
def empty_env(tmp_path: Path) -> Path:
    """A working folder whose env.yaml is empty, so a developer's own env.yaml never leaks in."""
    (tmp_path / "env.yaml").write_text("{}\n")
    return tmp_path


def test_each_kind_of_flag_becomes_its_override_before_the_users_own():
    parsed = command(
        value("--name", key="model_name", help="h"),
        switch("--fast", key=("a.fast", "b.fast"), help="h"),
        repeated("--tag", key="tags", help="h"),
        value("--storage", help="an option of the command itself"),
    ).parse(
        ["--name", "my model", "--fast", "--tag", "x", "--tag", "y z", "--storage", "s3", "++model_name=w"]
    )
    assert parsed.overrides == [
        "++model_name='my model'",
        "++a.fast=true",
        "++b.fast=true",
        "++tags=[x,'y z']",
        "++model_name=w",
    ]
    assert parsed.options["storage"] == "s3"
    assert parse_overrides(parsed.overrides).model_name == "w"  # the user's own override wins


def test_values_are_read_back_as_given():
    """Hydra reads a backslash as an escape only before a quote: a path or pattern keeps its backslashes."""
    texts = ["plain", "my model", "it's", "a\\b", "C:\\data\\x", "ends in \\", "\\'", ""]
    tokens = [f"+v{index}={override_value(text)}" for index, text in enumerate(texts)]
    assert tokens[0] == "+v0=plain"
    assert list(parse_overrides(tokens).values()) == texts
    version = command(value("--version-of", key="version", help="h", text=True)).parse(
        ["--version-of", "1.10"]
    )
    assert parse_overrides(version.overrides).version == "1.10"


def test_config_files_from_flags_follow_the_users_config_paths_once_each():
    parsed = command(CONFIG).parse(
        ["+config_paths=[a.yaml,b.yaml]", "--config", "c.yaml", "--config", "a.yaml"]
    )
    assert parsed.overrides == ["+config_paths=[a.yaml,b.yaml,c.yaml]"]
    assert with_config_paths(["++x=1"], [], before=["++y=2"]) == ["++y=2", "++x=1"]


def test_config_paths_that_are_not_a_list_of_paths_are_a_config_error():
    with pytest.raises(
        ConfigError, match=r"config_paths must be a list of file paths.*got \+config_paths=a.yaml"
    ):
        command(CONFIG).parse(["+config_paths=a.yaml", "--config", "c.yaml"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nme", "x"], "gym try: unknown option --nme; did you mean --name?"),
        (["--zzzzz"], "gym try: unknown option --zzzzz; see gym try -h"),
        (["policy_api_key=sk-secret-1"], "gym try: 'policy_api_key=****' is not an override"),
        (["model_name=m"], "write +model_name=m (add) or ++model_name=m (add or replace)"),
        (
            ["setup.yaml"],
            "unexpected argument 'setup.yaml'; to load it as a config write --config setup.yaml",
        ),
    ],
)
def test_command_line_mistakes_are_usage_errors_with_a_hint(args, message):
    with pytest.raises(UsageError) as raised:
        command(value("--name", key="model_name", help="h")).parse(args)
    assert message in str(raised.value) and "sk-secret-1" not in str(raised.value)


def test_a_positional_that_is_an_override_is_read_as_one():
    parsed = command(positional=("name", "what to act on")).parse(["+x=1"])
    assert parsed.overrides == ["+x=1"] and "name" not in parsed.options
    assert command(positional=("name", "what to act on")).parse(["thing"]).options["name"] == "thing"


def test_help_is_asked_in_every_spelling():
    for spelling in ("-h", "--help", "+h=true", "++help=True"):
        assert help_requested(["++x=1", spelling]), spelling
    assert not help_requested(["+h=false", "+help_text=true"])


def test_config_flag_and_selectors_merge_into_one_config_paths(empty_env):
    (empty_env / "extra.yaml").write_text("extra_setting: 7\n")
    result = run_gym(
        "env", "resolve",
        "--config", "extra.yaml",
        "--resources-server", "mcqa",
        "--model-type", "openai_model",
        "--model", "my-model",
        "--model-url", "http://127.0.0.1:9/v1",
        "--model-api-key", "sk-never-shown-123",
        "+config_paths=[configs/policy_model.yaml]",
        "-v",
        cwd=empty_env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "sk-never-shown-123" not in result.stdout + result.stderr
    resolved = yaml.safe_load(result.stdout)
    assert [Path(path).name for path in resolved["config_paths"]] == [
        "policy_model.yaml", "extra.yaml", "mcqa.yaml", "openai_model.yaml",
    ]  # fmt: skip
    model = resolved["policy_model"]["responses_api_models"]["openai_model"]
    assert model["openai_model"] == "my-model"
    assert model["openai_base_url"] == "http://127.0.0.1:9/v1"
    assert model["openai_api_key"] == "****"
    assert resolved["mcqa"]["resources_servers"]["mcqa"]["domain"] == "knowledge"
    assert resolved["extra_setting"] == 7 and resolved["verbose"] is True
