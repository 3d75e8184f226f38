"""Every shipped benchmark folder is complete and consistent, and `nemo_gym.benchmarks` reads folders as
NeMo Gym 0.7 names them. The prepare-and-run check of each folder is its own tests/test_prepare.py."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import yaml

from nemo_gym.benchmarks import (
    BENCHMARKS_SUBDIR,
    MANIFEST_FILENAME,
    BenchmarkConfig,
    discover_benchmarks,
)
from nemo_gym.cli.selectors import selected_config
from nemo_gym.config.errors import ConfigError
from nemo_gym.global_config import locate_data_file
from nemo_gym.testing import message_item, read_jsonl, response_with, run_server
from tests.helpers import REPO_ROOT, one_line_error

BENCHMARKS_DIR = REPO_ROOT / BENCHMARKS_SUBDIR
# A folder's config, or the configs of its versions one level down when it has none (livecodebench/v5_...).
SHIPPED = sorted(
    path.parent
    for path in [*BENCHMARKS_DIR.glob("*/config.yaml"), *BENCHMARKS_DIR.glob("*/*/config.yaml")]
    if path.parent.parent == BENCHMARKS_DIR or not (path.parent.parent / "config.yaml").is_file()
)


def benchmark_name(folder: Path) -> str:
    return folder.relative_to(BENCHMARKS_DIR).as_posix()


def test_discovery_finds_every_shipped_folder_once() -> None:
    found = discover_benchmarks([REPO_ROOT, REPO_ROOT])
    assert [benchmark.name for benchmark in found] == sorted(benchmark_name(folder) for folder in SHIPPED)
    assert len(SHIPPED) >= 10


@pytest.mark.parametrize("folder", SHIPPED, ids=benchmark_name)
def test_folder_is_complete(folder: Path) -> None:
    name = benchmark_name(folder)
    benchmark = BenchmarkConfig.from_config_path(folder / "config.yaml", name)
    config = yaml.safe_load((folder / "config.yaml").read_text())
    assert benchmark.manifest is not None and benchmark.dataset.license
    assert config["config_paths"] == [
        f"resources_servers/{benchmark.manifest.environment}/configs/{benchmark.manifest.environment}.yaml"
    ]
    # 0.7 names a benchmark's instances after its dataset, and the dataset after the folder (a version's
    # dataset after its benchmark and version: livecodebench/v5_2408_2502 has livecodebench_v5). A dataset
    # named after its split too (human_eval_infilling_random_span) leaves the instances the folder's name.
    split_variant = benchmark.dataset.name.startswith(f"{name}_")
    instance_prefix = name if split_variant else benchmark.dataset.name
    assert benchmark.agent_name.replace("-", "_").startswith(instance_prefix.replace("-", "_"))
    assert (
        benchmark.dataset.name == name
        or split_variant
        or benchmark.dataset.name.startswith(f"{folder.parent.name}_")
    )
    assert str(benchmark.dataset.jsonl_fpath).startswith(f"{BENCHMARKS_SUBDIR}/{name}/data/")
    assert benchmark.dataset.prepare_script == Path(BENCHMARKS_SUBDIR, name, "prepare.py")
    if benchmark.dataset.prompt_config is not None:  # else the rows carry their input, as ifeval's do
        locate_data_file(str(benchmark.dataset.prompt_config), "prompt_config")
    prepare = ast.parse((folder / "prepare.py").read_text())
    (function,) = [
        node for node in prepare.body if isinstance(node, ast.FunctionDef) and node.name == "prepare"
    ]
    assert [argument.arg for argument in function.args.args] == ["output_fpath"]
    assert (folder / "tests" / "test_prepare.py").is_file() and (folder / "README.md").is_file()
    flavors = {path.stem for path in folder.glob("config_*.yaml")}
    assert set(benchmark.manifest.flavors) <= flavors, "the manifest's `flavors` name configs it lacks"
    readme_row = f"| {name} | {benchmark.manifest.environment} |"
    assert readme_row in (REPO_ROOT / "README.md").read_text(), "the README's benchmark table lacks it"


# 0.7's flavors: `config_<flavor>.yaml` beside a folder's config.yaml, with `prepare_<flavor>.py`.
FLAVORS = sorted(BENCHMARKS_DIR.glob("*/config_*.yaml"))


@pytest.mark.parametrize("config_path", FLAVORS, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_flavor_is_complete(config_path: Path) -> None:
    folder, flavor = config_path.parent.name, config_path.stem.removeprefix("config_")
    benchmark = BenchmarkConfig.from_config_path(config_path, f"{folder}/{config_path.stem}")
    assert selected_config(BENCHMARKS_SUBDIR, f"{folder}/{config_path.stem}", [REPO_ROOT]) == config_path
    assert benchmark.manifest is not None and benchmark.dataset.license
    assert benchmark.dataset.name == f"{folder}_{flavor}"
    default = BenchmarkConfig.from_config_path(config_path.parent / "config.yaml", folder)
    assert str(benchmark.dataset.jsonl_fpath).startswith(f"{BENCHMARKS_SUBDIR}/{folder}/data/")
    assert benchmark.dataset.jsonl_fpath != default.dataset.jsonl_fpath
    assert benchmark.dataset.prepare_script == Path(BENCHMARKS_SUBDIR, folder, f"prepare_{flavor}.py")
    assert flavor in (config_path.parent / "tests" / "test_prepare.py").read_text(), "no test prepares it"
    assert f"{folder}/{config_path.stem}" in (config_path.parent / "README.md").read_text()


def test_a_version_folder_is_named_and_selected_by_its_path(tmp_path: Path) -> None:
    entry = (
        "{name: bench_v1, type: benchmark, jsonl_fpath: x.jsonl, prepare_script: p.py, prompt_config: null}"
    )
    agent = f"bench_v1_simple_agent:\n  responses_api_agents:\n    simple_agent:\n      datasets:\n        - {entry}\n"
    for version in ("v1", "v2"):
        (tmp_path / BENCHMARKS_SUBDIR / "bench" / version).mkdir(parents=True)
        (tmp_path / BENCHMARKS_SUBDIR / "bench" / version / "config.yaml").write_text(agent)
    (tmp_path / BENCHMARKS_SUBDIR / "bench" / "v1" / "notes").mkdir()  # no config: not a benchmark
    assert [benchmark.name for benchmark in discover_benchmarks([tmp_path])] == ["bench/v1", "bench/v2"]
    chosen = selected_config(BENCHMARKS_SUBDIR, "bench/v2", [tmp_path])
    assert chosen == tmp_path / BENCHMARKS_SUBDIR / "bench" / "v2" / "config.yaml"
    with pytest.raises(ConfigError, match="benchmarks/bench has versions, name one: bench/v1, bench/v2"):
        selected_config(BENCHMARKS_SUBDIR, "bench", [tmp_path])
    # A folder with a config of its own keeps its subfolders out of the listing.
    (tmp_path / BENCHMARKS_SUBDIR / "bench" / "config.yaml").write_text(agent)
    assert [benchmark.name for benchmark in discover_benchmarks([tmp_path])] == ["bench"]


def test_a_config_without_exactly_one_benchmark_dataset_is_refused(tmp_path: Path) -> None:
    entry = "{name: x, type: benchmark, jsonl_fpath: x.jsonl, prepare_script: p.py, prompt_config: null}"
    agent = f"  responses_api_agents:\n    simple_agent:\n      datasets:\n        - {entry}\n"
    (tmp_path / "config.yaml").write_text(f"a:\n{agent}b:\n{agent}")
    with pytest.raises(ConfigError, match="exactly one agent dataset with `type: benchmark`, found 2"):
        BenchmarkConfig.from_config_path(tmp_path / "config.yaml")
    (tmp_path / "config.yaml").write_text(f"a:\n{agent}")
    (tmp_path / MANIFEST_FILENAME).write_text(
        "environment: mcqa\nmeasures: m\nsource: s\nsplit: t\nrows: 0\n"
    )
    with pytest.raises(ConfigError, match=r"manifest.yaml: rows: Input should be greater than or equal to 1"):
        BenchmarkConfig.from_config_path(tmp_path / "config.yaml")


def test_eval_run_prepares_a_benchmark_that_is_not_prepared_yet(tmp_path: Path) -> None:
    folder = tmp_path / "elsewhere" / BENCHMARKS_SUBDIR / "tiny"
    folder.mkdir(parents=True)
    (folder / "prepare.py").write_text(
        "from nemo_gym.benchmarks import multiple_choice_row, write_prepared_rows\n\n\n"
        "def prepare(output_fpath):\n"
        "    row = multiple_choice_row('Pick y.', ['x', 'y'], 1, responses_create_params={'input': 'Pick y.'})\n"
        "    return write_prepared_rows(output_fpath, [row])\n"
    )
    (folder / "config.yaml").write_text(
        "config_paths:\n  - resources_servers/mcqa/configs/mcqa.yaml\n"
        "tiny_mcqa_simple_agent:\n  _inherit_from: mcqa_simple_agent\n"
        "  responses_api_agents:\n    simple_agent:\n      datasets:\n"
        "        - {name: tiny, type: benchmark, jsonl_fpath: benchmarks/tiny/data/tiny.jsonl, prompt_config: null,\n"
        f"           prepare_script: {folder / 'prepare.py'}, num_repeats: 2, license: CC0}}\n"
    )
    recording = {
        "responses_create_params": {"input": "Pick y."},
        "response": response_with(message_item("\\boxed{B}")),
    }
    (tmp_path / "recorded.jsonl").write_bytes(orjson.dumps(recording) + b"\n")
    run = subprocess.run(
        [str(Path(sys.executable).parent / "gym"), "eval", "run", "--benchmark", "tiny", "--search-dir", "elsewhere",
         "--model-type", "replay_model", "--replay", str(tmp_path / "recorded.jsonl"), "-o", "results/r.jsonl"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Prepared benchmark 'tiny'" in run.stdout
    assert read_jsonl(tmp_path / "benchmarks/tiny/data/tiny.jsonl")[0]["expected_answer"] == "B"
    assert [result["reward"] for result in read_jsonl(tmp_path / "results/r.jsonl")] == [1.0, 1.0]


def test_a_data_set_the_hub_does_not_have_is_one_line_naming_it(tmp_path: Path) -> None:
    with run_server(["-m", "tests.fake_hf_hub", "--token", "hf_secret_never_printed"], tmp_path) as hub:
        env = {
            **os.environ,
            "HF_ENDPOINT": hub.url,
            "HF_HOME": str(tmp_path / "hf"),
            "HF_TOKEN": "hf_secret_never_printed",
        }
        run = subprocess.run(
            [str(Path(sys.executable).parent / "gym"), "eval", "prepare", "--benchmark", "gpqa"],
            cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env,
        )  # fmt: skip
    line = one_line_error(run)
    assert (
        "could not fetch Idavidrein/gpqa (split train) from the Hugging Face Hub" in line
        and "HF_TOKEN" in line
    )
    assert "hf_secret_never_printed" not in run.stdout + run.stderr
    assert not (tmp_path / "benchmarks").exists()
