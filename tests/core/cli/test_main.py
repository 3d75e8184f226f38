"""The NeMo Gym 0.4 command surface: every command of the tree with a full -h, flags that become
overrides, selectors, model flags, did-you-mean on unknown names, listings, version, legacy scripts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from nemo_gym.cli.main import TREE, Command
from tests.helpers import REPO_ROOT, one_line_error, process_alive, run_gym, running_deployment


def leaves(node: dict = TREE, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Command]]:
    found = []
    for name, child in node.items():
        found += leaves(child, (*path, name)) if isinstance(child, dict) else [((*path, name), child)]
    return found


@pytest.fixture
def empty_env(tmp_path: Path) -> Path:
    """A working folder whose env.yaml is empty, so a developer's own env.yaml never leaks in."""
    (tmp_path / "env.yaml").write_text("{}\n")
    return tmp_path


NEMO_GYM_04_COMMANDS = [
    "env start", "env status", "env resolve", "env validate", "env init", "env test",
    "eval run", "eval prepare", "eval aggregate", "eval profile",
    "list benchmarks", "list environments", "list agents",
    "dataset collate", "dataset upload", "dataset download", "dataset rm",
]  # fmt: skip
# The commands NeMo Gym 0.7 added that Gym has (README "The gym command").
NEMO_GYM_07_COMMANDS = [
    "list models", "list resources-servers", "search", "dataset migrate", "dataset render",
    "env schema", "env packages", "env prefetch", "env publish", "eval reverify", "eval export",
    "eval health-check", "dev test",
]  # fmt: skip


@pytest.mark.parametrize("command", NEMO_GYM_04_COMMANDS + NEMO_GYM_07_COMMANDS)
def test_every_nemo_gym_command_exists_with_a_full_help(command, empty_env):
    result = run_gym(*command.split(), "-h", cwd=empty_env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: gym {command}")
    assert "options:" in result.stdout and "-h, --help" in result.stdout and "-v, --verbose" in result.stdout
    leaf = dict(leaves())[tuple(command.split())]
    for flag in leaf.flags:
        assert flag.names[-1] in result.stdout, flag.names


def test_short_forms_are_the_nemo_gym_commands_themselves():
    assert TREE["run"] is TREE["env"]["start"] and TREE["status"] is TREE["env"]["status"]
    assert TREE["resolve"] is TREE["env"]["resolve"] and TREE["validate"] is TREE["env"]["validate"]
    assert TREE["init"] is TREE["env"]["init"] and TREE["test"] is TREE["env"]["test"]


# Holds a deployment started by the test helper, prints the launcher's pid, then waits to be killed.
DEPLOYMENT_HOLDER = """
import sys
from pathlib import Path
from tests.helpers import running_deployment
with running_deployment(["--config", "configs/demo.yaml"], cwd=Path(sys.argv[1])) as deployment:
    print(deployment.process.pid, flush=True)
    sys.stdin.read()
"""
LAUNCHER_EXIT_WAIT_S = 120


def test_a_test_deployment_ends_with_the_test_process_that_started_it(empty_env):
    """A crashed test worker runs no teardown; its deployment must still not outlive it."""
    holder = subprocess.Popen(
        [sys.executable, "-c", DEPLOYMENT_HOLDER, str(empty_env)],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    launcher = int(holder.stdout.readline())
    assert process_alive(launcher)
    holder.kill()
    holder.wait(timeout=30)
    give_up = time.monotonic() + LAUNCHER_EXIT_WAIT_S
    while process_alive(launcher) and time.monotonic() < give_up:
        time.sleep(0.1)
    assert not process_alive(launcher), "the deployment outlived the process that started it"


def test_commands_with_settings_list_their_fields_in_help(empty_env):
    result = run_gym("eval", "run", "-h", cwd=empty_env)
    assert "input_jsonl_fpath" in result.stdout and "num_samples_in_parallel" in result.stdout
    gitlab = run_gym("dataset", "upload", "--storage", "gitlab", "-h", cwd=empty_env)
    assert "gitlab_url" in gitlab.stdout and "version" in gitlab.stdout


def test_legacy_plus_h_prints_the_same_help(empty_env):
    through_flag = run_gym("eval", "aggregate", "-h", cwd=empty_env)
    through_override = run_gym("+h=true", cwd=empty_env, command="ng_aggregate_rollouts")
    assert through_override.returncode == 0
    assert through_override.stdout == through_flag.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["env", "strat"], "gym env: unknown command 'strat'; did you mean 'start'?"),
        (["evl", "run"], "gym: unknown command 'evl'; did you mean 'eval'?"),
        (["list", "environment"], "did you mean 'environments'?"),
        (
            ["eval", "run", "--confg", "x.yaml"],
            "gym eval run: unknown option --confg; did you mean --config?",
        ),
        (["env", "start", "configs/demo.yaml"], "to load it as a config write --config configs/demo.yaml"),
        (["env", "resolve", "policy_model_name=x"], "write +policy_model_name=x (add)"),
        (["eval", "run", "policy_api_key=sk-typo-secret"], "write +policy_api_key=****"),
        (["eval", "run", "--split", "tain"], "argument --split: invalid choice: 'tain'"),
        (["eval", "run", "--no-serve", "--model-type", "openai_model"], "--model-type would have no effect"),
        (["eval", "run", "-i", "tasks.jsonl", "--dataset", "example"], "give one or the other"),
        (["env", "start", "--resources-server", "mqca"], "no resources_servers/mqca in"),
    ],
)
def test_command_line_mistakes_are_one_line_with_a_hint(args, expected, empty_env):
    result = run_gym(*args, cwd=empty_env)
    line = one_line_error(result)
    assert line.startswith("Error: ") and expected in line, line
    assert "sk-typo-secret" not in line
    if "mqca" in args:
        assert "did you mean mcqa?" in line
        assert result.returncode == 1
    else:
        assert result.returncode == 2


def test_resolve_resolves_interpolations_set_in_env_yaml(tmp_path):
    (tmp_path / "env.yaml").write_text(
        "policy_base_url: http://127.0.0.1:9/v1\npolicy_api_key: sk-env-yaml-secret\npolicy_model_name: from-env\n"
    )
    result = run_gym(
        "+config_paths=[configs/policy_model.yaml]",
        cwd=tmp_path,
        command="ng_dump_config",
    )
    assert result.returncode == 0, result.stderr
    assert "${" not in result.stdout and "sk-env-yaml-secret" not in result.stdout
    model = yaml.safe_load(result.stdout)["policy_model"]["responses_api_models"]["openai_model"]
    assert model["openai_model"] == "from-env" and model["openai_api_key"] == "****"


def test_version_plain_json_and_legacy(empty_env):
    plain = run_gym("--version", cwd=empty_env)
    assert plain.returncode == 0 and plain.stdout.startswith("gym ")
    as_json = json.loads(run_gym("--version", "--json", cwd=empty_env).stdout)
    assert {"gym", "python"} <= as_json.keys()
    assert plain.stdout.split()[1] == as_json["gym"]
    assert run_gym("--version", cwd=empty_env, command="ng_version").stdout == plain.stdout


def test_list_shows_environments_agents_models_and_benchmarks(tmp_path):
    environments = json.loads(run_gym("list", "environments", "--json", cwd=tmp_path).stdout)
    shipped = {path.parent.parent.name for path in REPO_ROOT.glob("resources_servers/*/configs/*.yaml")}
    assert {entry["name"] for entry in environments} == shipped
    mcqa = next(entry for entry in environments if entry["name"] == "mcqa")
    assert mcqa["configs"] == ["mcqa"] and mcqa["description"]
    agents = json.loads(run_gym("list", "agents", "--json", cwd=tmp_path).stdout)
    shipped_agents = sorted(path.parent.name for path in REPO_ROOT.glob("responses_api_agents/*/app.py"))
    assert [entry["name"] for entry in agents] == shipped_agents
    assert {"gymnasium_agent", "non_executing_simple_agent", "proof_refinement_agent", "simple_agent"} <= set(
        shipped_agents
    )
    assert "vllm_model" in run_gym("list", "models", cwd=tmp_path).stdout
    versions = [  # a folder without a config of its own holds versions, listed as <name>/<version>
        f"{path.parent.parent.name}/{path.parent.name}"
        for path in REPO_ROOT.glob("benchmarks/*/*/config.yaml")
        if not (path.parent.parent / "config.yaml").is_file()
    ]
    shipped_benchmarks = sorted(
        [path.parent.name for path in REPO_ROOT.glob("benchmarks/*/config.yaml")] + versions
    )
    # each flavor (0.7's config_<flavor>.yaml beside config.yaml) right after its folder, named as --benchmark
    # selects it
    with_flavors = [
        listed_name
        for name in shipped_benchmarks
        for listed_name in [
            name,
            *sorted(
                f"{name}/{path.stem}" for path in (REPO_ROOT / "benchmarks" / name).glob("config_*.yaml")
            ),
        ]
    ]
    listed = json.loads(run_gym("list", "benchmarks", "--json", cwd=tmp_path).stdout)
    assert [entry["name"] for entry in listed] == with_flavors and "aime25" in shipped_benchmarks
    assert {"mrcr/config_n3_128k", "hle/config_vision"} <= set(with_flavors)
    entries = {entry["name"]: entry for entry in listed}
    vision = entries["hle/config_vision"]
    assert (vision["flavor_of"], vision["dataset"]["name"], vision["dataset"]["license"]) == (
        "hle",
        "hle_vision",
        "MIT",
    )
    assert (vision["manifest"]["environment"], vision["manifest"]["rows"]) == ("equivalence_llm_judge", 2500)
    assert entries["mrcr/config_n3_128k"]["manifest"]["rows"] is None  # sized by a token budget when prepared
    # a folder's entry is as before: no flavor_of, and the manifest without the flavors' facts
    assert "flavor_of" not in entries["hle"] and set(entries["hle"]["manifest"]) == {
        "environment",
        "measures",
        "source",
        "split",
        "rows",
    }
    benchmark = tmp_path / "elsewhere" / "benchmarks" / "tiny_bench"
    benchmark.mkdir(parents=True)
    (benchmark / "config.yaml").write_text(
        "tiny_agent:\n  responses_api_agents:\n    simple_agent:\n      datasets:\n"
        "        - {name: tiny, type: benchmark, jsonl_fpath: t.jsonl, prepare_script: p.py, prompt_config: null,\n"
        "           num_repeats: 3, license: CC0}\n"
    )
    (benchmark / "manifest.yaml").write_text(
        "environment: mcqa\nmeasures: tiny things\nsource: me/tiny\nsplit: test\nrows: 7\n"
    )
    listed = run_gym("list", "benchmarks", "tiny_bench", "--search-dir", "elsewhere", cwd=tmp_path)
    assert listed.stdout.splitlines()[1].split() == ["tiny_bench", "mcqa", "7", "3", "CC0", "tiny", "things"]
    for flavor in ("big", "small"):
        (benchmark / f"config_{flavor}.yaml").write_text(
            f"tiny_{flavor}_agent:\n  responses_api_agents:\n    simple_agent:\n      datasets:\n"
            f"        - {{name: tiny_{flavor}, type: benchmark, jsonl_fpath: {flavor}.jsonl, prepare_script: p.py,\n"
            "           prompt_config: null, license: CC0}\n"
        )
    (benchmark / "manifest.yaml").write_text(
        "environment: mcqa\nmeasures: tiny things\nsource: me/tiny\nsplit: test\nrows: 7\n"
        "flavors:\n  config_small: {rows: 2, measures: fewer things}\n"
    )
    listed = run_gym("list", "benchmarks", "tiny_bench", "--search-dir", "elsewhere", cwd=tmp_path)
    assert [line.split() for line in listed.stdout.splitlines()[1:]] == [
        ["tiny_bench", "mcqa", "7", "3", "CC0", "tiny", "things"],
        ["tiny_bench/config_big", "mcqa", "?", "1", "CC0", "tiny", "things"],
        ["tiny_bench/config_small", "mcqa", "2", "1", "CC0", "fewer", "things"],
    ]
    one = run_gym("list", "benchmarks", "tiny_bench/config_small", "--search-dir", "elsewhere", cwd=tmp_path)
    assert [line.split()[0] for line in one.stdout.splitlines()[1:]] == ["tiny_bench/config_small"]
    (benchmark / "manifest.yaml").write_text("environment: mcqa\nrows: none\n")
    broken = run_gym("list", "benchmarks", "--search-dir", "elsewhere", cwd=tmp_path)
    assert "tiny_bench/manifest.yaml: measures: Field required" in one_line_error(broken)
    legacy = run_gym(cwd=tmp_path, command="ng_list_benchmarks")
    assert legacy.stdout == run_gym("list", "benchmarks", cwd=tmp_path).stdout


def test_validate_legacy_script_and_config_flag(empty_env):
    result = run_gym("--config", "configs/demo.yaml", cwd=empty_env, command="ng_validate")
    assert (result.returncode, result.stdout.strip()) == (0, "Config is valid: 3 server instance(s)."), (
        result.stderr
    )


def test_eval_prepare_runs_a_benchmark_prepare_script(tmp_path):
    bench = tmp_path / "benchmarks" / "tiny_bench"
    bench.mkdir(parents=True)
    (bench / "prepare.py").write_text(
        "import json\nfrom pathlib import Path\n\n\ndef prepare():\n"
        "    path = Path('benchmarks/tiny_bench/data/tiny.jsonl')\n"
        "    path.parent.mkdir(parents=True, exist_ok=True)\n"
        "    row = {'responses_create_params': {'input': 'Pick A.'}, 'expected_answer': 'A'}\n"
        "    path.write_text(json.dumps(row) + '\\n')\n"
        "    return str(path)\n"
    )
    (bench / "config.yaml").write_text(
        "tiny_bench_agent:\n  responses_api_agents:\n    simple_agent:\n      entrypoint: app.py\n"
        "      resources_server: {type: resources_servers, name: mcqa}\n"
        "      model_server: {type: responses_api_models, name: policy_model}\n"
        "      datasets:\n        - {name: tiny, type: benchmark, jsonl_fpath: benchmarks/tiny_bench/data/tiny.jsonl,\n"
        "           prepare_script: benchmarks/tiny_bench/prepare.py, prompt_config: null}\n"
    )
    args = ["--benchmark", "tiny_bench", "--resources-server", "mcqa", "--model-type", "replay_model"]
    result = run_gym("eval", "prepare", *args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads((bench / "data/tiny.jsonl").read_text())["expected_answer"] == "A"
    cached = run_gym(
        *args, "+use_cached_prepared_benchmarks=true", cwd=tmp_path, command="ng_prepare_benchmark"
    )
    assert cached.returncode == 0 and "already prepared" in cached.stdout


def test_verbose_turns_on_debug_logging_in_every_server(empty_env):
    with running_deployment(
        [
            "-v",
            "--config",
            "configs/demo_live.yaml",
            "+policy_base_url=http://127.0.0.1:9/v1",
            "+policy_api_key=sk-verbose-secret",
            "+policy_model_name=m",
        ],
        cwd=empty_env,
    ) as deployment:
        for instance in ("mcqa", "mcqa_simple_agent", "policy_model"):
            deployment.wait_for_output(f"DEBUG nemo_gym.server: {instance}: settings")
        assert not [line for line in deployment.output.lines if "sk-verbose-secret" in line]
