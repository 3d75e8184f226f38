"""Exporters on a real offline deployment (the demo: mcqa with the replay model): `gym eval run` and
`gym eval reverify` logging to MLflow in a local file store, read back with `MlflowClient`, and a backend
that cannot start (unreachable server, package missing) costing one warning line while the run, its files
and the other backend carry on."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from nemo_gym.global_config import find_open_port
from tests.helpers import REPO_ROOT, run_gym, running_deployment
from tests.wandb_run_reader import logged_values

pytest.importorskip("mlflow")

from mlflow import MlflowClient  # noqa: E402

# An offline evaluation with exporters is a whole deployment.
EVAL_TIMEOUT_S = 300

TOKEN = "mlflow-token-never-in-clear"
EXPERIMENT, RUN = "gym-tests", "eval-offline"
# The file store is in maintenance mode in MLflow 3 and opens only with this opt-in.
FILE_STORE_ENV = {"MLFLOW_ALLOW_FILE_STORE": "true"}


@pytest.fixture(scope="module")
def head(tmp_path_factory) -> Iterator[str]:
    """`++head_server.port=...` of a running demo deployment."""
    with running_deployment(
        ["+config_paths=[configs/demo.yaml]"], cwd=tmp_path_factory.mktemp("demo")
    ) as demo:
        yield "++head_server.port=" + demo.head_url.rsplit(":", 1)[1]


def eval_run(workdir: Path, head: str, *overrides: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    (workdir / "env.yaml").write_text("{}\n")
    return run_gym(
        "eval",
        "run",
        "--no-serve",
        "--dataset",
        "example",
        "-o",
        "out/rollouts.jsonl",
        head,
        *overrides,
        env=env,
        cwd=workdir,
        timeout=EVAL_TIMEOUT_S,
    )


def mlflow_keys(store: str, run: str) -> list[str]:
    return [f"+mlflow_tracking_uri={store}", f"+mlflow_experiment_name={EXPERIMENT}", f"+mlflow_run_name={run}",
            f"+mlflow_tracking_token={TOKEN}"]  # fmt: skip


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def expected_metrics(aggregates: list[dict]) -> dict[str, float]:
    """The numeric agent and key metrics of the aggregate file under `<agent>/...` and `key_metrics/<agent>/...`,
    without the names MLflow refuses (`pass@1/...`, `pass@1[avg-of-1]/...`)."""
    expected = {}
    for entry in aggregates:
        agent = entry["agent_ref"]["name"]
        for prefix, metrics in (
            (f"{agent}/", entry["agent_metrics"]),
            (f"key_metrics/{agent}/", entry["key_metrics"]),
        ):
            expected.update(
                {
                    prefix + name: float(value)
                    for name, value in metrics.items()
                    if isinstance(value, int | float) and not set("@[]") & set(name)
                }
            )
    return expected


def secret_leaks(folder: Path, result: subprocess.CompletedProcess) -> list[str]:
    files = [
        str(path) for path in folder.rglob("*") if path.is_file() and TOKEN.encode() in path.read_bytes()
    ]
    return files + (["output"] if TOKEN in result.stdout + result.stderr else [])


def test_eval_run_and_reverify_log_config_metrics_and_rollouts_to_a_local_mlflow_store(
    head, tmp_path, monkeypatch
):
    store = f"file://{tmp_path / 'mlruns'}"
    result = eval_run(tmp_path, head, *mlflow_keys(store, RUN), env=FILE_STORE_ENV)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "exporter" not in result.stderr, result.stderr

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient(tracking_uri=store)
    experiment = client.get_experiment_by_name(EXPERIMENT)
    [run] = client.search_runs([experiment.experiment_id], filter_string=f"attributes.run_name = '{RUN}'")
    assert run.info.status == "FINISHED"

    aggregates = json.loads((tmp_path / "out/rollouts_aggregate_metrics.json").read_text())
    expected = expected_metrics(aggregates)
    assert "key_metrics/mcqa_simple_agent/mean/reward" in expected
    assert run.data.metrics == pytest.approx(expected)

    assert run.data.params["mlflow_run_name"] == RUN and run.data.params["mlflow_tracking_token"] == "****"
    assert run.data.params["deployment.head_server.host"] == "127.0.0.1"
    config = json.loads(
        Path(client.download_artifacts(run.info.run_id, "global_config.json", str(tmp_path))).read_text()
    )
    assert config["mlflow_tracking_token"] == "****" and config["mlflow_experiment_name"] == EXPERIMENT
    assert "policy_model" in config["deployment"]

    table = json.loads(
        Path(client.download_artifacts(run.info.run_id, "rollouts.json", str(tmp_path))).read_text()
    )
    assert table["columns"] == ["task", "rollout", "agent", "reward", "final_text"]
    results = read_jsonl(tmp_path / "out/rollouts.jsonl")
    assert sorted(table["data"]) == sorted(
        [row["_ng_task_index"], row["_ng_rollout_index"], row["agent_ref"]["name"], row["reward"],
         row["response"]["output"][-1]["content"][0]["text"]]
        for row in results
    )  # fmt: skip
    assert secret_leaks(tmp_path, result) == []

    # gym eval reverify exports too; upload_rollouts=false (or its old name) leaves the table out.
    rescored = run_gym(
        *"eval reverify -i out/rollouts.jsonl -o out/rescored.jsonl".split(),
        head,
        *mlflow_keys(store, "reverify"),
        "+upload_rollouts_to_wandb=false",
        env=FILE_STORE_ENV,
        cwd=tmp_path,
        timeout=EVAL_TIMEOUT_S,
    )
    assert rescored.returncode == 0, rescored.stdout + rescored.stderr
    [again] = client.search_runs([experiment.experiment_id], filter_string="attributes.run_name = 'reverify'")
    rescored_aggregates = json.loads((tmp_path / "out/rescored_aggregate_metrics.json").read_text())
    assert again.data.metrics == pytest.approx(expected_metrics(rescored_aggregates))
    assert [artifact.path for artifact in client.list_artifacts(again.info.run_id)] == ["global_config.json"]
    assert secret_leaks(tmp_path, rescored) == []


def test_an_unreachable_mlflow_server_costs_one_warning_and_wandb_still_logs(head, tmp_path):
    unreachable = f"http://127.0.0.1:{find_open_port()}"
    result = eval_run(
        tmp_path, head, *mlflow_keys(unreachable, RUN), "+wandb_project=gym-tests",
        "+wandb_name=beside-mlflow", "+wandb_api_key=wandb-key-never-in-clear",
        env={"WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path)},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    [warning] = [line for line in result.stderr.splitlines() if "MLflow exporter" in line]
    assert "cannot start" in warning and unreachable in warning and "goes on without it" in warning
    assert "Traceback" not in result.stderr
    assert len(read_jsonl(tmp_path / "out/rollouts.jsonl")) == 5
    [run_dir] = (tmp_path / "wandb").glob("offline-run-*")
    assert logged_values(run_dir)["key_metrics/mcqa_simple_agent/mean/reward"] == pytest.approx(
        expected_metrics(json.loads((tmp_path / "out/rollouts_aggregate_metrics.json").read_text()))[
            "key_metrics/mcqa_simple_agent/mean/reward"
        ]
    )
    assert secret_leaks(tmp_path, result) == []


def test_mlflow_configured_without_the_package_is_one_warning_and_no_exporter():
    # `sys.modules[name] = None` is how Python marks a package as absent: importing it raises ImportError.
    probe = (
        "import sys\n"
        "sys.modules['mlflow'] = None\n"
        "from omegaconf import OmegaConf\n"
        "from nemo_gym.exporters import get_exporters, setup_exporters, teardown_exporters\n"
        "cfg = OmegaConf.create({'mlflow_tracking_uri': 'file:///nowhere', 'mlflow_experiment_name': 'e',\n"
        "                        'mlflow_run_name': 'r'})\n"
        "assert setup_exporters(cfg) == [] and get_exporters() == []\n"
        "teardown_exporters()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines() == [
        "MLflow exporter cannot start: mlflow_tracking_uri/mlflow_experiment_name/mlflow_run_name are set but "
        "the mlflow package is not installed; install it with `pip install 'nemo-gym[mlflow]'` or unset those "
        "keys; the run goes on without it"
    ]
