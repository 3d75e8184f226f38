"""Every shipped server, started once by `gym run` from the shipped configs, for the reliability tests;
the routes each one publishes in its OpenAPI document, and a tally of the answers the tests got.

The deployment holds each resources server of `resources_servers/*/configs/*.yaml`, one simple agent, one
gymnasium agent, the agents of PAIRED_AGENTS and TEMPLATE_AGENTS, the model servers of MODEL_CONFIGS (each
from its own shipped config, with MODEL_SETTINGS) and the head server. The models that call an LLM are
pointed at the scripted upstream on 127.0.0.1, which answers every unscripted request with a plain assistant
message; those that need token ids (VLLM_UPSTREAM_MODELS) at the fake vLLM of tests/vllm_upstream.py, which answers it with a
default turn.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import requests
import yaml

from nemo_gym.testing import read_jsonl
from tests.helpers import (
    BIG_DEPLOYMENT_READINESS_S,
    FOLDER_CLIS,
    REPO_ROOT,
    missing_program,
    running_deployment,
)
from tests.upstream_script import ScriptedUpstream, fresh_model
from tests.vllm_script import VllmUpstream

HEAD = "head_server"
# One agent of each kind is enough: environments ship the same agents, only their resources server differs.
AGENT = "example_single_tool_call_simple_agent"
GYMNASIUM_AGENT = "blackjack_gymnasium_agent"
# Agents no environment ships with as its main agent: a shipped pairing, or the agent's own template config
# pointed at an environment (instance name -> resources server instance).
PAIRED_AGENTS = (
    "proof_judge_proof_refinement_agent",
    "image_tools_simple_agent",
    "gdp_pdf_agent",
    "toolsandbox_toolsandbox_agent",
    "conversational_tool_use_agent",
    "example_session_state_mgmt_simple_agent_with_compaction",
    "single_step_tool_use_with_argument_comparison_agent",
    # langgraph_agent, one instance per graph entrypoint, and langchain_deepagents_agent, on reasoning_gym.
    "reasoning_gym_langgraph_agent",
    "reasoning_gym_orchestrator_agent",
    "reasoning_gym_parallel_thinking_agent",
    "reasoning_gym_rewoo_agent",
    "reasoning_gym_langchain_deepagents_agent_model_server",
    "gsm8k_aviary_agent",
)
TEMPLATE_AGENTS = {
    "non_executing_simple_agent": "xlam_fc",
    "remote_agent": "example_session_state_mgmt_resources_server",
    "claude_code_agent": "string_match",
    "codex_agent": "string_match",
    "haystack_agent": "aviary",
    "cline_agent": "string_match",
    "opencode_agent": "string_match",
}
# Agents that need no resources server (their environment runs inside them), from their own shipped config.
SELF_CONTAINED_AGENTS = ("verifiers_agent",)
# One instance of each environment server, all in front of AGENT.
ENVIRONMENT_SERVERS = {
    "episodes_environment_server": "single_agent_turn",
    "flat_episodes_environment_server": "single_agent_turn_legacy",
    "relay_environment_server": "legacy_agent",
}
MODEL_CONFIGS = {
    "policy_model": "responses_api_models/openai_model/configs/openai_model.yaml",
    "vllm_policy_model": "responses_api_models/vllm_model/configs/vllm_model.yaml",
    "replay_policy_model": "responses_api_models/replay_model/configs/replay_model.yaml",
    "compaction_policy_model": (
        "responses_api_models/vllm_model_with_compaction/configs/vllm_model_for_compaction.yaml"
    ),
    "azure_policy_model": "responses_api_models/azure_openai_model/configs/azure_openai_model.yaml",
    "litellm_policy_model": "responses_api_models/litellm_model/configs/litellm_model.yaml",
    "provider_policy_model": "responses_api_models/inference_provider/configs/inference_provider.yaml",
    "switchyard_policy_model": "responses_api_models/switchyard_model/configs/switchyard_model.yaml",
    "local_vllm_policy_model": "responses_api_models/local_vllm_model/configs/local_vllm_model.yaml",
}
# What the provider model servers need to call the scripted upstream. azure_openai_model takes its base URL,
# which ends in /v1, as Azure's v1 API (the deployment in the body; the api-version is sent and ignored);
# switchyard_model attaches to it as if it were the proxy (the route is the model name); it serves no
# LiteLLM readiness route, so litellm_model's version check is off. Their own tests (each folder's tests/)
# run them against stand-ins that speak each provider's API (tests/provider_gateways.py).
MODEL_SETTINGS = {
    "litellm_policy_model": {"verify_proxy_version": False},
    "switchyard_policy_model": {"switchyard_base_url": "${policy_base_url}"},
}
# Models whose training mode needs token ids and log-probs the scripted upstream does not give: they call
# the fake vLLM of tests/vllm_upstream.py instead (instance name -> implementation). local_vllm_model is
# given that vLLM's address, so it starts none (its folder's tests start one as its child).
VLLM_UPSTREAM_MODELS = {
    "compaction_policy_model": "vllm_model_with_compaction",
    "local_vllm_policy_model": "local_vllm_model",
}
# Short enough that a request stuck on a peer or the upstream ends well inside a test's budget.
HTTP_DEADLINE_S = 10
# How long a test waits for any answer: above HTTP_DEADLINE_S, so a server waiting on a peer answers first.
ANSWER_TIMEOUT_S = 15
OPENAPI_TIMEOUT_S = 10
# Values for path parameters that reach a handler's real work: a tool that exists on that server.
PATH_PARAMETER_VALUES = {"math_advanced_calculations": "add", "workplace_assistant": "email_search_emails"}
MAX_EXAMPLE_DEPTH = 12


@dataclass(frozen=True)
class Route:
    """One operation of a server's OpenAPI document, with its path parameters filled in."""

    method: str
    template: str
    path: str
    body_schema: dict[str, Any] | None


@dataclass(frozen=True)
class ShippedData:
    """The first task row and the first recorded rollout an environment ships (data/example*.jsonl)."""

    row: dict[str, Any]
    rollout: dict[str, Any]


@dataclass(frozen=True)
class Server:
    """One running server: its instance name, address, the OpenAPI document it serves and the shipped
    data of the environment it serves (see `shipped_data`)."""

    name: str
    url: str
    openapi: dict[str, Any]
    data: ShippedData | None

    def seed(self, session: requests.Session) -> None:
        """Seed the session of a resources server with its first task row, as an agent starts a rollout,
        so /verify and the tools then run on state that looks like a rollout's."""
        if self.data is None or "/seed_session" not in self.openapi["paths"]:
            return
        answer = session.post(f"{self.url}/seed_session", json=self.data.row, timeout=ANSWER_TIMEOUT_S)
        assert answer.status_code == 200, f"{self.name} refused its own example row: {answer.text}"

    def baseline(self, route: Route) -> Any:
        """A body meant to pass: the environment's shipped data for the routes that take it, else a small
        instance of the route's schema. A CLI agent's task would run a whole CLI for seconds, past this
        tier's short deadline on a busy machine (its folder's tests run real ones): its bodies start from a
        task it refuses before starting the CLI."""
        if self.name in FOLDER_CLIS and route.template in ("/run", "/v1/responses"):
            params = {"input": []}
            return {"responses_create_params": params} if route.template == "/run" else params
        if self.data is not None:
            shipped = {
                "/seed_session": self.data.row,
                "/run": self.data.row,
                "/v1/responses": self.data.rollout["responses_create_params"],
                "/verify": {**self.data.row, "response": self.data.rollout["response"]},
                "/reset": self.data.row,
                "/step": {**self.data.row, "response": self.data.rollout["response"]},
                "/aggregate_metrics": {"verify_responses": [self.data.rollout]},
            }
            if (
                route.template == "/run"
                and "SingleAgentTurnRequest" in orjson.dumps(route.body_schema or {}).decode()
            ):
                return episode_of(self.data.row)
            if route.template in shipped:
                return shipped[route.template]
        return {} if route.body_schema is None else self.example(route.body_schema)

    def routes(self) -> list[Route]:
        value = PATH_PARAMETER_VALUES.get(self.name, "x")
        return [
            Route(method.upper(), template, template.replace("{path}", value), body_schema(operation))
            for template, operations in self.openapi["paths"].items()
            for method, operation in operations.items()
        ]

    def resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        """`schema` itself, or the component its `$ref` names."""
        while "$ref" in schema:
            schema = self.openapi["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
        return schema

    def example(self, schema: dict[str, Any], depth: int = 0) -> Any:
        """A small instance of `schema`: required fields only, first alternative of a union, one item per
        array. It aims at passing validation, so mutations of it reach the handler's own code."""
        schema = self.resolve(schema)
        if "const" in schema or "enum" in schema:
            return schema.get("const", (schema.get("enum") or [None])[0])
        alternatives = schema.get("anyOf") or schema.get("oneOf") or schema.get("allOf")
        if alternatives and depth < MAX_EXAMPLE_DEPTH:
            return self.example(alternatives[0], depth + 1)
        kind = schema.get("type")
        if (kind == "object" or "properties" in schema) and depth < MAX_EXAMPLE_DEPTH:
            properties = schema.get("properties", {})
            return {
                name: self.example(properties.get(name, {}), depth + 1) for name in schema.get("required", [])
            }
        if kind == "array" and depth < MAX_EXAMPLE_DEPTH:
            return [self.example(schema.get("items", {}), depth + 1)]
        return {"integer": 0, "number": 0.5, "boolean": False, "null": None}.get(kind, "x")


def episode_of(row: dict[str, Any]) -> dict[str, Any]:
    """A task row as an environment server's episode request."""
    task_input = {"responses_create_params": row["responses_create_params"],
                  "task_data": {key: value for key, value in row.items() if key != "responses_create_params"}}  # fmt: skip
    return {"episode_id": {"rollout_id": "0-0"}, "task": {"task_id": {"taskset": "example", "task_id": "0"},
                                                           "task_input": task_input}}  # fmt: skip


def body_schema(operation: dict[str, Any]) -> dict[str, Any] | None:
    content = operation.get("requestBody", {}).get("content", {})
    return content.get("application/json", {}).get("schema")


def shipped_instances() -> dict[str, Any]:
    """The shipped instance blocks of every server, as one config; the models renamed apart."""
    config: dict[str, Any] = {}
    for path in sorted(REPO_ROOT.glob("resources_servers/*/configs/*.yaml")):
        if reason := missing_program(path.parents[1].name):
            warnings.warn(f"left out of the reliability deployment: {reason}", stacklevel=1)
            continue
        for name, block in yaml.safe_load(path.read_text()).items():
            if "resources_servers" in block or name in (AGENT, GYMNASIUM_AGENT, *PAIRED_AGENTS):
                config[name] = block
    for name, resources in TEMPLATE_AGENTS.items():
        if reason := missing_program(name):
            warnings.warn(f"left out of the reliability deployment: {reason}", stacklevel=1)
            continue
        block = yaml.safe_load(
            (REPO_ROOT / "responses_api_agents" / name / "configs" / f"{name}.yaml").read_text()
        )
        block[name]["responses_api_agents"][name]["resources_server"]["name"] = resources
        config[name] = block[name]
    for name in SELF_CONTAINED_AGENTS:
        path = REPO_ROOT / "responses_api_agents" / name / "configs" / f"{name}.yaml"
        config[name] = yaml.safe_load(path.read_text())[name]
    for name, path in MODEL_CONFIGS.items():
        config[name] = yaml.safe_load((REPO_ROOT / path).read_text())["policy_model"]
        for inner in config[name]["responses_api_models"].values():
            inner.update(MODEL_SETTINGS.get(name, {}))
    agent = {"type": "responses_api_agents", "name": AGENT}
    resources = config[AGENT]["responses_api_agents"]["simple_agent"]["resources_server"]
    for name, implementation in ENVIRONMENT_SERVERS.items():
        settings: dict[str, Any] = {"entrypoint": "app.py", "agent_server": agent}
        if implementation != "legacy_agent":
            settings |= {"resources_server": resources, "resources_tool_transports": ["direct_http"],
                         "cleanup_timeout_seconds": HTTP_DEADLINE_S}  # fmt: skip
        config[name] = {"environment_servers": {implementation: settings}}
    return config


SERVER_NAMES = [HEAD, *sorted(shipped_instances())]


def shipped_data(instance: str) -> ShippedData | None:
    """The data of the environment a resources server instance (or an agent, through its resources
    server) belongs to; None for the head server."""
    block = shipped_instances().get(instance, {})
    if "responses_api_models" in block:
        # The replay model's shipped recordings are of this agent's environment; the other models take
        # the same requests.
        block = shipped_instances()[AGENT]
    for environment_server in block.get("environment_servers", {}).values():
        block = shipped_instances()[environment_server["agent_server"]["name"]]
    for agent in block.get("responses_api_agents", {}).values():
        if agent.get("resources_server") is None:
            return None  # a self-contained agent: no environment's data to probe it with
        block = shipped_instances()[agent["resources_server"]["name"]]
    implementations = block.get("resources_servers")
    if implementations is None:
        return None
    folder = REPO_ROOT / "resources_servers" / next(iter(implementations)) / "data"
    return ShippedData(
        read_jsonl(folder / "example.jsonl")[0], read_jsonl(folder / "example_rollouts.jsonl")[0]
    )


def fetch_openapi(url: str) -> dict[str, Any]:
    answer = requests.get(f"{url}/openapi.json", timeout=OPENAPI_TIMEOUT_S)
    answer.raise_for_status()
    return answer.json()


@contextmanager
def every_shipped_server(
    upstream: ScriptedUpstream, vllm_upstream: VllmUpstream, workdir: Path
) -> Iterator[dict[str, Server]]:
    """Run the whole deployment until the caller is done; servers by instance name (and `head_server`)."""
    instances = shipped_instances()
    for name, implementation in VLLM_UPSTREAM_MODELS.items():
        instances[name]["responses_api_models"][implementation]["base_url"] = vllm_upstream.base_url
    config = {
        **instances,
        "policy_base_url": upstream.base_url,
        # remote_agent's template asks for it: the scripted upstream stands for a user's agent service, since
        # it answers `POST /v1/responses` as one does (a plain assistant message, unless scripted).
        "remote_agent_base_url": upstream.url,
        "policy_api_key": "sk-reliability",
        "policy_model_name": fresh_model("reliability"),
        "global_http_deadline_s": HTTP_DEADLINE_S,
        # Forty servers start slowly on a busy machine; the launcher names any that never comes up.
        "readiness_deadline_s": BIG_DEPLOYMENT_READINESS_S,
    }
    config_file = workdir / "every_shipped_server.yaml"
    config_file.write_text(yaml.safe_dump(config))
    with running_deployment(["--config", str(config_file)], REPO_ROOT) as running:
        urls = {HEAD: running.head_url} | {name: running.url(name) for name in running.instances}
        yield {name: Server(name, url, fetch_openapi(url), shipped_data(name)) for name, url in urls.items()}


def by_name(counters: dict[str, Counter[str]]) -> dict[str, dict[str, int]]:
    return {name: dict(sorted(counts.items())) for name, counts in sorted(counters.items())}


def status_class(status: int | None) -> str:
    return "no_answer" if status is None else f"{status // 100}xx"


@dataclass
class Tally:
    """How many inputs were tried and what came back, overall and per server, for the issue's note."""

    title: str
    by_server: dict[str, Counter[str]] = field(default_factory=dict)
    by_input: dict[str, Counter[str]] = field(default_factory=dict)

    def add(self, server: str, input_kind: str, status: int | None) -> None:
        """Count one answer; `input_kind` groups inputs across servers (e.g. `top_level_nan`)."""
        self.by_server.setdefault(server, Counter())[status_class(status)] += 1
        self.by_input.setdefault(input_kind, Counter())[status_class(status)] += 1

    def summary(self) -> dict[str, Any]:
        total = sum(self.by_server.values(), Counter())
        return {
            "title": self.title,
            "inputs_tried": total.total(),
            "by_status_class": dict(sorted(total.items())),
            "by_server": by_name(self.by_server),
            "by_input": by_name(self.by_input),
        }

    def publish(self, folder: Path) -> Path:
        """Write the summary as JSON and print it with the file's path (seen with `pytest -s`)."""
        path = folder / f"{self.title}.json"
        summary = self.summary()
        path.write_bytes(orjson.dumps(summary, option=orjson.OPT_INDENT_2))
        print(f"\n{self.title}: {summary['inputs_tried']} inputs, {summary['by_status_class']} -> {path}")
        return path
