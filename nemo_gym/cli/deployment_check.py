"""`gym eval health-check` without a run folder: is a deployment fit to collect, before hours are spent?

Three kinds of check, each with its own short deadline so that a dead model fails in seconds rather than
after the retry loops of a collection: every server answers `GET /`; every model server answers one tiny
`/v1/responses`; every agent runs its first example row (one `/run`, through its environment server when
one fronts it), which exercises the model, the tools and `/verify` end to end. The agents' rollouts are
only tried once the servers and models passed: a rollout through a dead model says nothing new.
`gym eval run` runs the same checks after its deployment is up and before any rollout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import orjson
from omegaconf import DictConfig

from nemo_gym.cli.status import deployment_instances, health_of
from nemo_gym.collection.records import FAILURE_MESSAGE_KEY, error_message
from nemo_gym.collection.runner import RolloutRunner
from nemo_gym.config import server_kinds
from nemo_gym.config.discovery import resolve_instance_config
from nemo_gym.config.errors import ConfigError
from nemo_gym.config.jsonl import FAILURE_CLASS_KEY, ROLLOUT_INDEX_KEY, TASK_INDEX_KEY
from nemo_gym.config.server_refs import AGENT_REF_KEY
from nemo_gym.config.settings import locate_data_file
from nemo_gym.datasets.collation import agent_datasets
from nemo_gym.datasets.prompts import has_prompt_input, load_prompt_config, prompted_row
from nemo_gym.http.client import RequestFailedError, RetryPolicy, request
from nemo_gym.http.deadlines import budget
from nemo_gym.serving.servers import ServerClient

DEFAULT_CHECK_TIMEOUT_S = 60.0
TIMEOUT_KEY = "health_check_timeout_s"
MODEL_SERVER_TYPE = server_kinds.MODEL.key
AGENT_SERVER_TYPE = server_kinds.AGENT.key
PROBE = {"input": [{"role": "user", "content": "Reply with the word OK."}], "max_output_tokens": 16}
# replay_model's answer to a request it has no recording of: it is up, and plays only what it recorded.
RECORDING_MISS = "unknown_task"
EXAMPLE_SPLIT = "example"
ENVIRONMENTS_NOT_RUN = "environment checks not run: they need every server and model to answer first"


@dataclass(frozen=True)
class Check:
    """One check's outcome: `kind` is server, model or environment; `name` the instance."""

    kind: str
    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{'ok' if self.ok else 'FAILED'} {self.kind} {self.name}: {self.detail}"


def check_timeout_s(cfg: DictConfig) -> float:
    """`health_check_timeout_s` of the command's config: each check's deadline."""
    given = cfg.get(TIMEOUT_KEY)
    if given is None:
        return DEFAULT_CHECK_TIMEOUT_S
    try:
        seconds = float(given)
    except (TypeError, ValueError):
        seconds = 0.0
    if not seconds > 0:
        raise ConfigError(f"{TIMEOUT_KEY} must be a number of seconds > 0, got {given!r}")
    return seconds


async def check_deployment(client: ServerClient, deadline_s: float) -> list[Check]:
    """Every check of the deployment `client` reaches, in order: servers, models, environments; each
    within `deadline_s`."""
    head = client.head_server_config
    instances = await deployment_instances(f"http://{head.host}:{head.port}")
    statuses = await asyncio.gather(*(health_of(instance) for instance in instances))
    checks = [Check("server", "head_server", True, "answers")] + [
        Check("server", instance["process_name"], status == "success", "answers" if status == "success" else
              f"does not answer at {instance['url']} ({status.replace('_', ' ')})")
        for instance, status in zip(instances, statuses, strict=True)
    ]  # fmt: skip
    live = {check.name for check in checks if check.ok}
    models = [i for i in instances if i["server_type"] == MODEL_SERVER_TYPE and i["process_name"] in live]
    checks += await asyncio.gather(*(model_check(model, deadline_s) for model in models))
    if all(check.ok for check in checks):
        agents = [i["process_name"] for i in instances if i["server_type"] == AGENT_SERVER_TYPE]
        checks += await environment_checks(client, agents, deadline_s)
    return checks


async def model_check(instance: dict[str, Any], deadline_s: float) -> Check:
    """One tiny `/v1/responses`; the model server's own bounded retries end within `deadline_s`, which
    it is told in the deadline header."""
    name = instance["process_name"]
    policy = RetryPolicy(max_attempts=1, deadline_s=deadline_s, connect_timeout_s=min(5.0, deadline_s))
    try:
        with budget(deadline_s):
            response = await request(
                "POST", instance["url"] + "/v1/responses", json=PROBE, retry_policy=policy, _internal=True
            )
            body = await response.read()
    except RequestFailedError as error:
        return Check("model", name, False, f"no answer ({error})")
    if response.status == 404 and _error_type(body) == RECORDING_MISS:
        return Check("model", name, True, "answers (replays recorded turns only)")
    if response.status != 200:
        return Check("model", name, False, f"answered HTTP {response.status}: {error_message(body)}")
    usage = (_json_object(body) or {}).get("usage") or {}
    tokens = usage.get("output_tokens")
    return Check(
        "model", name, True, "answers" + (f" ({tokens} output tokens)" if tokens is not None else "")
    )


async def environment_checks(client: ServerClient, agents: list[str], deadline_s: float) -> list[Check]:
    """One rollout of each agent's first example row (else the first row of its first dataset)."""
    runner = RolloutRunner(client, max_in_flight=max(1, len(agents)), rollout_timeout_s=deadline_s)
    rows = first_rows(client.global_config_dict, agents)

    async def run(agent: str) -> Check:
        row = rows.get(agent, NoRow("skipped: its config lists no dataset"))
        cohort = cohort_size(client.global_config_dict, agent)
        if cohort > 1:
            row = NoRow(
                f"skipped: its resources server grades cohorts of {cohort} rollouts of one prompt "
                "(num_rollouts_per_prompt), so one example rollout cannot be graded"
            )
        if isinstance(row, NoRow):
            return Check("environment", agent, not row.broken, row.reason)
        result = await runner.run_one(row)
        if FAILURE_CLASS_KEY in result:
            cause = result.get(FAILURE_MESSAGE_KEY) or result[FAILURE_CLASS_KEY]
            return Check("environment", agent, False, f"its first example row failed: {cause}")
        return Check("environment", agent, True, f"first example row verified (reward {result['reward']:g})")

    return list(await asyncio.gather(*(run(agent) for agent in agents)))


def cohort_size(cfg: DictConfig, agent: str) -> int:
    """How many rollouts of one prompt the agent's resources server grades together (NeMo Gym's
    `num_rollouts_per_prompt`, as genrm_compare's relative rewards need); 1 for per-rollout grading. A lone
    probe rollout would wait for siblings that never come, and would join the real run's first cohort."""
    agent_config = resolve_instance_config(cfg, agent)
    reference = agent_config.get("resources_server")
    if not isinstance(reference, Mapping) or not isinstance(reference.get("name"), str):
        return 1
    resources_config = resolve_instance_config(cfg, reference["name"])
    size = resources_config.get("num_rollouts_per_prompt", 1)
    return size if isinstance(size, int) else 1


@dataclass(frozen=True)
class NoRow:
    """Why an agent has no row to run: nothing to try (`broken` False), or a first row that is no task."""

    reason: str
    broken: bool = False


def first_rows(cfg: DictConfig, agents: list[str]) -> dict[str, dict[str, Any] | NoRow]:
    """Each agent's first row to try: from its example dataset if it has one, else its first dataset."""
    by_agent: dict[str, list[Any]] = {}
    for entry in agent_datasets(cfg):
        if entry.agent_name in agents:
            by_agent.setdefault(entry.agent_name, []).append(entry.dataset)
    rows: dict[str, dict[str, Any] | NoRow] = {}
    for agent, datasets in by_agent.items():
        dataset = next((d for d in datasets if d.type == EXAMPLE_SPLIT), datasets[0])
        try:
            path = locate_data_file(str(dataset.jsonl_fpath), "jsonl_fpath")
            with path.open("rb") as lines:
                first = next((line for line in lines if line.strip()), b"")
        except (OSError, ConfigError):
            rows[agent] = NoRow(f"skipped: its dataset {dataset.jsonl_fpath} is not there (prepare it first)")
            continue
        row = _json_object(first) if first else None
        if not first:
            rows[agent] = NoRow(f"skipped: its dataset {path} has no rows")
        elif row is None:
            rows[agent] = NoRow(f"the first row of {path} is not a JSON object", broken=True)
        else:
            try:
                row = _with_prompt(row, dataset, f"{path}:1")
            except ConfigError as error:
                rows[agent] = NoRow(str(error), broken=True)
                continue
            rows[agent] = {**row, AGENT_REF_KEY: {"name": agent}, TASK_INDEX_KEY: 0, ROLLOUT_INDEX_KEY: 0}
    return rows


def _with_prompt(row: dict[str, Any], dataset: Any, where: str) -> dict[str, Any]:
    """The row as collection would send it: a benchmark's raw row gets its dataset's prompt applied."""
    templates = getattr(dataset, "prompt_config", None)
    if templates is None or has_prompt_input(row):
        return row
    return prompted_row(row, load_prompt_config(str(templates)), where)


def _json_object(raw: bytes) -> dict[str, Any] | None:
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _error_type(body: bytes) -> str | None:
    error = (_json_object(body) or {}).get("error")
    return error.get("type") if isinstance(error, dict) else None


def report(checks: list[Check], as_json: bool) -> str:
    """One line per check (or the JSON of all of them), and the verdict."""
    ok = all(check.ok for check in checks)
    if as_json:
        return orjson.dumps(
            {"ok": ok, "checks": [asdict(c) for c in checks]}, option=orjson.OPT_INDENT_2
        ).decode()
    failed = sum(not check.ok for check in checks)
    skipped = [] if ok or any(check.kind == "environment" for check in checks) else [ENVIRONMENTS_NOT_RUN]
    verdict = "Health check passed." if ok else f"Health check FAILED: {failed} of {len(checks)} check(s)."
    return "\n".join([*(check.line() for check in checks), *skipped, verdict])
