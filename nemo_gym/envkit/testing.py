"""Start an environment's server as a real subprocess from a test, and learn the address it bound.

Environment tests talk HTTP to the server exactly as `gym run` starts it: `run_instance(config, name,
workdir)` writes the config to a file, starts `<type>/<implementation>/app.py` with port 0 and yields once
the server reports the port it bound. The server is always stopped afterwards, by its pid.

The rest is what environment tests (`resources_servers/*/tests/test_app.py`) all need around that: start
one resources server (`run_resources_server`), POST JSON to it (`post_json`), build Responses-API output
to verify (`response_with`, `message_item`, `function_call_item`) and check the folder's shipped config
(`check_environment_config`); and, for pages, a headless Chromium (`headless_chromium`).
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import orjson
import yaml

from nemo_gym.config import server_kinds
from nemo_gym.config.server_instances import validate_server_instance_config
from nemo_gym.config.sources import install_root
from nemo_gym.http.client import get_response_json, request
from nemo_gym.http.sessions import SESSION_ID_KEY
from nemo_gym.serving.servers import CHECK_CONFIG_ONLY_ENV_VAR_NAME

# Only a guard against a server that hangs before binding (one that exits is reported at once): generous,
# so that a test on a heavily loaded machine waits for the server rather than failing.
STARTUP_DEADLINE_S = 120.0


@dataclass
class StartedServer:
    process: subprocess.Popen
    host: str
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def wait_for_bound_address(process: subprocess.Popen, address_file: Path, log_path: Path) -> dict:
    """Poll for the address file the server writes once its socket is listening (bounded in time)."""
    deadline = time.monotonic() + STARTUP_DEADLINE_S
    while time.monotonic() < deadline:
        if address_file.exists():
            return orjson.loads(address_file.read_bytes())
        if process.poll() is not None:
            raise RuntimeError(
                f"server exited with {process.returncode} before binding:\n{log_path.read_text()}"
            )
        time.sleep(0.02)
    raise TimeoutError(f"server did not bind within {STARTUP_DEADLINE_S}s:\n{log_path.read_text()}")


@contextmanager
def run_server(
    args: list[str], workdir: Path, env: dict[str, str] | None = None, cwd: Path | None = None
) -> Iterator[StartedServer]:
    """Run `python <args>` as a subprocess, yield once it listens, and always stop it (by its pid)."""
    address_file = workdir / f"bound-{time.monotonic_ns()}.json"
    log_path = workdir / f"server-{time.monotonic_ns()}.log"
    full_env = {**os.environ, **(env or {}), "NEMO_GYM_BOUND_ADDRESS_FILE": str(address_file)}
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(install_root()), full_env.get("PYTHONPATH")]))
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, *args], env=full_env, stdout=log, stderr=subprocess.STDOUT, cwd=cwd
        )
    try:
        address = wait_for_bound_address(process, address_file, log_path)
        yield StartedServer(process, address["host"], address["port"], log_path)
    finally:
        stop_process(process)


def stop_process(process: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `grace_s`; always reaped."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


def instance_config(server_type: str, implementation: str, **inner: object) -> dict:
    """The config block of one instance: `{server_type: {implementation: {entrypoint, host, port, ...}}}`.

    `port` defaults to 0: the server binds a free port itself and reports it (see `run_instance`).
    """
    return {server_type: {implementation: {"entrypoint": "app.py", "host": "127.0.0.1", "port": 0, **inner}}}


def implementation_folder(server_type: str, implementation: str) -> Path:
    """`<type>/<implementation>` under the current directory if it is there, else under the install root."""
    local = Path.cwd() / server_type / implementation
    return local if local.is_dir() else install_root() / server_type / implementation


@contextmanager
def run_instance(
    config: dict, instance_name: str, workdir: Path, env: dict[str, str] | None = None
) -> Iterator[StartedServer]:
    """Start one instance of `config` from its implementation folder's `app.py`, as `gym run` would.

    `config` maps instance names to `instance_config(...)` blocks; peers the instance calls must be in it
    with their real ports. The config is handed over as a file (NEMO_GYM_CONFIG_FILE).
    """
    server_type, implementations = next(iter(config[instance_name].items()))
    implementation, inner = next(iter(implementations.items()))
    app_path = implementation_folder(server_type, implementation) / inner["entrypoint"]
    config_file = workdir / f"config-{instance_name}-{time.monotonic_ns()}.yaml"
    config_file.write_bytes(orjson.dumps(config))  # JSON is YAML
    instance_env = {"NEMO_GYM_CONFIG_FILE": str(config_file), "NEMO_GYM_CONFIG_PATH": instance_name}
    with run_server([str(app_path)], workdir, {**instance_env, **(env or {})}, cwd=app_path.parent) as server:
        yield server


class ScriptedModels(Protocol):
    """The control side of the scripted upstream LLM (tests/upstream_script.py `ScriptedUpstream`)."""

    @property
    def base_url(self) -> str: ...

    def script(self, model: str, steps: list[dict[str, Any]]) -> None: ...

    def requests(self, model: str) -> list[dict[str, Any]]: ...

    def clear(self, model: str) -> None: ...


JUDGE_MODEL_REF = {"type": server_kinds.MODEL.key, "name": "judge_model"}


@dataclass
class ScriptedJudge:
    """A judge model for a test: an openai_model instance `judge_model` in front of the scripted upstream.

    `config` holds that instance with its bound port; merge it into the config of a resources server whose
    `judge_model_server` is `JUDGE_MODEL_REF`.
    """

    upstream: ScriptedModels
    model: str
    config: dict[str, Any]
    seen_before: int = 0

    def script(self, *answers: str | dict) -> None:
        """One upstream answer per judge call, replacing what was left: the judge's text, or a raw step."""
        self.upstream.clear(self.model)
        self.seen_before = len(self.upstream.requests(self.model))
        steps = [a if isinstance(a, dict) else {"output": [message_item(a)]} for a in answers]
        self.upstream.script(self.model, steps)

    def requests(self) -> list[dict]:
        """The request bodies the judge model received since the last `script`."""
        return [entry["body"] for entry in self.upstream.requests(self.model)[self.seen_before :]]


@contextmanager
def run_scripted_judge(upstream: ScriptedModels, workdir: Path) -> Iterator[ScriptedJudge]:
    """Start the `judge_model` openai_model server on a model name of its own on `upstream`."""
    model = f"judge-{uuid.uuid4().hex}"
    config = {
        "judge_model": instance_config(
            server_kinds.MODEL.key,
            "openai_model",
            openai_base_url=upstream.base_url,
            openai_api_key="sk-judge-test",
            openai_model=model,
            max_attempts=1,
        )
    }
    with run_instance(config, "judge_model", workdir) as started:
        config["judge_model"][server_kinds.MODEL.key]["openai_model"]["port"] = started.port
        yield ScriptedJudge(upstream, model, config)


@dataclass
class JudgedServer:
    """A judged environment's server under test and the scripted judge it asks."""

    server: StartedServer
    judge: ScriptedJudge

    @property
    def url(self) -> str:
        return self.server.url


@contextmanager
def run_judged_server(
    upstream: ScriptedModels, workdir: Path, name: str, **settings: Any
) -> Iterator[JudgedServer]:
    """Start the resources server folder `name` with `settings`, its `judge_model_server` the scripted judge
    (started first, on `upstream`); stop both afterwards."""
    with run_scripted_judge(upstream, workdir) as judge:
        inner = {**settings, "judge_model_server": JUDGE_MODEL_REF}
        config = {**judge.config, name: instance_config(server_kinds.RESOURCES.key, name, **inner)}
        with run_instance(config, name, workdir) as server:
            yield JudgedServer(server, judge)


def start_refusal(config: dict, instance_name: str, workdir: Path) -> list[str]:
    """The stderr lines of instance `instance_name` of `config` started only to check its config, as the
    launcher's preflight does; it must refuse (a nonzero exit), e.g. on a key it cannot serve."""
    server_type, implementations = next(iter(config[instance_name].items()))
    implementation, inner = next(iter(implementations.items()))
    app_path = implementation_folder(server_type, implementation) / inner["entrypoint"]
    config_file = workdir / f"config-{instance_name}-{time.monotonic_ns()}.yaml"
    config_file.write_bytes(orjson.dumps(config))
    env = {
        **os.environ,
        "NEMO_GYM_CONFIG_FILE": str(config_file),
        "NEMO_GYM_CONFIG_PATH": instance_name,
        CHECK_CONFIG_ONLY_ENV_VAR_NAME: "1",
        "PYTHONPATH": str(install_root()),
    }
    done = subprocess.run(
        [sys.executable, str(app_path)],
        capture_output=True, text=True, timeout=STARTUP_DEADLINE_S, env=env, cwd=app_path.parent,
    )  # fmt: skip
    assert done.returncode != 0, f"{instance_name} started although it should refuse:\n{done.stdout}"
    return done.stderr.strip().splitlines()


def shipped_settings(folder: Path, instance: str | None = None) -> dict[str, Any]:
    """The settings of a folder's shipped resources server instance (`configs/<instance>.yaml`, the instance
    and its implementation both named `instance`, by default the folder's name)."""
    name = instance or folder.name
    shipped = yaml.safe_load((folder / "configs" / f"{name}.yaml").read_text())
    return shipped[name][server_kinds.RESOURCES.key][folder.name]


def shipped_instance(config_path: Path, instance: str, **settings: Any) -> dict[str, Any]:
    """Instance `instance` of a shipped config file as a test starts it: its block without `datasets`, bound
    to a free port on 127.0.0.1, `settings` laid over it."""
    block = yaml.safe_load(config_path.read_text())[instance]
    ((server_type, implementations),) = block.items()
    ((implementation, inner),) = implementations.items()
    inner = {key: value for key, value in inner.items() if key != "datasets"}
    return {server_type: {implementation: {**inner, "host": "127.0.0.1", "port": 0, **settings}}}


# A CPU-time budget (not wall time, which a busy machine stretches) far above what linear work on a test's
# pathological input costs and far below what quadratic or backtracking work would: a complexity check,
# not a speed test.
LINEAR_CPU_BUDGET_S = 3.0


def cpu_time_of(fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    """`fn(*args)` and the CPU time this process spent on it."""
    started = time.process_time()
    result = fn(*args)
    return result, time.process_time() - started


def read_jsonl(path: Path) -> list[dict]:
    """The rows of a JSONL file, e.g. an environment's `data/example.jsonl` or its recorded rollouts."""
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


@contextmanager
def run_resources_server(
    instance_name: str,
    workdir: Path,
    *,
    implementation: str | None = None,
    env: dict[str, str] | None = None,
    **inner: object,
) -> Iterator[StartedServer]:
    """Start a lone resources server (no peers) named `instance_name`, as an environment test's fixture does.

    `implementation` defaults to the instance name, the usual case; `inner` is its config (`domain=...`).
    """
    implementation = implementation or instance_name
    config = {instance_name: instance_config(server_kinds.RESOURCES.key, implementation, **inner)}
    with run_instance(config, instance_name, workdir, env) as server:
        yield server


async def post_json(url: str, body: Any = None, *, require_cookie: str | None = None) -> tuple[int, Any]:
    """POST `body` as JSON through the Gym HTTP client, as an agent would, and answer (status, parsed body).

    `require_cookie` names a cookie every answer must set (servers that keep per-rollout sessions).
    """
    response = await request("POST", url, json=body)
    if require_cookie is not None:
        assert require_cookie in response.cookies, "every answer carries the session cookie"
    return response.status, await get_response_json(response)


def session_id_in_cookie(cookie_value: str) -> str:
    """The session id a Gym server's signed session cookie carries (`<base64url JSON>.<issued>.<mac>`), e.g.
    to close that session by id as an environment server would."""
    payload = cookie_value.split(".")[0]
    return orjson.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))[SESSION_ID_KEY]


# What every verify answer carries since NeMo Gym 0.7, as it reads when the rollout was measured normally.
VERIFY_FLAGS = {"mask_sample": False, "failure_kind": None, "failure_reason": None}
# The fields every verify answer has (BaseVerifyResponse's), before an environment adds its own.
BASE_VERIFY_FIELDS = frozenset({*VERIFY_FLAGS, "responses_create_params", "response", "reward"})
# What `/aggregate_metrics` answers for no rollouts at all.
EMPTY_AGGREGATE_METRICS = {
    "group_level_metrics": [],
    "agent_metrics": {},
    "key_metrics": {},
    "repeat_level_metrics": [],
    "perf_summary": None,
}


def without_verify_flags(answer: dict) -> dict:
    """A verify answer as 0.4 gave it, after checking that it flags nothing (for comparing with a recording
    made before 0.7's fields existed)."""
    assert {key: answer.get(key) for key in VERIFY_FLAGS} == VERIFY_FLAGS, answer
    return {key: value for key, value in answer.items() if key not in VERIFY_FLAGS}


def message_item(text: str, id: str = "msg_1") -> dict:
    """An assistant output message saying `text`: what a model's final answer looks like to /verify."""
    content = [{"type": "output_text", "text": text, "annotations": []}]
    return {"type": "message", "role": "assistant", "id": id, "status": "completed", "content": content}


def function_call_item(name: str, arguments: Any, call_id: str = "c1") -> dict:
    """A function-call output item; `arguments` that are not already a string are JSON-encoded, as models do."""
    encoded = arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()
    return {"type": "function_call", "name": name, "arguments": encoded, "call_id": call_id}


def response_with(*items: dict, **fields: Any) -> dict:
    """A Responses-API response whose output is `items`, to hand to /verify.

    The defaults are the fewest fields the schema requires; `fields` add to or replace them, e.g.
    `response_with(*items, **recorded_response)` to keep everything of a recorded response but its output.
    """
    defaults = {
        "id": "resp_test",
        "created_at": 0,
        "model": "test",
        "object": "response",
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    return {**defaults, **fields, "output": list(items)}


def check_environment_config(
    folder: Path,
    resources_instance: str,
    domain: str,
    *,
    agent_instance: str | None = None,
    config_name: str | None = None,
    agent_implementation: str = "simple_agent",
) -> tuple[dict, Any, dict]:
    """Check what every environment's shipped config must hold, and answer (config, resources, agent).

    `configs/<config_name>.yaml` (default: the folder's name) must validate; the resources instance must
    start from app.py in `domain`; the agent (`agent_instance`, default `<folder name>_simple_agent`, of
    `agent_implementation`, default simple_agent) must wire that instance to `policy_model` and list
    `data/example.jsonl` as its example dataset. The
    caller asserts what is particular to its environment on the returned blocks.
    """
    config_name = config_name or folder.name
    agent_instance = agent_instance or f"{folder.name}_simple_agent"
    config = yaml.safe_load((folder / "configs" / f"{config_name}.yaml").read_text())
    instances = {name: validate_server_instance_config(name, block) for name, block in config.items()}
    resources = instances[resources_instance].get_inner_run_server_config()
    assert resources.entrypoint == "app.py" and resources.domain == domain
    agent = config[agent_instance][server_kinds.AGENT.key][agent_implementation]
    assert agent["resources_server"] == {"type": server_kinds.RESOURCES.key, "name": resources_instance}
    assert agent["model_server"] == {"type": server_kinds.MODEL.key, "name": "policy_model"}
    example = next(d for d in instances[agent_instance].datasets if d.type == "example")
    assert (install_root() / example.jsonl_fpath).read_bytes() == (
        folder / "data" / "example.jsonl"
    ).read_bytes()
    return config, resources, agent


# ---------------------------------------------------------------------------------------------------------
# A browser, for pages such as `gym view`'s

# Headless and quiet: no sign-in, sync, updates or other calls home (a closed network refuses them all).
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
    "--disable-background-networking", "--disable-component-update", "--window-size=1500,1000",
)  # fmt: skip


def chromium_paths() -> tuple[str, str] | None:
    """Chromium and ChromeDriver as Debian installs them (`make browser-tools`), or None."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


@contextmanager
def headless_chromium(timeout_s: float = 15.0) -> Iterator[Any]:
    """A selenium WebDriver on a headless Chromium with a fresh profile, quit and cleaned up afterwards."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    paths = chromium_paths()
    if paths is None:
        raise RuntimeError("Chromium and ChromeDriver are not installed; `make browser-tools` installs them")
    options = webdriver.ChromeOptions()
    options.binary_location = paths[0]
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    with tempfile.TemporaryDirectory(prefix="gym-chromium-") as profile:
        options.add_argument(f"--user-data-dir={profile}")
        os.environ.setdefault("SE_AVOID_STATS", "true")  # selenium's usage statistics
        driver = webdriver.Chrome(service=Service(paths[1]), options=options)
        try:
            driver.set_page_load_timeout(timeout_s)
            driver.set_script_timeout(timeout_s)
            yield driver
        finally:
            driver.quit()
