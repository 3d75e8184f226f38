import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT

BIN = Path(sys.executable).parent
WEATHER_CONFIG = "resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml"


def run_command(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / name), *args], cwd=cwd, capture_output=True, text=True, timeout=60, env=os.environ
    )


@pytest.mark.parametrize(
    ("alias", "command"),
    [
        ("ng_run", "run"),
        ("ng_collect_rollouts", "collect"),
        ("ng_status", "status"),
        ("ng_dump_config", "resolve"),
    ],
)
def test_legacy_aliases_run_their_gym_command(alias, command, tmp_path):
    overrides = ["++head_server.port=1"]  # nothing listens there, so status fails the same way
    through_alias = run_command(alias, *overrides, cwd=tmp_path)
    through_gym = run_command("gym", command, *overrides, cwd=tmp_path)
    assert (through_alias.returncode, through_alias.stdout) == (through_gym.returncode, through_gym.stdout)
    notice, _, rest = through_alias.stderr.partition("\n")
    assert notice.startswith(f"{alias} is deprecated: it runs `gym ")
    assert rest == through_gym.stderr


def test_resolve_masks_secrets(tmp_path):
    (tmp_path / "cfg.yaml").write_text(
        "rs:\n  resources_servers:\n    example:\n      entrypoint: app.py\n      domain: agent\n"
        "policy_api_key: sk-live-123\nhf_token: hf_abc\n"
    )
    result = run_command("ng_dump_config", "+config_paths=[cfg.yaml]", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "sk-live-123" not in result.stdout and "hf_abc" not in result.stdout
    assert "policy_api_key: '****'" in result.stdout


def test_config_error_is_one_line_without_traceback(tmp_path):
    result = run_command("gym", "validate", "+config_paths=[missing.yaml]", cwd=tmp_path)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "missing.yaml" in lines[0]


def test_malformed_yaml_names_file_line_and_column(tmp_path):
    (tmp_path / "bad.yaml").write_text("a: 1\nb: [1, 2\nc: 3\n")
    result = run_command("gym", "validate", "+config_paths=[bad.yaml]", cwd=tmp_path)
    assert result.returncode == 1
    assert "bad.yaml" in result.stderr and "Traceback" not in result.stderr
    assert ":3:" in result.stderr or "line 3" in result.stderr


def test_command_help_is_shown_not_parsed_as_an_override(tmp_path):
    result = run_command("gym", "resolve", "-h", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.startswith("usage: gym env resolve") and "merged config" in result.stdout


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ("+config_paths=[configs/quickstart.yaml]", "Config is valid: 3 server instance(s)."),
        ("+config_paths=[configs/quickstart_live.yaml]", "Interpolation key 'policy_base_url' not found"),
        ("+config_paths=[no_folder.yaml]", "implementation folder resources_servers/nowhere not found"),
        ("+config_paths=[no_entrypoint.yaml]", "entrypoint main.py not found"),
        ("+config_paths=[configs/quickstrat.yaml]", "not found; tried "),
        ("+config_paths=[configs/quickstrat.yaml]", "; did you mean 'configs/quickstart.yaml'?"),
        (
            "+config_paths=[configs/quickstart.yaml] "
            "++example_single_tool_call.resources_servers.example_single_tool_call.max_sesions=5",
            "server instance 'example_single_tool_call': unknown key 'max_sesions' "
            "(SingleToolCallConfig does not read it); did you mean 'max_sessions'?",
        ),
        (  # a misspelled required key is named as the unknown one, not reported missing
            "+config_paths=[agent_typo.yaml]",
            "unknown key 'resources_sever' (SimpleAgentConfig does not read it); did you mean 'resources_server'?",
        ),
    ],
)
def test_validate_checks_what_run_would_trip_on_without_starting_anything(config, expected, tmp_path):
    (tmp_path / "env.yaml").write_text("{}\n")
    (tmp_path / "no_folder.yaml").write_text(
        "x:\n  resources_servers:\n    nowhere: {entrypoint: app.py, domain: other}\n"
    )
    (tmp_path / "no_entrypoint.yaml").write_text(
        "x:\n  resources_servers:\n    example_single_tool_call: {entrypoint: main.py, domain: other}\n"
    )
    (tmp_path / "agent_typo.yaml").write_text(
        "rs:\n  resources_servers:\n    example_single_tool_call: {entrypoint: app.py, domain: other}\n"
        "m:\n  responses_api_models:\n    openai_model: {entrypoint: app.py, openai_base_url: http://127.0.0.1:9/v1,"
        " openai_api_key: x, openai_model: m}\n"
        "a:\n  responses_api_agents:\n    simple_agent: {entrypoint: app.py,"
        " resources_sever: {type: resources_servers, name: rs}, model_server: {type: responses_api_models, name: m}}\n"
    )
    result = run_command("gym", "validate", *config.split(), cwd=tmp_path)
    output = result.stdout + result.stderr
    assert expected in output
    assert result.returncode == (0 if "valid" in expected else 1)
    assert len(output.strip().splitlines()) == 1 and "Traceback" not in output


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            "config_paths: [configs/quickstart.yaml]\n"
            "example_single_tool_call_simple_agent:\n"
            "  responses_api_agents: {simple_agent: {max_steps: -1}}\n",
            ("'example_single_tool_call_simple_agent'", "max_steps", "greater than or equal to 0"),
        ),
        (
            f"config_paths: [{WEATHER_CONFIG}]\n"
            "policy_model:\n  responses_api_models: {replay_model: {entrypoint: app.py}}\n",
            ("'policy_model'", "rollouts_jsonl_fpath", "Field required"),
        ),
        (
            f"config_paths: [{WEATHER_CONFIG}]\n"
            "policy_model:\n  responses_api_models:\n"
            "    replay_model: {entrypoint: app.py, rollouts_jsonl_fpath: no_such_rollouts.jsonl}\n",
            ("'policy_model'", "no_such_rollouts.jsonl"),
        ),
    ],
    ids=["agent field out of range", "model field missing", "model file missing"],
)
def test_validate_checks_each_instance_against_its_own_server(config, expected, tmp_path):
    (tmp_path / "env.yaml").write_text("{}\n")
    (tmp_path / "deployment.yaml").write_text(config)
    result = run_command("gym", "validate", "+config_paths=[deployment.yaml]", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    for part in expected:
        assert part in lines[0], lines[0]


def test_a_block_that_almost_is_a_server_is_reported_in_one_line(tmp_path):
    (tmp_path / "almost.yaml").write_text(
        "weather:\n  resources_servers:\n    example_single_tool_call:\n"
        "      entrypoint: app.py\n      domain: not-a-domain\n"
    )
    result = run_command("gym", "validate", "+config_paths=[almost.yaml]", cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "'weather'" in lines[0] and "domain" in lines[0] and "error_on_almost_servers" in lines[0]


HEAVY_PACKAGES = (
    "pydantic",
    "omegaconf",
    "hydra",
    "aiohttp",
    "fastapi",
    "starlette",
    "uvicorn",
    "yaml",
    "asyncio",
)


@pytest.mark.parametrize("args", [["--version"], ["-h"], ["list", "environments"], ["eval", "-h"]])
def test_quick_commands_import_none_of_the_heavy_libraries(args):
    """What keeps `gym --version`, `-h` and `list` instant: they load no config, HTTP or model code."""
    probe = (
        "import contextlib, io, sys\n"
        "from nemo_gym.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main({args!r})\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY_PACKAGES!r})))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=REPO_ROOT
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_list_cuts_a_long_description_at_a_word(tmp_path):
    table = run_command("gym", "list", "environments", cwd=tmp_path)
    listed = run_command("gym", "list", "environments", "--json", cwd=tmp_path)
    assert table.returncode == listed.returncode == 0, table.stderr + listed.stderr
    full = {asset["name"]: " ".join(asset["description"].split()) for asset in json.loads(listed.stdout)}
    shown = {
        line.split(None, 2)[0]: line.split(None, 2)[2]
        for line in table.stdout.splitlines()[1:]
        if len(line.split(None, 2)) == 3
    }
    cut = {name: text.removesuffix(" ...") for name, text in shown.items() if text.endswith(" ...")}
    assert cut and all(len(text) <= 80 for text in shown.values())
    assert all(full[name].startswith(text) and full[name][len(text)] == " " for name, text in cut.items())


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["list", "resources-servers", "mcqa"], ["mcqa"]),
        (["list", "environment-servers"], ["legacy_agent", "single_agent_turn", "single_agent_turn_legacy"]),
        (
            ["search", "agents", "simple"],
            ["gdp_pdf_agent", "non_executing_simple_agent", "simple_agent", "simple_agent_with_compaction"],
        ),
        (["search", "mcq"], ["bunsenbench_chemistry_mcq", "mcqa"]),
        (["list", "models", "switchyard_model"], ["switchyard_model"]),
        (["search", "models", "azure"], ["azure_openai_model"]),
    ],
)
def test_list_by_name_and_search(args, names, tmp_path):
    result = run_command("gym", *args, "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert [asset["name"] for asset in json.loads(result.stdout)] == names


def test_search_without_a_query_is_a_usage_error(tmp_path):
    result = run_command("gym", "search", cwd=tmp_path)
    assert result.returncode == 2 and "gym search [environments|" in result.stderr
