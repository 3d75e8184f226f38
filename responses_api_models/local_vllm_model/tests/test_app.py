"""local_vllm_model as it runs: a real server process that starts its vLLM as a child process.

The child is tests/vllm_upstream.py run as `vllm serve` is run (vllm_serve_command points at it), the
only stand-in: the server builds the command line, waits for the child to answer, serves through it, and
ends it when it stops.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest
from omegaconf import OmegaConf

from nemo_gym.server_utils import CHECK_CONFIG_ONLY_ENV_VAR_NAME
from responses_api_models.local_vllm_model.app import LocalVLLMModelConfig
from responses_api_models.local_vllm_model.vllm_process import serve_flags
from tests.helpers import REPO_ROOT, instance_config, process_alive, run_instance
from tests.vllm_script import VllmUpstream, fresh_model

FOLDER = Path(__file__).resolve().parents[1]
UPSTREAM_COMMAND = [sys.executable, str(REPO_ROOT / "tests" / "vllm_upstream.py")]
STARTED = re.compile(r"vLLM started \(pid (\d+)\), serving at http://127\.0\.0\.1:(\d+)/v1")
REQUEST_TIMEOUT_S = 60.0


def local_config(model: str, **settings: Any) -> dict[str, Any]:
    inner = {
        "model": model,
        "uses_reasoning_parser": False,
        "vllm_serve_command": UPSTREAM_COMMAND,
        "vllm_startup_deadline_s": 120,
        **settings,
    }
    return {"policy_model": instance_config("responses_api_models", "local_vllm_model", **inner)}


def run_app_once(
    tmp_path: Path, config: dict[str, Any], check_only: bool = False
) -> subprocess.CompletedProcess:
    """Run the server's app.py as the launcher would, for a config that must not end up serving."""
    config_file = tmp_path / "config.yaml"
    config_file.write_bytes(orjson.dumps(config))
    env = {
        **os.environ,
        "NEMO_GYM_CONFIG_FILE": str(config_file),
        "NEMO_GYM_CONFIG_PATH": "policy_model",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    }
    if check_only:
        env[CHECK_CONFIG_ONLY_ENV_VAR_NAME] = "1"
    return subprocess.run(
        [sys.executable, str(FOLDER / "app.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=FOLDER,
    )


def post(url: str, body: dict[str, Any]) -> tuple[int, Any]:
    request = urllib.request.Request(
        url, data=orjson.dumps(body), headers={"content-type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as answer:
            return answer.status, orjson.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, orjson.loads(error.read())


def test_the_server_starts_its_vllm_serves_through_it_and_ends_it(tmp_path: Path) -> None:
    model = fresh_model("local")
    settings = {
        "use_completions_api": True,
        "vllm_serve_kwargs": {"max_model_len": 4096, "trust_remote_code": True},
    }
    with run_instance(local_config(model, **settings), "policy_model", tmp_path) as server:
        started = STARTED.search(server.log())
        assert started, server.log()
        child_pid, child_port = int(started[1]), int(started[2])
        assert process_alive(child_pid)
        vllm = VllmUpstream("127.0.0.1", child_port)
        # The kwargs became `vllm serve` flags: the child applied --max-model-len 4096.
        assert vllm.configure(model)["max_model_len"] == 4096
        vllm.script(model, [{"text": "Paris."}])
        status, answer = post(
            f"{server.url}/v1/responses", {"input": "Capital of France?", "max_output_tokens": 8}
        )
        assert status == 200, answer
        assert answer["output"][-1]["content"][0]["text"] == "Paris."
        [call] = vllm.requests(model)
        assert (call["path"], call["body"]["prompt"], call["body"]["model"]) == (
            "/v1/completions",
            "Capital of France?",
            model,
        )
    # run_instance stopped the server (SIGTERM, waited for its exit): its vLLM went with it.
    assert not process_alive(child_pid)
    assert f"vLLM (pid {child_pid}) ended" in server.log()


def test_a_vllm_that_exits_before_it_is_ready_is_a_one_line_error_with_its_output(tmp_path: Path) -> None:
    done = run_app_once(
        tmp_path, local_config(fresh_model("local"), vllm_serve_kwargs={"max_model_len": "many"})
    )
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, done.stderr
    assert "vLLM exited with code 2 before it was ready" in errors[0]
    assert "argument --max-model-len: invalid int value: 'many'" in errors[0]
    assert "Traceback" not in done.stderr


def test_a_missing_vllm_program_is_named_in_one_line(tmp_path: Path) -> None:
    done = run_app_once(tmp_path, local_config(fresh_model("local"), vllm_serve_command="/nonexistent/vllm"))
    assert done.returncode == 1
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .startswith("Error: server instance 'policy_model': vllm_serve_command")
    )


def test_check_only_mode_starts_no_vllm(tmp_path: Path) -> None:
    # A command that cannot run: reaching it would fail the check.
    config = local_config(fresh_model("local"), vllm_serve_command="/nonexistent/vllm")
    done = run_app_once(tmp_path, config, check_only=True)
    assert done.returncode == 0, done.stderr
    assert "vLLM started" not in done.stderr


def test_serve_kwargs_become_vllm_flags() -> None:
    kwargs = {
        "tensor_parallel_size": 2,
        "trust_remote_code": True,
        "enable_prefix_caching": False,
        "hf_overrides": {"rope_scaling": {"type": "yarn"}},
        "allowed_local_media_path": None,
        "gpu_memory_utilization": 0.85,
    }
    assert serve_flags(kwargs) == [
        "--tensor-parallel-size",
        "2",
        "--trust-remote-code",
        "--no-enable-prefix-caching",
        "--hf-overrides",
        '{"rope_scaling": {"type": "yarn"}}',
        "--gpu-memory-utilization",
        "0.85",
    ]


@pytest.mark.parametrize("key", ["port", "host", "model"])
def test_the_address_and_model_are_not_serve_kwargs(key: str) -> None:
    with pytest.raises(ValueError, match=f"{key}: set by local_vllm_model"):
        LocalVLLMModelConfig.model_validate(
            {"name": "p", "host": "127.0.0.1", "port": 0, "model": "m", "uses_reasoning_parser": False}
            | {"vllm_serve_kwargs": {key: "x"}}
        )


@pytest.mark.parametrize("file_name", ["local_vllm_model.yaml", "pretrain_text_completion.yaml"])
def test_shipped_configs_are_valid_server_configs(file_name: str) -> None:
    merged = OmegaConf.merge(
        OmegaConf.load(FOLDER / "configs" / file_name), {"policy_model_name": "org/base"}
    )
    inner = OmegaConf.to_container(merged, resolve=True)["policy_model"]["responses_api_models"][
        "local_vllm_model"
    ]
    config = LocalVLLMModelConfig.model_validate(
        {**inner, "name": "policy_model", "host": "127.0.0.1", "port": 0}
    )
    assert config.model == "org/base" and config.base_url == [] and config.vllm_serve_command == ["vllm"]
    assert config.vllm_serve_kwargs["tensor_parallel_size"] == 1
    assert config.use_completions_api is (file_name == "pretrain_text_completion.yaml")
    assert merged.readiness_deadline_s > config.vllm_startup_deadline_s


def test_a_vllm_that_dies_while_serving_stops_the_server(tmp_path: Path) -> None:
    with run_instance(local_config(fresh_model("local")), "policy_model", tmp_path) as server:
        started = STARTED.search(server.log())
        assert started, server.log()
        os.kill(int(started[1]), signal.SIGKILL)
        assert server.process.wait(timeout=REQUEST_TIMEOUT_S) is not None
        assert "exited with code -9 while serving; stopping this server" in server.log()


def test_an_evaluation_runs_through_the_vllm_the_deployment_started(tmp_path: Path) -> None:
    """`gym eval run` with the base-model profile: the launcher starts the server, the server its vLLM,
    every task is answered by it through /v1/completions, and the vLLM ends with the deployment."""
    command = ",".join(f'"{part}"' for part in UPSTREAM_COMMAND)
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "gym"),
            "eval", "run", "--resources-server", "mcqa", "--dataset", "example",
            "--model-type", "local_vllm_model/pretrain_text_completion", "--model", fresh_model("local"),
            f"++policy_model.responses_api_models.local_vllm_model.vllm_serve_command=[{command}]",
            "++limit=2", "-o", "results/rollouts.jsonl",
        ],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rollouts = [
        orjson.loads(line) for line in (tmp_path / "results" / "rollouts.jsonl").read_bytes().splitlines()
    ]
    # vllm_upstream's unscripted turn is "ok": each answer came from the child vLLM.
    assert [rollout["response"]["output"][-1]["content"][0]["text"] for rollout in rollouts] == ["ok", "ok"]
    started = STARTED.search(done.stdout + done.stderr)
    assert started and f"vLLM (pid {started[1]}) ended" in done.stdout + done.stderr
    assert not process_alive(int(started[1]))


def test_a_vllm_not_ready_by_the_deadline_is_ended_and_one_line(tmp_path: Path) -> None:
    # No Python process starts within a millisecond, let alone trains its tokenizer and answers.
    done = run_app_once(tmp_path, local_config(fresh_model("local"), vllm_startup_deadline_s=0.001))
    assert done.returncode == 1
    started = STARTED.search(done.stderr)
    assert started, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "did not answer GET" in errors[0] and "within 0.001 s" in errors[0]
    assert f"vLLM (pid {started[1]}) ended" in done.stderr
    assert not process_alive(int(started[1]))
